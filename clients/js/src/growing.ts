// Growing messages (docs/MESSAGES.md): a message's chunks assembled into
// the body so far, exactly once and in order.

import { applyDelta } from "./delta.js";
import { Emitter } from "./emitter.js";
import { concat, text, toBytes } from "./bytes.js";
import type { Message } from "./wire.js";

/** A chunk as a GrowingMessage applied it. */
export interface GrowingChunk {
  /** The chunk's own seq in the room. */
  seq: number;
  /** The message's version after it. */
  version: number;
  /** The bytes it added, or the whole body (replace). */
  data: Uint8Array;
  replace: boolean;
  final: boolean;
}

/** The events of a GrowingMessage. */
export interface GrowingEvents {
  /** A chunk was applied: text, body and version are updated. */
  chunk: GrowingChunk;
  /** The last chunk was applied: the message is complete. */
  final: GrowingMessage;
}

/** GapError: a chunk cannot be applied to what the member holds (a version
 * missing before it, a delta against a version not held, a chunk after the
 * final one). The message is unchanged; rejoin the room from a position
 * before it to get it again as a prefix. */
export class GapError extends Error {
  override name = "GapError";
}

/**
 * GrowingMessage is a message that grows (an AI answer streamed token by
 * token): the body so far (bytes, and as UTF-8 text), its version, whether
 * it is final, and events for each chunk and for the end.
 */
export class GrowingMessage extends Emitter<GrowingEvents> {
  /** The seq of the message's first chunk (with room and id, its name). */
  readonly messageSeq: number;
  /** The seq of the last chunk applied. */
  seq = 0;
  version = 0;
  final = false;
  body: Uint8Array = new Uint8Array(0);

  constructor(
    readonly room: string,
    readonly id: string,
    messageSeq: number,
    private readonly maxBytes = 1 << 20,
  ) {
    super();
    this.messageSeq = messageSeq;
  }

  /** The body so far as UTF-8 text. */
  get text(): string {
    return text(this.body);
  }

  /**
   * apply applies m's chunk and says whether it changed the message
   * (false: a duplicate, such as a resume's replay or a chunk older than
   * the prefix a joiner got). Throws GapError for a chunk that cannot be
   * applied.
   */
  apply(m: Message): boolean {
    const c = m.chunk;
    if (!c) return false;
    const version = c.version ?? 0;
    if (this.version > 0 && (version <= this.version || m.seq <= this.seq)) return false;
    if (this.final) throw new GapError(`growing message ${m.id}: version ${version} after its final chunk`);
    if (!c.replace && version !== this.version + 1) {
      throw new GapError(`growing message ${m.id}: version ${version} after version ${this.version}`);
    }
    let data = toBytes(c.data);
    const d = toBytes(c.delta);
    if (d.length > 0) {
      if (this.version === 0 || version !== this.version + 1) {
        throw new GapError(`growing message ${m.id}: a delta to version ${version}, holding version ${this.version}`);
      }
      data = applyDelta(this.body, d, this.maxBytes);
    }
    const body = c.replace ? data : concat(this.body, data);
    if (body.length > this.maxBytes) {
      throw new GapError(`growing message ${m.id}: body of ${body.length} bytes past ${this.maxBytes}`);
    }
    this.body = body;
    this.seq = m.seq;
    this.version = version;
    this.final = c.final ?? false;
    this.emit("chunk", { seq: m.seq, version, data, replace: c.replace ?? false, final: this.final });
    if (this.final) this.emit("final", this);
    return true;
  }
}

/** Assembler keeps a room's growing messages by id. */
export class Assembler {
  private readonly msgs = new Map<string, GrowingMessage>();

  /** feed applies m's chunk to its message, opening it on its first chunk
   * (returned with opened: true, before its first chunk is applied, so a
   * listener added then sees it). */
  feed(m: Message, onOpen: (g: GrowingMessage) => void): { message: GrowingMessage; applied: boolean } | undefined {
    const c = m.chunk;
    if (!c) return undefined;
    let g = this.msgs.get(m.id);
    if (g && (c.messageSeq ?? 0) > g.messageSeq) g = undefined; // the id reused later
    if (!g) {
      g = new GrowingMessage(m.room, m.id, c.messageSeq ?? 0);
      this.msgs.set(m.id, g);
      onOpen(g);
    }
    return { message: g, applied: g.apply(m) };
  }

  get(id: string): GrowingMessage | undefined {
    return this.msgs.get(id);
  }

  /** forget drops a message (after its final chunk). */
  forget(id: string): void {
    this.msgs.delete(id);
  }
}
