// Reconnect delays: full jitter, capped, honouring the server's hints.

/** BackoffOptions tune reconnect delays. Every field is optional. */
export interface BackoffOptions {
  /** Upper bound of the first jittered retry after the immediate one. Default 500 ms. */
  baseMs?: number;
  /** The cap of the exponential bound; delays stay jittered in [0, capMs). Default 30 s. */
  capMs?: number;
  /** Jitter of the first retry, which is otherwise immediate. Default 250 ms. */
  firstJitterMs?: number;
  /** The most a client adds to a server's hinted delay (already jittered
   * by the server). Default 250 ms. */
  hintJitterMs?: number;
}

/**
 * Backoff computes reconnect delays. The first retry after a failure is
 * immediate plus a small jitter (a dropped connection usually comes back at
 * once); retry n ≥ 1 waits a uniformly random time below
 * min(capMs, baseMs·2^(n−1)) ("full jitter", so that many clients cut at
 * the same moment do not return at the same moment). A server hint is a
 * floor: the delay is at least the hint plus a little jitter.
 */
export class Backoff {
  readonly baseMs: number;
  readonly capMs: number;
  readonly firstJitterMs: number;
  readonly hintJitterMs: number;
  private attempt = 0;

  constructor(
    opts: BackoffOptions = {},
    private readonly random: () => number = Math.random,
  ) {
    this.baseMs = opts.baseMs ?? 500;
    this.capMs = opts.capMs ?? 30_000;
    this.firstJitterMs = opts.firstJitterMs ?? 250;
    this.hintJitterMs = opts.hintJitterMs ?? 250;
  }

  /** attempts is how many delays were taken since the last reset. */
  get attempts(): number {
    return this.attempt;
  }

  /**
   * next returns the delay before the next attempt and counts it. hintMs,
   * when given, is the server's ReconnectHint.delay_ms or retry_after_ms.
   */
  next(hintMs?: number): number {
    const n = this.attempt++;
    const bound = n === 0 ? this.firstJitterMs : Math.min(this.capMs, this.baseMs * 2 ** Math.min(n - 1, 30));
    const d = this.random() * bound;
    if (hintMs !== undefined && hintMs > 0) {
      return Math.round(Math.max(hintMs + this.random() * this.hintJitterMs, d));
    }
    return Math.round(d);
  }

  /** reset starts over, for example after a connection that lasted. */
  reset(): void {
    this.attempt = 0;
  }
}
