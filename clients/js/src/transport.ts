// The transports a Client can reach corral over, behind one shape: a
// connection that carries corral.v1.json text messages both ways, in
// order, with open and close events. A WebSocket already has that shape;
// the HTTP transports (sse.ts, stream.ts) take it on.

/**
 * TransportName names a way to reach corral: "websocket"; "sse" (the
 * server's messages as Server-Sent Events through EventSource, the
 * client's as fetch POSTs); "stream" (the server's messages in one
 * streamed fetch response, the client's as POSTs). The HTTP ones are for
 * networks whose proxies or antivirus refuse or stall WebSocket upgrades.
 */
export type TransportName = "websocket" | "sse" | "stream";

/** The transports in the order a Client tries them unless told otherwise. */
export const TRANSPORTS: readonly TransportName[] = ["websocket", "sse", "stream"];

/**
 * Conn is one connection of any transport, as a Client drives it: the
 * WebSocket API's part that a Client uses. onopen fires once the peer can
 * be written to; onmessage gives each text message as it came; onclose
 * fires once, with a WebSocket or corral close code (1006 when the network
 * ended it); close() after onclose, or twice, does nothing.
 */
export interface Conn {
  readonly readyState: number;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
}

/** A fetch function: the browser's, or a test's stand-in. */
export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

/** The part of the EventSource API an SSE connection uses. */
export interface EventSourceLike {
  readonly readyState: number;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: string; lastEventId?: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  addEventListener(type: string, fn: (ev: { data: string }) => void): void;
  close(): void;
}
export type EventSourceConstructor = new (url: string, init?: { withCredentials?: boolean }) => EventSourceLike;

/** isTransportName says whether s names a transport (for stored choices). */
export function isTransportName(s: unknown): s is TransportName {
  return typeof s === "string" && (TRANSPORTS as readonly string[]).includes(s);
}

/**
 * httpBase turns the WebSocket endpoint ("wss://host/ws") into the HTTP
 * origin and path prefix the HTTP transports are served under
 * ("https://host"): ws becomes http, wss https; the path's last segment
 * ("ws") is dropped, so a server mounted under a prefix keeps it.
 */
export function httpBase(wsUrl: string): string {
  const u = new URL(wsUrl);
  if (u.protocol === "ws:") u.protocol = "http:";
  else if (u.protocol === "wss:") u.protocol = "https:";
  const path = u.pathname.replace(/\/[^/]*$/, "");
  return `${u.protocol}//${u.host}${path}`;
}
