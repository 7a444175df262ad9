package hooks

import (
	"testing"
	"time"

	"github.com/sony/gobreaker/v2"
)

// TestBreaker: consecutive failures open it; after the cooldown one probe
// goes through (a second call meanwhile is refused); the probe's success
// closes it, its failure opens it again; a released probe frees the slot.
func TestBreaker(t *testing.T) {
	now := time.Unix(0, 0)
	b := &breaker{failures: 2, cooldown: time.Second, now: func() time.Time { return now }}
	call := func(ok bool) {
		t.Helper()
		if allowed, _ := b.allow(); !allowed {
			t.Fatal("refused while closed")
		}
		b.done(ok)
	}
	call(false)
	call(true) // a success resets the streak
	call(false)
	call(false)
	if ok, left := b.allow(); ok || left != time.Second {
		t.Fatalf("open: allow %v, %v; want refused, 1s left", ok, left)
	}
	now = now.Add(time.Second)
	if ok, _ := b.allow(); !ok {
		t.Fatal("the probe was refused after the cooldown")
	}
	if ok, _ := b.allow(); ok {
		t.Fatal("a second call went out while the probe was in flight")
	}
	b.release()
	if ok, _ := b.allow(); !ok {
		t.Fatal("a released probe did not free the slot")
	}
	b.done(false)
	if ok, _ := b.allow(); ok {
		t.Fatal("a failed probe did not open the breaker again")
	}
	now = now.Add(time.Second)
	call(true)
	if b.state != breakerClosed {
		t.Fatalf("state %v after a good probe, want closed", b.state)
	}
}

// BenchmarkBreaker compares the hand-written breaker with
// github.com/sony/gobreaker/v2 on the path every hook call takes: a closed
// breaker asked, then told of a success. Both are a few hundred ns at
// most, against a backend call of at least tens of µs; the figures are in
// breaker.go and docs/BENCHMARKS.md.
func BenchmarkBreaker(b *testing.B) {
	settings := gobreaker.Settings{
		Name:        "join",
		MaxRequests: 1,
		Timeout:     5 * time.Second,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 5 },
	}
	b.Run("corral", func(b *testing.B) {
		br := &breaker{failures: 5, cooldown: 5 * time.Second, now: time.Now, onState: func(breakerState) {}}
		for b.Loop() {
			if ok, _ := br.allow(); ok {
				br.done(true)
			}
		}
	})
	b.Run("gobreaker-twostep", func(b *testing.B) {
		cb := gobreaker.NewTwoStepCircuitBreaker[struct{}](settings)
		for b.Loop() {
			if done, err := cb.Allow(); err == nil {
				done(nil)
			}
		}
	})
	b.Run("gobreaker-execute", func(b *testing.B) {
		cb := gobreaker.NewCircuitBreaker[struct{}](settings)
		call := func() (struct{}, error) { return struct{}{}, nil }
		for b.Loop() {
			_, _ = cb.Execute(call)
		}
	})
	b.Run("corral-parallel", func(b *testing.B) {
		br := &breaker{failures: 5, cooldown: 5 * time.Second, now: time.Now, onState: func(breakerState) {}}
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if ok, _ := br.allow(); ok {
					br.done(true)
				}
			}
		})
	})
	b.Run("gobreaker-twostep-parallel", func(b *testing.B) {
		cb := gobreaker.NewTwoStepCircuitBreaker[struct{}](settings)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if done, err := cb.Allow(); err == nil {
					done(nil)
				}
			}
		})
	})
}
