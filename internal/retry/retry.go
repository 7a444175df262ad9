// Package retry is corral's one backoff for loops that retry a failed
// operation (a link to the core, a Redis subscription, a store write):
// exponential ceilings with full jitter, a cap, a reset after an attempt
// that lasted, and waits that end with their context.
//
// Full jitter (each delay uniform in [0, ceiling]) spreads the retries of
// many processes that failed together — every edge after a core restart,
// every core after a Redis failover — instead of synchronising them.
package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff spaces the attempts of one retry loop. The zero value uses the
// defaults below. A Backoff is not safe for concurrent use: each loop owns
// its own.
type Backoff struct {
	// Base is the ceiling of the first delay (default 50 ms); each
	// failure doubles the ceiling.
	Base time.Duration
	// Cap bounds the ceiling (default 5 s).
	Cap time.Duration
	// ResetAfter: an attempt that ran at least this long before it failed
	// starts the schedule over (0: only Reset does).
	ResetAfter time.Duration

	failures int
	started  time.Time
}

const (
	defaultBase = 50 * time.Millisecond
	defaultCap  = 5 * time.Second
)

// Start marks the beginning of an attempt, for ResetAfter.
func (b *Backoff) Start() { b.started = time.Now() }

// Reset starts the schedule over: the next delay is at most Base.
func (b *Backoff) Reset() { b.failures = 0 }

// Ceiling is the largest delay the next failure may wait.
func (b *Backoff) Ceiling() time.Duration {
	base, cap := b.Base, b.Cap
	if base <= 0 {
		base = defaultBase
	}
	if cap <= 0 {
		cap = defaultCap
	}
	if cap < base {
		cap = base
	}
	d := base
	for i := 0; i < b.failures && d < cap; i++ {
		d *= 2
	}
	return min(d, cap)
}

// Next records a failure and returns how long to wait before the next
// attempt: uniform in [0, Ceiling()], the ceiling taken before this
// failure doubles it. An attempt that ran for ResetAfter or more (see
// Start) restarts the schedule first.
func (b *Backoff) Next() time.Duration {
	if b.ResetAfter > 0 && !b.started.IsZero() && time.Since(b.started) >= b.ResetAfter {
		b.failures = 0
	}
	b.started = time.Time{}
	d := b.Ceiling()
	if b.failures < 63 {
		b.failures++
	}
	return rand.N(d + 1)
}

// Wait records a failure and sleeps for Next(). It reports false, at
// once, when ctx ends first.
func (b *Backoff) Wait(ctx context.Context) bool {
	return Sleep(ctx, b.Next())
}

// Sleep waits for d. It reports false, at once, when ctx ends first.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
