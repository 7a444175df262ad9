/**
 * now is a monotonic clock in milliseconds, for intervals: heartbeats, the
 * signal throttle, how long a connection stayed open. Date.now() is the
 * wall clock, which a laptop's sleep, NTP or a user moves: forward, and
 * the heartbeat thinks a live connection dead; backward, and a throttled
 * signal (a cursor) waits as long as the step. Only differences between
 * two readings mean anything. Token expiries stay on Date.now(): they are
 * wall-clock times.
 */
export function now(): number {
  return performance.now();
}
