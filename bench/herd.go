package bench

import (
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"time"
)

// The real herd (issue 34): W1's clients come back from a reset on their
// own timers, with nothing in the generator limiting how many dial or
// rejoin at once: only the population's own schedule spreads them. The
// schedule is seed 001's: before reconnect attempt n (n >= 1, the first
// after the drop included) a client waits
//
//	min(300ms * 2^(n-1), 5s) * (1 ± 0.5*rand)
//
// so the first attempts land 150-450 ms after the reset, the second
// 300-900 ms after the first failed, and from the sixth on 2.5-7.5 s.
const (
	herdBase = 300 * time.Millisecond
	herdCap  = 5 * time.Second
)

// herdDelay is the wait before reconnect attempt n (1-based) given u, a
// uniform draw in [0, 1).
func herdDelay(n int, u float64) time.Duration {
	c := herdCap
	if n < 1 {
		n = 1
	}
	if n <= 6 { // 300ms * 2^5 = 9.6s is past the cap already
		c = min(herdBase<<(n-1), herdCap)
	}
	return time.Duration(float64(c) * (0.5 + u))
}

// herdWait is herdDelay with a draw from math/rand/v2's global source
// (safe for concurrent use).
func herdWait(n int) time.Duration { return herdDelay(n, rand.Float64()) }

// herdFailures counts the first reconnect attempts that failed, by kind
// (connect:refused, join:timeout, rejoin:not-recovered, ...): what the
// herd's first wave met. Safe for concurrent use.
type herdFailures struct {
	mu sync.Mutex // guards the following field
	by map[string]int
}

func (h *herdFailures) add(kind string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.by == nil {
		h.by = map[string]int{}
	}
	h.by[kind]++
}

// counts returns a copy (nil when none failed).
func (h *herdFailures) counts() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.by) == 0 {
		return nil
	}
	out := make(map[string]int, len(h.by))
	for k, v := range h.by {
		out[k] = v
	}
	return out
}

// String is "kind n, kind n" in kind order, or "none".
func (h *herdFailures) String() string {
	c := h.counts()
	if len(c) == 0 {
		return "none"
	}
	ks := make([]string, 0, len(c))
	for k := range c {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	s := ""
	for i, k := range ks {
		if i > 0 {
			s += ", "
		}
		s += k + " " + strconv.Itoa(c[k])
	}
	return s
}
