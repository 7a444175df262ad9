// The client-to-server half of the HTTP transports (docs/TRANSPORTS.md,
// "POST /rt/send"): the frames a Client sends, POSTed one request at a
// time, in order, each request carrying everything queued meanwhile.

import type { FetchLike } from "./transport.js";

/** Codes a PostQueue ends with, as a connection's close code. */
export const CLOSE_ABNORMAL = 1006;
const CLOSE_GOING_AWAY = 1001;
const CODE_BAD_FRAME = 4400;
const CODE_FORBIDDEN = 4403;
const CODE_TOO_LARGE = 4413;

/**
 * PostQueue sends a stream's client frames by POST /rt/send. send()
 * never blocks: frames wait in the queue while a POST is on its way (the
 * edge takes one POST at a time per stream, and the order of the POSTs
 * is the order of the frames) and go together in the next one, up to
 * maxBytes a request. A failure ends the queue once, through onfail, with
 * a close code whose advice (docs/CODES.md) says what the Client does: a
 * lost request or a stream the edge no longer has is 1006 (resume on a
 * new stream; publishes go again with their ids, applied once), a refused
 * body is a stop code. The frames of a failed POST are never sent twice
 * on the same stream: whether the edge read them is unknown.
 */
export class PostQueue {
  private queue: string[] = [];
  private busy = false;
  /** The POST on its way, if any. */
  private inflight: Promise<number> | null = null;
  private secret = "";
  private done = false;
  private readonly abort = new AbortController();

  constructor(
    private readonly url: string,
    private readonly streamId: string,
    private readonly fetch: FetchLike,
    private readonly onfail: (code: number, reason: string) => void,
    private maxBytes = 32 << 10,
  ) {}

  /** ready gives the stream's secret: the queued frames go from now on. */
  ready(secret: string): void {
    this.secret = secret;
    void this.flush();
  }

  /** send queues one JSON client frame (it holds no raw line break). */
  send(frame: string): void {
    if (this.done) return;
    this.queue.push(frame);
    void this.flush();
  }

  /** close drops what is queued and abandons the POST on its way. */
  close(): void {
    this.done = true;
    this.queue = [];
    this.abort.abort();
  }

  /**
   * leave drops what is queued and ends the stream as a normal close
   * (DELETE /rt/send: presence leaves at once, not after a drop's grace),
   * after the POST on its way; then calls after, which may drop the
   * stream's response (before, the edge would see a drop first). The
   * DELETE is a keepalive request: it outlives the page.
   */
  leave(after: () => void): void {
    if (this.done) return;
    this.done = true;
    this.queue = [];
    if (!this.secret) {
      this.abort.abort();
      after();
      return;
    }
    const del = () =>
      this.fetch(this.url, {
        method: "DELETE",
        headers: { "X-Corral-Stream": this.streamId, "X-Corral-Secret": this.secret },
        keepalive: true,
        cache: "no-store",
      })
        .then((res) => res.arrayBuffer())
        .catch(() => undefined)
        .finally(after);
    void (this.inflight ?? Promise.resolve()).then(del);
  }

  private async flush(): Promise<void> {
    if (this.busy || this.done || !this.secret || this.queue.length === 0) return;
    this.busy = true;
    try {
      while (!this.done && this.queue.length > 0) {
        // One frame always goes, even past maxBytes: the edge judges it.
        let n = 1;
        let size = this.queue[0]!.length;
        while (n < this.queue.length && size + 1 + this.queue[n]!.length <= this.maxBytes) {
          size += 1 + this.queue[n]!.length;
          n++;
        }
        const frames = this.queue.slice(0, n);
        this.inflight = this.post(frames.join("\n"));
        const status = await this.inflight;
        this.inflight = null;
        if (this.done) return;
        if (status === 204 || (status >= 200 && status < 300)) {
          this.queue.splice(0, n);
          continue;
        }
        if (status === 413 && n > 1) {
          // Too big for the edge, and nothing was read: fewer at a time.
          this.maxBytes = Math.max(1, Math.floor(size / 2));
          continue;
        }
        this.fail(...failure(status));
        return;
      }
    } finally {
      this.busy = false;
    }
  }

  /** post sends one body and returns its status, 0 when the request failed. */
  private async post(body: string): Promise<number> {
    try {
      const res = await this.fetch(this.url, {
        method: "POST",
        headers: {
          "Content-Type": "application/json",
          "X-Corral-Stream": this.streamId,
          "X-Corral-Secret": this.secret,
        },
        body,
        signal: this.abort.signal,
        cache: "no-store",
      });
      // The answer's body is for people; read it so the request ends.
      await res.arrayBuffer().catch(() => undefined);
      return res.status;
    } catch {
      return 0;
    }
  }

  private fail(code: number, reason: string): void {
    if (this.done) return;
    this.close();
    this.onfail(code, reason);
  }
}

/** failure maps a POST's status to a close code and reason. */
function failure(status: number): [number, string] {
  switch (status) {
    case 0:
      return [CLOSE_ABNORMAL, "send: the request failed"];
    case 404:
      return [CLOSE_ABNORMAL, "send: the stream is gone"];
    case 503:
      return [CLOSE_GOING_AWAY, "send: the server is draining"];
    case 400:
    case 415:
      return [CODE_BAD_FRAME, `send: refused (${status})`];
    case 403:
      return [CODE_FORBIDDEN, "send: refused (403)"];
    case 413:
      return [CODE_TOO_LARGE, "send: a frame is too large"];
    default:
      // 409 cannot happen with one POST at a time; 5xx from a proxy: the
      // carrier failed.
      return [CLOSE_ABNORMAL, `send: status ${status}`];
  }
}

/** newStreamId makes a stream id: base64url of 16 random bytes. */
export function newStreamId(random: () => number): string {
  const bytes = new Uint8Array(16);
  const c = (globalThis as { crypto?: { getRandomValues?: (a: Uint8Array) => Uint8Array } }).crypto;
  if (c?.getRandomValues) c.getRandomValues(bytes);
  else for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(random() * 256);
  const abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  let out = "";
  for (let i = 0; i < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | ((bytes[i + 1] ?? 0) << 8) | (bytes[i + 2] ?? 0);
    const chars = Math.min(4, Math.ceil(((bytes.length - i) * 8) / 6));
    for (let j = 0; j < chars; j++) out += abc[(n >> (18 - 6 * j)) & 63];
  }
  return out;
}
