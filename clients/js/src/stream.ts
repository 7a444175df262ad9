// The HTTP-streaming transport (docs/TRANSPORTS.md, "HTTP streaming"):
// the hello as the body of POST /rt/stream, whose streamed response
// carries the server's frames as length-prefixed records; the client's
// other frames by POST /rt/send. JSON both ways.

import { CLOSE_ABNORMAL, PostQueue, newStreamId } from "./poster.js";
import type { Conn, FetchLike } from "./transport.js";

/**
 * StreamConn is one stream: a new stream id, one streamed fetch. It opens
 * at once (nothing is on the network yet): the Client's first frame, its
 * hello, is the body of the POST that opens the stream; the frames after
 * it wait for the response's secret, then go by POST /rt/send. It ends
 * when the response ends, with the code of the frame that explained the
 * end (the edge's last record: a reconnect hint or an error), or 1006
 * when there was none (the carrier failed).
 */
export class StreamConn implements Conn {
  readyState = 0;
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: { code: number; reason: string }) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;

  private readonly id: string;
  private readonly posts: PostQueue;
  private readonly abort = new AbortController();
  private started = false;
  /** The code and reason of the last frame that explains a close. */
  private closing: { code: number; reason: string } | null = null;

  constructor(
    private readonly base: string,
    private readonly fetch: FetchLike,
    random: () => number,
  ) {
    this.id = newStreamId(random);
    this.posts = new PostQueue(`${base}/rt/send?stream=${this.id}`, this.id, fetch, (code, reason) => this.end(code, reason));
    queueMicrotask(() => {
      if (this.readyState !== 0) return;
      this.readyState = 1;
      this.onopen?.({});
    });
  }

  send(data: string): void {
    if (this.readyState !== 1) return;
    if (this.started) {
      this.posts.send(data);
      return;
    }
    this.started = true;
    void this.run(data);
  }

  /** close ends the stream; with 1000 (the Client's close()) as a
   * normal close, which the edge is told of (DELETE /rt/send) before the
   * response is dropped. */
  close(code?: number): void {
    if (this.readyState === 3) return;
    this.readyState = 3;
    if (code === 1000) {
      this.posts.leave(() => this.abort.abort());
      return;
    }
    this.abort.abort();
    this.posts.close();
  }

  private end(code: number, reason: string): void {
    if (this.readyState === 3) return;
    this.close();
    this.onclose?.({ code, reason });
  }

  /** run opens the stream with hello and reads it to its end. */
  private async run(hello: string): Promise<void> {
    let res: Response;
    try {
      res = await this.fetch(`${this.base}/rt/stream?stream=${this.id}`, {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-Corral-Stream": this.id },
        body: hello,
        signal: this.abort.signal,
        cache: "no-store",
      });
    } catch {
      this.end(CLOSE_ABNORMAL, "stream: the request failed");
      return;
    }
    if (res.status !== 200 || !res.body) {
      this.end(...(await refusal(res)));
      return;
    }
    const secret = res.headers.get("X-Corral-Secret") ?? "";
    if (!secret) {
      // A proxy that strips headers: this carrier cannot work here.
      this.end(CLOSE_ABNORMAL, "stream: no X-Corral-Secret in the answer");
      return;
    }
    this.posts.ready(secret);
    const records = new RecordReader();
    const text = new TextDecoder();
    const reader = res.body.getReader();
    let why = "stream: the response ended";
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done || this.readyState === 3) break;
        for (const rec of records.push(value)) {
          if (rec.length === 0) continue; // a heartbeat
          const data = text.decode(rec);
          this.closing = explains(data);
          this.onmessage?.({ data });
          if (this.readyState === 3) return;
        }
      }
    } catch (err) {
      // The network ended it, or the bytes are not records: the carrier
      // failed.
      why = (err as Error).message.startsWith("stream:") ? (err as Error).message : "stream: the response failed";
      this.closing = null;
      void reader.cancel().catch(() => undefined);
    }
    if (records.pending()) this.closing = null; // cut inside a record
    const c = this.closing;
    this.end(c?.code ?? CLOSE_ABNORMAL, c?.reason ?? why);
  }
}

/** The largest record a RecordReader takes by default: far above any
 * frame the edge writes (a batch of its queue), far below what would hurt
 * a page. */
export const MAX_RECORD = 16 << 20;

/**
 * RecordReader splits a byte stream into records: a 4-byte big-endian
 * length, then that many bytes. A length above max throws: the stream is
 * not corral's (or is corrupt), and waiting for its bytes would only hold
 * memory.
 */
export class RecordReader {
  private buf = new Uint8Array(0);

  constructor(private readonly max = MAX_RECORD) {}

  /** push adds bytes and returns the records they complete. */
  push(chunk: Uint8Array): Uint8Array[] {
    const b = new Uint8Array(this.buf.length + chunk.length);
    b.set(this.buf);
    b.set(chunk, this.buf.length);
    const out: Uint8Array[] = [];
    let at = 0;
    while (b.length - at >= 4) {
      const n = ((b[at]! << 24) | (b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!) >>> 0;
      if (n > this.max) throw new Error(`stream: a record of ${n} bytes (at most ${this.max})`);
      if (b.length - at - 4 < n) break;
      out.push(b.subarray(at + 4, at + 4 + n));
      at += 4 + n;
    }
    this.buf = b.slice(at);
    return out;
  }

  /** pending says whether part of a record is waiting for more bytes. */
  pending(): boolean {
    return this.buf.length > 0;
  }
}

/**
 * explains returns the close a frame announces: a reconnect hint (its
 * code) or an error frame of no room and no publish (the stop-class
 * refusal before a close). The last frame of a batch counts.
 */
function explains(data: string): { code: number; reason: string } | null {
  let v: unknown;
  try {
    v = JSON.parse(data);
  } catch {
    return null; // the Client reports it
  }
  for (;;) {
    if (!isObject(v)) return null;
    const batch = v["batch"];
    if (isObject(batch) && Array.isArray(batch["frames"])) {
      v = batch["frames"].at(-1);
      continue;
    }
    const hint = v["reconnect"];
    if (isObject(hint) && typeof hint["code"] === "number") return { code: hint["code"], reason: String(hint["reason"] ?? "") };
    const err = v["error"];
    if (isObject(err) && typeof err["code"] === "number" && !err["room"] && !err["ref"]) {
      return { code: err["code"], reason: String(err["message"] ?? "") };
    }
    return null;
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** refusal reads a non-200 answer to the stream's POST: admission control
 * (503 with a corral code in its body) or a server without this carrier. */
async function refusal(res: Response): Promise<[number, string]> {
  let body = "";
  try {
    body = await res.text();
  } catch {
    // no body
  }
  try {
    const v = JSON.parse(body) as { code?: unknown; message?: unknown; error?: { message?: unknown } };
    if (typeof v.code === "number" && v.code >= 4000) return [v.code, String(v.message ?? `refused (${res.status})`)];
  } catch {
    // not JSON: not corral's
  }
  return [CLOSE_ABNORMAL, `stream: status ${res.status}`];
}
