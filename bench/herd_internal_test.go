package bench

import (
	"testing"
	"time"
)

// TestHerdDelay: seed 001's schedule, min(300ms*2^(n-1), 5s)*(1±0.5*rand),
// at the ends of the draw and past the cap.
func TestHerdDelay(t *testing.T) {
	ms := time.Millisecond
	cases := map[string]struct {
		n    int
		u    float64
		want time.Duration
	}{
		"first attempt, least":   {1, 0, 150 * ms},
		"first attempt, middle":  {1, 0.5, 300 * ms},
		"first attempt, most":    {1, 1, 450 * ms},
		"second attempt, least":  {2, 0, 300 * ms},
		"fifth attempt, least":   {5, 0, 2400 * ms},
		"sixth attempt: the cap": {6, 0.5, 5 * time.Second},
		"100th attempt: the cap": {100, 1, 7500 * ms},
		"attempt 0 is the first": {0, 0.5, 300 * ms},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := herdDelay(tc.n, tc.u); got != tc.want {
				t.Fatalf("herdDelay(%d, %g) = %v, want %v", tc.n, tc.u, got, tc.want)
			}
		})
	}
	for range 1000 {
		if d := herdWait(1); d < 150*ms || d > 450*ms {
			t.Fatalf("herdWait(1) = %v, want in [150ms, 450ms]", d)
		}
	}
}

func TestHerdFailures(t *testing.T) {
	var h herdFailures
	if h.String() != "none" || h.counts() != nil {
		t.Fatalf("empty: %q %v", h.String(), h.counts())
	}
	h.add("join:timeout")
	h.add("connect:refused")
	h.add("join:timeout")
	if got, want := h.String(), "connect:refused 1, join:timeout 2"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}
