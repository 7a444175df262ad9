package client

import (
	"math"
	"math/rand/v2"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// Backoff spaces reconnect attempts: exponential growth with full jitter,
// so that clients dropped together do not come back together. The zero
// value uses the defaults below. A Backoff is a value and safe for
// concurrent use.
type Backoff struct {
	// Initial is the ceiling of the first jittered delay. Default 300ms.
	Initial time.Duration
	// Max caps the ceiling. Default 10s.
	Max time.Duration
	// Multiplier grows the ceiling per attempt. Default 2; values <= 1
	// mean the default.
	Multiplier float64
	// Schedule, when set, replaces the schedule above: it returns the
	// wait before reconnect attempt number attempt (0 for the first after
	// a drop). A benchmark uses it to reproduce another client
	// population's schedule; a server hint still takes precedence. It
	// must be safe for concurrent use.
	Schedule func(attempt int) time.Duration

	// rng replaces the global source in tests (see export_test.go). A
	// *rand.Rand is not safe for concurrent use; nil uses math/rand/v2's
	// global source, which is.
	rng *rand.Rand
}

const (
	defaultInitial    = 300 * time.Millisecond
	defaultMax        = 10 * time.Second
	defaultMultiplier = 2.0
	// firstJitterCap bounds the jitter of attempt 0, which is "at once".
	firstJitterCap = 100 * time.Millisecond
)

func (b Backoff) withDefaults() Backoff {
	if b.Initial <= 0 {
		b.Initial = defaultInitial
	}
	if b.Max <= 0 {
		b.Max = defaultMax
	}
	if b.Max < b.Initial {
		b.Max = b.Initial
	}
	if !(b.Multiplier > 1) || math.IsInf(b.Multiplier, 0) {
		b.Multiplier = defaultMultiplier
	}
	return b
}

// Delay returns how long to wait before reconnect attempt number attempt
// (0 for the first attempt after a drop).
//
// With a server hint (hint.delay_ms > 0) the wait is the hint plus up to
// 10% of it: the server already spread its clients, so the client adds
// only a little and never waits less than asked.
//
// Otherwise attempt 0 is at once plus a small jitter, uniform in
// [0, min(Initial/4, 100ms)]: most drops are one-off and the session is
// still resumable. Attempt n >= 1 waits uniformly in [0, c] with
// c = min(Max, Initial*Multiplier^(n-1)) ("full jitter"). At the cap the
// delay stays uniform over [0, Max]: it never becomes a constant, so a long
// outage does not end with every client retrying in step. (Full jitter at
// the cap was chosen over [Max/2, Max] because it spreads a herd twice as
// widely; the mean wait is Max/2.)
func (b Backoff) Delay(attempt int, hint *corralv1.ReconnectHint) time.Duration {
	b = b.withDefaults()
	if ms := hint.GetDelayMs(); ms > 0 {
		d := time.Duration(ms) * time.Millisecond
		return d + b.uniform(d/10)
	}
	if b.Schedule != nil {
		return max(b.Schedule(max(attempt, 0)), 0)
	}
	if attempt <= 0 {
		return b.uniform(min(b.Initial/4, firstJitterCap))
	}
	ceiling := b.Max
	if f := float64(b.Initial) * math.Pow(b.Multiplier, float64(attempt-1)); f < float64(b.Max) {
		ceiling = time.Duration(f)
	}
	return b.uniform(ceiling)
}

// uniform returns a duration uniform in [0, d].
func (b Backoff) uniform(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	if b.rng != nil {
		return time.Duration(b.rng.Int64N(int64(d) + 1))
	}
	return time.Duration(rand.Int64N(int64(d) + 1))
}
