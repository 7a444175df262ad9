// Stand-ins for the browser: a scriptable WebSocket and sessionStorage.

import { decodeServer } from "../src/codec.js";
import type { StorageLike, WebSocketLike } from "../src/index.js";

/** FakeSocket records what the client sends and lets a test play the server. */
export class FakeSocket implements WebSocketLike {
  static all: FakeSocket[] = [];
  static get last(): FakeSocket {
    const s = FakeSocket.all[FakeSocket.all.length - 1];
    if (!s) throw new Error("no socket was opened");
    return s;
  }

  readyState = 0;
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: { code: number; reason: string }) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;
  /** Every text message the client sent, parsed. */
  sent: Record<string, Record<string, unknown>>[] = [];
  /** The same, as the exact strings. */
  raw: string[] = [];
  closedByClient: { code?: number; reason?: string } | null = null;

  constructor(
    readonly url: string,
    readonly protocols: string | string[],
  ) {
    FakeSocket.all.push(this);
  }

  send(data: string): void {
    if (this.readyState !== 1) throw new Error("send on a socket that is not open");
    this.raw.push(data);
    this.sent.push(JSON.parse(data));
  }

  close(code?: number, reason?: string): void {
    this.closedByClient = { code, reason };
    this.readyState = 3;
  }

  // ---- the server's side ----

  open(): void {
    this.readyState = 1;
    this.onopen?.({});
  }

  /** serve delivers one server message (an object is JSON-encoded). */
  serve(msg: string | object): void {
    const data = typeof msg === "string" ? msg : JSON.stringify(msg);
    decodeServer(data); // a test must only send what a server could
    this.onmessage?.({ data });
  }

  /** hang up as the server or the network would. */
  drop(code = 1006, reason = ""): void {
    this.readyState = 3;
    this.onclose?.({ code, reason });
  }

  /** kinds lists the kinds of frames sent, in order. */
  kinds(): string[] {
    return this.sent.map((f) => Object.keys(f)[0]!);
  }

  /** framesOf returns the bodies of the sent frames of one kind. */
  framesOf(kind: string): Record<string, unknown>[] {
    return this.sent.filter((f) => kind in f).map((f) => f[kind]!);
  }
}

export class MemoryStorage implements StorageLike {
  readonly map = new Map<string, string>();
  getItem(k: string): string | null {
    return this.map.get(k) ?? null;
  }
  setItem(k: string, v: string): void {
    this.map.set(k, v);
  }
  removeItem(k: string): void {
    this.map.delete(k);
  }
}

/** settle lets pending promise callbacks run (timers are mocked, not this). */
export async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise<void>((r) => setImmediate(r));
}

/** seq returns a random() that yields the given values in turn, then 0.5. */
export function seq(...values: number[]): () => number {
  let i = 0;
  return () => (i < values.length ? values[i++]! : 0.5);
}

/** FakeEventSource is an EventSource a test drives as the edge would. */
export class FakeEventSource {
  static all: FakeEventSource[] = [];
  static get last(): FakeEventSource {
    const s = FakeEventSource.all[FakeEventSource.all.length - 1];
    if (!s) throw new Error("no event source was opened");
    return s;
  }

  readyState = 0;
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: string; lastEventId?: string }) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;
  closed = false;
  private readonly listeners = new Map<string, ((ev: { data: string }) => void)[]>();
  private nextId = 0;

  constructor(readonly url: string) {
    FakeEventSource.all.push(this);
  }

  addEventListener(type: string, fn: (ev: { data: string }) => void): void {
    this.listeners.set(type, [...(this.listeners.get(type) ?? []), fn]);
  }

  close(): void {
    this.closed = true;
    this.readyState = 2;
  }

  /** The stream id of the URL. */
  get stream(): string {
    return new URL(this.url).searchParams.get("stream") ?? "";
  }

  // ---- the edge's side ----

  event(type: string, data: string): void {
    if (this.closed) throw new Error(`event ${type} on a closed event source`);
    for (const fn of this.listeners.get(type) ?? []) fn({ data });
  }

  /** open sends corral-open with a secret. */
  open(secret = "sekrit"): void {
    this.readyState = 1;
    this.onopen?.({});
    this.event("corral-open", JSON.stringify({ stream: this.stream, secret, heartbeatMs: 15000 }));
  }

  serve(msg: string | object): void {
    const data = typeof msg === "string" ? msg : JSON.stringify(msg);
    decodeServer(data);
    if (this.closed) throw new Error("message on a closed event source");
    this.onmessage?.({ data, lastEventId: String(++this.nextId) });
  }

  fail(): void {
    this.readyState = 2;
    this.onerror?.({});
  }
}

/** A request a FakeFetch holds until the test answers it. */
export interface HeldRequest {
  url: string;
  init: RequestInit;
  /** The body, split into its NDJSON frames, parsed. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- test data
  frames: Record<string, any>[];
  header(name: string): string;
  respond(res: Response): void;
  reject(err: Error): void;
}

/** FakeFetch records requests; each waits for the test's answer. */
export class FakeFetch {
  readonly requests: HeldRequest[] = [];

  readonly fetch = (url: string, init: RequestInit = {}): Promise<Response> =>
    new Promise<Response>((resolve, reject) => {
      const body = typeof init.body === "string" ? init.body : "";
      const headers = new Headers(init.headers);
      const req: HeldRequest = {
        url,
        init,
        frames: body ? body.split("\n").map((l) => JSON.parse(l)) : [],
        header: (n) => headers.get(n) ?? "",
        respond: resolve,
        reject,
      };
      init.signal?.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError")));
      this.requests.push(req);
    });

  /** to lists the requests to a path (such as "/rt/send"). */
  to(path: string): HeldRequest[] {
    return this.requests.filter((r) => new URL(r.url).pathname === path);
  }
}

/** StreamBody is a response body for HTTP streaming a test writes records to. */
export class StreamBody {
  private ctrl!: ReadableStreamDefaultController<Uint8Array>;
  readonly body = new ReadableStream<Uint8Array>({ start: (c) => void (this.ctrl = c) });

  /** record writes frames as length-prefixed records (an empty string: a heartbeat). */
  record(...msgs: (string | object)[]): void {
    this.ctrl.enqueue(records(...msgs));
  }

  /** raw writes bytes as they are. */
  raw(b: Uint8Array): void {
    this.ctrl.enqueue(b);
  }

  end(): void {
    this.ctrl.close();
  }

  error(): void {
    this.ctrl.error(new Error("network"));
  }
}

/** records encodes messages as length-prefixed records. */
export function records(...msgs: (string | object)[]): Uint8Array {
  const parts = msgs.map((m) => new TextEncoder().encode(typeof m === "string" ? m : JSON.stringify(m)));
  const out = new Uint8Array(parts.reduce((n, p) => n + 4 + p.length, 0));
  let at = 0;
  for (const p of parts) {
    new DataView(out.buffer).setUint32(at, p.length);
    out.set(p, at + 4);
    at += 4 + p.length;
  }
  return out;
}
