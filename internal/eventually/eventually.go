// Package eventually waits, in tests, for a condition that something else
// makes true: a message delivered, a counter raised, a key gone. Tests use
// it where they would otherwise sleep "long enough" and hope; it returns as
// soon as the condition holds and fails, saying what it waited for, when
// the timeout passes first.
//
// Prefer an event when the code exposes one (a channel, a hook, a readiness
// signal); poll with this package when the only evidence is state that can
// be read. Inside a testing/synctest bubble its ticker runs on the bubble's
// fake clock, so it polls without wall-clock waiting there too.
//
// True and NoError fail the test with tb.Fatalf, so they belong on the
// goroutine running the test; Within and WithinEvery only report, and may
// run on any goroutine.
package eventually

import (
	"testing"
	"time"
)

// Tick is how often the condition is checked.
const Tick = 2 * time.Millisecond

// True checks cond every Tick until it returns true, failing tb (with
// what, if given) when timeout passes first. cond is checked once more at
// the deadline, so a slow machine gets the whole timeout.
func True(tb testing.TB, timeout time.Duration, cond func() bool, what ...any) {
	tb.Helper()
	if !Within(timeout, cond) {
		if len(what) > 0 {
			if format, ok := what[0].(string); ok {
				tb.Fatalf("not within %v: "+format, append([]any{timeout}, what[1:]...)...)
			}
		}
		tb.Fatalf("condition not met within %v", timeout)
	}
}

// NoError calls f every Tick until it returns nil, failing tb with f's last
// error when timeout passes first.
func NoError(tb testing.TB, timeout time.Duration, f func() error) {
	tb.Helper()
	var last error
	if !Within(timeout, func() bool { last = f(); return last == nil }) {
		tb.Fatalf("not within %v: %v", timeout, last)
	}
}

// Within checks cond every Tick until it returns true (true) or timeout
// passes (false, after one last check). It never fails a test, so it may
// run on any goroutine, and callers that have their own way to report can
// use it.
func Within(timeout time.Duration, cond func() bool) bool {
	return WithinEvery(timeout, Tick, cond)
}

// WithinEvery is Within checking every tick instead of every Tick: for a
// condition whose check costs the server under test something (a refused
// dial, a request counted by a limit), polled no faster than a client
// would retry.
func WithinEvery(timeout, tick time.Duration, cond func() bool) bool {
	if cond() {
		return true
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for {
		select {
		case <-ticker.C:
			if cond() {
				return true
			}
		case <-deadline.C:
			return cond()
		}
	}
}
