package bench

import (
	"strings"
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

// TestPostHerd: reads of messages published before the herd ended are the
// herd's, however late; from its end on each read counts, and one later
// than 250 ms from its publish is late, named by member and offset.
func TestPostHerd(t *testing.T) {
	var p postHerd
	end := time.Date(2026, 12, 6, 21, 0, 0, 0, time.UTC)
	at := func(d time.Duration) int64 { return end.Add(d).UnixNano() }
	ms := time.Millisecond
	if p.observe(1, "r1", 5, at(-2*time.Second), end) || p.stats() != nil {
		t.Fatal("a read while the herd lasts counted as post-herd")
	}
	p.begin(end)
	reads := []struct {
		name   string
		member int
		offset uint64
		sent   time.Duration // from the herd's end
		took   time.Duration // publish to read
		post   bool
	}{
		{"published during the herd, read late", 1, 6, -time.Millisecond, 900 * ms, false},
		{"published as the herd ended", 2, 7, 0, 20 * ms, true},
		{"on time", 3, 8, time.Second, 100 * ms, true},
		{"at the bound exactly", 3, 9, time.Second, 250 * ms, true},
		{"late", 4, 10, 1500 * ms, 400 * ms, true},
		{"later, same member", 4, 11, 2 * time.Second, 700 * ms, true},
		{"late, another member", 5, 12, 2 * time.Second, 260 * ms, true},
	}
	for _, r := range reads {
		sent := at(r.sent)
		if got := p.observe(r.member, "r1", r.offset, sent, time.Unix(0, sent).Add(r.took)); got != r.post {
			t.Errorf("%s: post-herd %v, want %v", r.name, got, r.post)
		}
	}
	p.acked(at(-time.Millisecond), time.Second) // the herd's
	p.acked(at(time.Second), 30*ms)
	s := p.stats()
	if s.Acks.Count != 1 || s.Acks.Max < 29 || s.Acks.Max > 31 {
		t.Errorf("post-herd acks %+v, want the one of 30 ms", s.Acks)
	}
	if s.Latency.Count != 6 || s.Late != 3 || s.LateMembers != 2 || s.LateMs != 250 {
		t.Fatalf("stats: %+v", s)
	}
	if s.Latency.Max < 690 || s.Latency.Max > 710 {
		t.Errorf("max %v ms, want 700", s.Latency.Max)
	}
	want := "member 4 (r1) read offset 11 700 ms after its publish, 2.0 s after the herd ended"
	if s.Worst != want {
		t.Errorf("worst %q, want %q", s.Worst, want)
	}
	if got := fmtCounts(s.LateBySecond); got != "1 1, 2 2" {
		t.Errorf("late by second %q, want 1 1, 2 2", got)
	}
	if h := s.headline(); !strings.Contains(h, "post-herd n=6,") || !strings.Contains(h, "3 later than 250 ms (2 members; by second after the herd: 1 1, 2 2; worst: member 4") {
		t.Errorf("headline %q", h)
	}
	var none *PostHerdStats
	if h := none.headline(); h != "post-herd: the herd never ended" {
		t.Errorf("nil headline %q", h)
	}
}
