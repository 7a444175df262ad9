// Keyed room state (docs/STATE.md): a member's view of a room's keys, from
// a snapshot and then each change in position order.

import { applyDelta } from "./delta.js";
import { Emitter } from "./emitter.js";
import { toBytes } from "./bytes.js";
import type { Payload, ServerKinds } from "./wire.js";

export type StateSnapshot = ServerKinds["stateSnapshot"];
export type StateChangeFrame = ServerKinds["stateChange"];
export type StateUpdated = ServerKinds["stateUpdated"];

/** One key of a room's state as a member holds it. */
export interface StateEntry {
  /** The value as sent: inline JSON, or bytes (also after a delta). */
  value: Payload;
  version: number;
  /** When the server removes it, ms since the Unix epoch (0: never). */
  expiresMs: number;
}

/** KeyChange is the "change" event of a RoomState. */
export interface KeyChange {
  key: string;
  /** The entry after the change; undefined when deleted or expired. */
  entry: StateEntry | undefined;
  deleted: boolean;
  expired: boolean;
  position: number;
}

/** The events of a RoomState. */
export interface RoomStateEvents {
  /** A key changed (set, deleted, expired). */
  change: KeyChange;
  /** A snapshot replaced the whole view (a join, or a resume too old for
   * the changes it missed). */
  snapshot: RoomState;
  /** A change that does not follow the view (another epoch, a gap, a
   * delta against a version not held): the view waits for a snapshot. */
  stale: Error;
}

/** Options of RoomState.set and delete. */
export interface StateWriteOptions {
  /** Compare-and-set: apply only when the key's version is cas now (0:
   * the key must not exist); otherwise it rejects with CorralError code
   * 4411 (VERSION_CONFLICT). */
  cas?: number;
  /** set only: the key is removed this long after the set. */
  ttlMs?: number;
}

/** What a RoomState needs of its Client. */
export interface StateWriter {
  setState(room: string, key: string, value: Payload, opts: StateWriteOptions): Promise<StateUpdated>;
  deleteState(room: string, key: string, opts: StateWriteOptions): Promise<StateUpdated>;
}

/**
 * RoomState is a member's view of one room's keyed state: get, entries,
 * the "change" event, and set/delete (promises that resolve with the
 * server's StateUpdated, or reject with a CorralError: 4411 version
 * conflict, 4414 too many keys, 4410 from a server that does not serve
 * state yet). The view changes only by the server's frames: a set shows
 * in get() when its change arrives, not when its promise resolves.
 */
export class RoomState extends Emitter<RoomStateEvents> {
  epoch = "";
  position = 0;
  /** A snapshot was applied. */
  ready = false;
  private entriesByKey = new Map<string, StateEntry>();

  constructor(
    readonly room: string,
    private readonly writer: StateWriter,
  ) {
    super();
  }

  get(key: string): StateEntry | undefined {
    return this.entriesByKey.get(key);
  }

  /** entries returns the keys and entries held, sorted by key. */
  entries(): [string, StateEntry][] {
    return [...this.entriesByKey.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  }

  set(key: string, value: Payload, opts: StateWriteOptions = {}): Promise<StateUpdated> {
    return this.writer.setState(this.room, key, value, opts);
  }

  delete(key: string, opts: StateWriteOptions = {}): Promise<StateUpdated> {
    return this.writer.deleteState(this.room, key, opts);
  }

  /** applySnapshot replaces the view with s. */
  applySnapshot(s: StateSnapshot): void {
    this.entriesByKey = new Map();
    for (const e of s.entries) {
      this.entriesByKey.set(e.key ?? "", { value: e.value ?? null, version: e.version ?? 0, expiresMs: e.expiresMs ?? 0 });
    }
    this.epoch = s.epoch;
    this.position = s.position;
    this.ready = true;
    this.emit("snapshot", this);
  }

  /** applyChange applies c and says whether it changed the view (false:
   * a duplicate, at or below the view's position, as a resume replays).
   * A change that does not follow the view emits "stale" and returns
   * false. */
  applyChange(c: StateChangeFrame): boolean {
    const stale = (why: string): boolean => {
      this.emit("stale", new Error(`room state ${this.room}: ${why}`));
      return false;
    };
    // A room never written sends no snapshot: its first change begins it.
    if (!this.ready && c.position === 1 && this.epoch === "" && this.position === 0) this.ready = true;
    if (!this.ready) return stale(`change at position ${c.position} before a snapshot`);
    // The empty state (position 0, no epoch) continues into the epoch its
    // first write opens.
    const fresh = this.epoch === "" && this.position === 0;
    if (c.epoch !== this.epoch && !fresh) return stale(`change of epoch ${c.epoch}, holding ${this.epoch}`);
    if (c.position <= this.position) return false;
    if (c.position !== this.position + 1) return stale(`change at position ${c.position} after ${this.position}`);
    let entry: StateEntry | undefined;
    const d = toBytes(c.delta);
    if (c.deleted) {
      this.entriesByKey.delete(c.key);
    } else if (d.length > 0) {
      const old = this.entriesByKey.get(c.key);
      if (!old || old.version + 1 !== c.version) {
        return stale(`a delta to version ${c.version} of ${c.key}, holding version ${old?.version ?? 0}`);
      }
      let value: Uint8Array;
      try {
        value = applyDelta(toBytes(old.value), d);
      } catch (err) {
        return stale(`a delta to version ${c.version} of ${c.key}: ${(err as Error).message}`);
      }
      entry = { value: decodeValue(value), version: c.version, expiresMs: c.expiresMs };
      this.entriesByKey.set(c.key, entry);
    } else {
      entry = { value: c.value ?? null, version: c.version, expiresMs: c.expiresMs };
      this.entriesByKey.set(c.key, entry);
    }
    this.epoch = c.epoch;
    this.position = c.position;
    this.emit("change", { key: c.key, entry, deleted: c.deleted, expired: c.expired, position: c.position });
    return true;
  }
}

// A value rebuilt from a delta is bytes; as the decoder does for the
// wire, it is handed over as JSON when it is JSON.
function decodeValue(b: Uint8Array): Payload {
  try {
    return JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(b)) as Payload;
  } catch {
    return b;
  }
}
