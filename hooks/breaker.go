package hooks

import (
	"sync"
	"time"
)

// breaker is a hook's circuit breaker: after Failures consecutive failed
// calls it opens and refuses calls for Cooldown; then it lets one probe
// through (half-open): the probe's success closes it, its failure opens it
// again.
//
// Written here rather than taken from github.com/sony/gobreaker/v2: the
// semantics corral needs are these forty lines (consecutive failures, one
// probe, the time left for a retry hint, release of a call that never
// reached the backend), which gobreaker does not give as such. Measured
// (BenchmarkBreaker, docs/BENCHMARKS.md, medians of 3 on a loaded 2-core
// machine): allow+done 40 ns per call here, gobreaker v2.4.0's two-step
// Allow+done 631 ns and Execute 359 ns — all negligible beside the backend
// call they guard, so the smaller API to read decides.
type breaker struct {
	failures int
	cooldown time.Duration
	now      func() time.Time
	onState  func(breakerState)

	mu       sync.Mutex // guards the following fields
	state    breakerState
	streak   int       // consecutive failures while closed
	openTill time.Time // while open
	probing  bool      // half-open: the probe is in flight
}

type breakerState int

const (
	breakerClosed breakerState = iota
	breakerHalfOpen
	breakerOpen
)

// allow reports whether a call may go out; when not, how long until the
// breaker lets a probe through.
func (b *breaker) allow() (bool, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case breakerOpen:
		if left := b.openTill.Sub(b.now()); left > 0 {
			return false, left
		}
		b.setLocked(breakerHalfOpen)
		b.probing = true
		return true, 0
	case breakerHalfOpen:
		if b.probing {
			return false, b.cooldown
		}
		b.probing = true
		return true, 0
	}
	return true, 0
}

// done records the outcome of a call allow let through.
func (b *breaker) done(ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ok {
		b.streak = 0
		b.probing = false
		b.setLocked(breakerClosed)
		return
	}
	switch b.state {
	case breakerHalfOpen:
		b.probing = false
		b.openLocked()
	case breakerClosed:
		b.streak++
		if b.streak >= b.failures {
			b.openLocked()
		}
	}
}

// release gives back a call allow let through whose outcome says nothing
// of the backend (it never went out, or its caller gave up).
func (b *breaker) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == breakerHalfOpen {
		b.probing = false
	}
}

// Lock must be held.
func (b *breaker) openLocked() {
	b.streak = 0
	b.openTill = b.now().Add(b.cooldown)
	b.setLocked(breakerOpen)
}

// Lock must be held.
func (b *breaker) setLocked(s breakerState) {
	if b.state != s {
		b.state = s
		if b.onState != nil {
			b.onState(s)
		}
	}
}
