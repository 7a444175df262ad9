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
