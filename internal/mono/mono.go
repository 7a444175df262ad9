// Package mono is the process's monotonic clock as one int64, for
// deadlines and intervals kept in atomics (the last read of a socket, the
// start of a write in progress, a token bucket's last refill).
//
// time.Now().UnixNano() is the wall clock: a step of the system clock
// (NTP, a VM resumed, an operator) moves it, and every interval computed
// from it moves too. Forward by a minute, every connection looks silent
// for two heartbeats and is closed; backward, a token bucket refills
// negatively and a coalesced write waits for the step's length. Now reads
// the monotonic clock that time.Time carries and never steps.
package mono

import "time"

// base is a moment an hour before the process started, so that Now is
// never 0 (callers use 0 for "none").
var base = time.Now().Add(-time.Hour)

// Now is monotonic nanoseconds: only differences between two Now values
// mean anything, and they are never made negative by a clock step.
func Now() int64 { return int64(time.Since(base)) }
