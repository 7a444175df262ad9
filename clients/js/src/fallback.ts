// Which transport a Client tries next: the order of a round of attempts,
// and the memory of the last one that worked.

import { loadTransport, saveTransport, type StorageLike } from "./storage.js";
import type { TransportName } from "./transport.js";

/**
 * Picker orders the transports for each round of connection attempts.
 * A round is tried in one go: when a transport fails before its first
 * Welcome (refused, dropped, or stalled past its time), the next one is
 * tried at once, with no backoff; the backoff is between rounds. The
 * transport that last reached a Welcome leads the next round, and is
 * remembered in storage for ttlMs, so that a reload on a network that
 * blocks WebSockets does not wait for the WebSocket attempt again; once
 * the memory expires, the preferred order is tried afresh.
 */
export class Picker {
  private round: TransportName[] = [];
  private at = 0;
  private worked: TransportName | null = null;

  constructor(
    /** The allowed transports, most preferred first (never empty). */
    private readonly order: readonly TransportName[],
    private readonly storage: StorageLike | null,
    private readonly key: string,
    private readonly ttlMs: number,
    private readonly wallClock: () => number = Date.now,
  ) {
    const saved = ttlMs > 0 ? loadTransport(storage, key, wallClock()) : null;
    if (saved && order.includes(saved)) this.worked = saved;
  }

  /** current is the transport of the current (or next) attempt. */
  current(): TransportName {
    if (this.at >= this.round.length) this.newRound();
    return this.round[this.at]!;
  }

  /** hasNext says whether the current round has a transport after this one. */
  hasNext(): boolean {
    return this.at + 1 < this.round.length;
  }

  /** next moves to the round's next transport; false at the round's end
   * (the next current() starts a new round). */
  next(): boolean {
    this.at++;
    return this.at < this.round.length;
  }

  /** endRound makes the next current() start a new round. */
  endRound(): void {
    this.at = this.round.length;
  }

  /** worked records that name reached a Welcome: it leads the next round
   * and is remembered. */
  succeeded(name: TransportName): void {
    this.worked = name;
    if (this.ttlMs > 0) saveTransport(this.storage, this.key, name, this.wallClock() + this.ttlMs);
  }

  private newRound(): void {
    const first = this.worked;
    this.round = first ? [first, ...this.order.filter((t) => t !== first)] : [...this.order];
    this.at = 0;
  }
}
