package client_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

func seeded(b client.Backoff, seed uint64) client.Backoff {
	return client.BackoffWithRand(b, rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
}

func TestBackoffBounds(t *testing.T) {
	ms := time.Millisecond
	custom := client.Backoff{Initial: 100 * ms, Max: time.Second, Multiplier: 3}
	cases := map[string]struct {
		b        client.Backoff
		attempt  int
		hint     *corralv1.ReconnectHint
		min, max time.Duration
	}{
		"first attempt: at once plus a little": {client.Backoff{}, 0, nil, 0, 75 * ms},
		"first attempt jitter capped at 100ms": {client.Backoff{Initial: 2 * time.Second}, 0, nil, 0, 100 * ms},
		"negative attempt is the first":        {client.Backoff{}, -3, nil, 0, 75 * ms},
		"attempt 1: up to Initial":             {client.Backoff{}, 1, nil, 0, 300 * ms},
		"attempt 2: up to Initial*2":           {client.Backoff{}, 2, nil, 0, 600 * ms},
		"attempt 5: up to Initial*16":          {client.Backoff{}, 5, nil, 0, 4800 * ms},
		"attempt 7: capped at Max":             {client.Backoff{}, 7, nil, 0, 10 * time.Second},
		"attempt 1000: capped, no overflow":    {client.Backoff{}, 1000, nil, 0, 10 * time.Second},
		"custom multiplier":                    {custom, 3, nil, 0, 900 * ms},
		"custom cap":                           {custom, 4, nil, 0, time.Second},
		"bad multiplier means 2":               {client.Backoff{Multiplier: 0.5}, 3, nil, 0, 1200 * ms},
		"Max below Initial is raised":          {client.Backoff{Initial: time.Second, Max: ms}, 9, nil, 0, time.Second},
		"hint: at least the hint, ≤10% more":   {client.Backoff{}, 0, &corralv1.ReconnectHint{DelayMs: 2000}, 2 * time.Second, 2200 * ms},
		"hint wins over a long backoff":        {client.Backoff{}, 30, &corralv1.ReconnectHint{DelayMs: 500}, 500 * ms, 550 * ms},
		"schedule replaces the backoff":        {client.Backoff{Schedule: func(n int) time.Duration { return time.Duration(n+1) * time.Second }}, 2, nil, 3 * time.Second, 3 * time.Second},
		"schedule: a negative wait is none":    {client.Backoff{Schedule: func(int) time.Duration { return -time.Second }}, 0, nil, 0, 0},
		"schedule: the hint still wins":        {client.Backoff{Schedule: func(int) time.Duration { return time.Minute }}, 0, &corralv1.ReconnectHint{DelayMs: 500}, 500 * ms, 550 * ms},
		"zero hint delay: backoff":             {client.Backoff{}, 1, &corralv1.ReconnectHint{Code: corralv1.Code_CODE_SLOW_CONSUMER}, 0, 300 * ms},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := seeded(tc.b, 1)
			for range 2000 {
				d := b.Delay(tc.attempt, tc.hint)
				if d < tc.min || d > tc.max {
					t.Fatalf("Delay(%d) = %v, want in [%v, %v]", tc.attempt, d, tc.min, tc.max)
				}
			}
			// The global source obeys the same bounds.
			if d := tc.b.Delay(tc.attempt, tc.hint); d < tc.min || d > tc.max {
				t.Fatalf("Delay(%d) = %v with the global source, want in [%v, %v]", tc.attempt, d, tc.min, tc.max)
			}
		})
	}
}

// TestBackoffJitteredAtCap: at the cap delays stay spread over [0, Max]; a
// herd that has been retrying for long does not fall into step.
func TestBackoffJitteredAtCap(t *testing.T) {
	b := seeded(client.Backoff{}, 42)
	const n = 4000
	ceiling := 10 * time.Second
	distinct := make(map[time.Duration]bool)
	var sum time.Duration
	buckets := make([]int, 10)
	for range n {
		d := b.Delay(40, nil)
		distinct[d] = true
		sum += d
		buckets[min(int(d*10/ceiling), 9)]++
	}
	if len(distinct) < n*9/10 {
		t.Fatalf("%d distinct delays in %d draws: not jittered", len(distinct), n)
	}
	if mean := sum / n; mean < 4500*time.Millisecond || mean > 5500*time.Millisecond {
		t.Fatalf("mean delay at the cap %v, want about %v", mean, ceiling/2)
	}
	// Uniform: each tenth of [0, Max] holds about n/10 draws.
	for i, c := range buckets {
		if c < n/10*7/10 || c > n/10*13/10 {
			t.Fatalf("tenth %d of [0, Max] holds %d of %d delays: not uniform (%v)", i, c, n, buckets)
		}
	}
}

// TestBackoffFirstAttemptSpread: even the immediate retry is spread a
// little, so a mass drop does not come back in one instant.
func TestBackoffFirstAttemptSpread(t *testing.T) {
	b := seeded(client.Backoff{}, 7)
	distinct := make(map[time.Duration]bool)
	for range 1000 {
		distinct[b.Delay(0, nil)] = true
	}
	if len(distinct) < 900 {
		t.Fatalf("%d distinct first delays in 1000 draws", len(distinct))
	}
}

func TestBackoffDeterministic(t *testing.T) {
	a, b := seeded(client.Backoff{}, 9), seeded(client.Backoff{}, 9)
	for i := range 100 {
		if x, y := a.Delay(i%10, nil), b.Delay(i%10, nil); x != y {
			t.Fatalf("draw %d: %v != %v with the same seed", i, x, y)
		}
	}
}
