// The SSE transport (docs/TRANSPORTS.md, "SSE"): the server's frames as
// the events of an EventSource on GET /rt/sse, the client's by POST
// /rt/send; JSON both ways.

import { CLOSE_ABNORMAL, PostQueue, newStreamId } from "./poster.js";
import type { Conn, EventSourceConstructor, EventSourceLike, FetchLike } from "./transport.js";

/**
 * SSEConn is one stream: a new stream id, a new EventSource. It opens on
 * the corral-open event (which gives the secret the POSTs need) and ends
 * on corral-close (the edge's close code), or on the EventSource's first
 * error: the browser would reconnect by itself with Last-Event-ID, which
 * the edge answers 204 (a stream is never continued); the Client instead
 * resumes the session on a new stream at once. Frames sent before open
 * wait for it.
 */
export class SSEConn implements Conn {
  readyState = 0;
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: { code: number; reason: string }) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;

  private readonly es: EventSourceLike;
  private readonly posts: PostQueue;

  constructor(base: string, ES: EventSourceConstructor, fetch: FetchLike, random: () => number) {
    const id = newStreamId(random);
    this.posts = new PostQueue(`${base}/rt/send?stream=${id}`, id, fetch, (code, reason) => this.end(code, reason));
    this.es = new ES(`${base}/rt/sse?stream=${id}`);
    this.es.addEventListener("corral-open", (ev) => {
      if (this.readyState !== 0) return;
      let secret = "";
      try {
        secret = String((JSON.parse(ev.data) as { secret?: unknown }).secret ?? "");
      } catch {
        // below
      }
      if (!secret) {
        this.end(CLOSE_ABNORMAL, "sse: an open event without a secret");
        return;
      }
      this.readyState = 1;
      this.posts.ready(secret);
      this.onopen?.({});
    });
    this.es.onmessage = (ev) => {
      if (this.readyState === 1) this.onmessage?.({ data: ev.data });
    };
    this.es.addEventListener("corral-close", (ev) => {
      let code = CLOSE_ABNORMAL;
      let reason = "";
      try {
        const v = JSON.parse(ev.data) as { code?: unknown; reason?: unknown };
        if (typeof v.code === "number") code = v.code;
        reason = String(v.reason ?? "");
      } catch {
        // a close without its code: the carrier's end
      }
      this.end(code, reason);
    });
    this.es.onerror = () => this.end(CLOSE_ABNORMAL, "sse: the event stream failed");
  }

  send(data: string): void {
    if (this.readyState > 1) return;
    this.posts.send(data);
  }

  /** close ends the stream; with 1000 (the Client's close()) as a
   * normal close, which the edge is told of (DELETE /rt/send) before the
   * event stream is dropped. */
  close(code?: number): void {
    if (this.readyState === 3) return;
    this.readyState = 3;
    if (code === 1000) {
      this.posts.leave(() => this.es.close());
      return;
    }
    this.es.close();
    this.posts.close();
  }

  private end(code: number, reason: string): void {
    if (this.readyState === 3) return;
    this.close();
    this.onclose?.({ code, reason });
  }
}
