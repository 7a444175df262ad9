// A room's handle: its growing messages and its keyed state.

import { Emitter } from "./emitter.js";
import { Assembler, GapError, type GrowingMessage } from "./growing.js";
import { RoomState, type StateWriter } from "./roomstate.js";
import type { Message, Published } from "./wire.js";

/** Options of Room.append (docs/MESSAGES.md). */
export interface AppendOptions {
  /** The data replaces the body instead of being added to it. */
  replace?: boolean;
  /** The message's last chunk; later appends reject with 4412. */
  final?: boolean;
  /** The version this chunk makes the message (1 for the first), so that a
   * retry is applied once; omitted: unchecked. */
  version?: number;
}

/** What a Room needs of its Client. */
export interface RoomWriter extends StateWriter {
  append(room: string, id: string, data: string | Uint8Array, opts: AppendOptions): Promise<Published>;
}

/** The events of a Room. */
export interface RoomEvents {
  /** A growing message opened (its first chunk, or the prefix a joiner
   * gets): listen to its "chunk" and "final" events. Fires before the
   * chunk is applied. */
  growing: GrowingMessage;
  /** A chunk could not be applied (GapError): a chunk missing before it. */
  gap: GapError;
}

/**
 * Room is a room's handle from client.room(name): append to growing
 * messages, the growing messages received, and the room's keyed state
 * (room.state). It does not join: client.join(name) does.
 */
export class Room extends Emitter<RoomEvents> {
  readonly state: RoomState;
  private readonly assembler = new Assembler();

  constructor(
    readonly name: string,
    private readonly writer: RoomWriter,
  ) {
    super();
    this.state = new RoomState(name, writer);
  }

  /**
   * append adds text (sent as its UTF-8 bytes) or bytes to the growing
   * message id, opening it on the first append. It resolves with the
   * server's answer (the chunk's seq) or rejects with a CorralError: 4412
   * after the final chunk, 4106 for a version more than one ahead, 4410
   * from a server that does not serve growing messages yet. Appends of
   * one id may be pipelined: answers settle them oldest first.
   */
  append(id: string, data: string | Uint8Array, opts: AppendOptions = {}): Promise<Published> {
    return this.writer.append(this.name, id, data, opts);
  }

  /** message returns the growing message id as received so far. */
  message(id: string): GrowingMessage | undefined {
    return this.assembler.get(id);
  }

  /** forget drops a finished growing message the app no longer needs. */
  forget(id: string): void {
    this.assembler.forget(id);
  }

  /** onChunk feeds a chunk message (the Client calls it). */
  onChunk(m: Message): void {
    try {
      this.assembler.feed(m, (g) => this.emit("growing", g));
    } catch (err) {
      if (err instanceof GapError) this.emit("gap", err);
      else throw err;
    }
  }
}
