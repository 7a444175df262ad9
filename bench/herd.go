package bench

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
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

// postHerdLate is issue 34's bound: once the herd is over, a member that
// keeps up reads every message within 250 ms of its publish. A later read
// is a defect, not a drain setting.
const postHerdLate = 250 * time.Millisecond

// postHerd measures delivery once the herd is over: every read of a
// message published (its payload's scheduled time) at or after the moment
// the last member of the herd came back. Reads of earlier messages
// belong to the herd and are not counted here. All methods are safe for
// concurrent use; observe never blocks on another observe for long.
type postHerd struct {
	from atomic.Int64 // unix nanos the herd ended; 0 while it lasts
	lat  histogram
	late atomic.Uint64
	// acks is the post-herd publishes' schedule to acknowledgement: when
	// it is as late as the reads, the time went before the fan-out.
	acks histogram

	mu      sync.Mutex  // guards the following fields
	members map[int]int // late reads by member
	seconds map[int]int // late reads by whole seconds from the herd's end to the publish
	worst   lateRead
}

// lateRead is one read later than postHerdLate.
type lateRead struct {
	member int
	room   string
	offset uint64
	late   time.Duration // publish to read
	after  time.Duration // the herd's end to the publish
}

// begin marks the herd over at t: from now on, messages published at or
// after t are post-herd.
func (p *postHerd) begin(t time.Time) { p.from.Store(t.UnixNano()) }

// observe counts one read by member (in room) of offset, published at
// sent (unix nanos) and read at read, if the message is post-herd; it
// reports whether it was.
func (p *postHerd) observe(member int, room string, offset uint64, sent int64, read time.Time) bool {
	from := p.from.Load()
	if from == 0 || sent < from {
		return false
	}
	d := time.Duration(read.UnixNano() - sent)
	p.lat.observe(d)
	if d <= postHerdLate {
		return true
	}
	p.late.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.members == nil {
		p.members, p.seconds = map[int]int{}, map[int]int{}
	}
	p.members[member]++
	p.seconds[int((sent-from)/int64(time.Second))]++
	if d > p.worst.late {
		p.worst = lateRead{member: member, room: room, offset: offset, late: d, after: time.Duration(sent - from)}
	}
	return true
}

// acked counts the acknowledgement of a publish scheduled at sent (unix
// nanos), took after its schedule, if it is post-herd.
func (p *postHerd) acked(sent int64, took time.Duration) {
	if from := p.from.Load(); from != 0 && sent >= from {
		p.acks.observe(took)
	}
}

// stats freezes the figures; nil when the herd never ended.
func (p *postHerd) stats() *PostHerdStats {
	if p.from.Load() == 0 {
		return nil
	}
	s := &PostHerdStats{Latency: p.lat.summary(), Acks: p.acks.summary(), LateMs: ms(postHerdLate), Late: p.late.Load()}
	p.mu.Lock()
	defer p.mu.Unlock()
	s.LateMembers = len(p.members)
	if len(p.seconds) > 0 {
		s.LateBySecond = make(map[string]int, len(p.seconds))
		for k, v := range p.seconds {
			s.LateBySecond[strconv.Itoa(k)] = v
		}
	}
	if w := p.worst; w.late > 0 {
		s.Worst = fmt.Sprintf("member %d (%s) read offset %d %.0f ms after its publish, %.1f s after the herd ended",
			w.member, w.room, w.offset, ms(w.late), w.after.Seconds())
	}
	return s
}

// headline is "post-herd n=…, p50 … p99 … p99.9 … max … ms, N later than
// 250 ms".
func (s *PostHerdStats) headline() string {
	if s == nil {
		return "post-herd: the herd never ended"
	}
	l := s.Latency
	h := fmt.Sprintf("post-herd n=%d, p50 %.1f p99 %.1f p99.9 %.1f max %.1f ms (publish acks p99.9 %.1f ms), %d later than %.0f ms",
		l.Count, l.P50, l.P99, l.P999, l.Max, s.Acks.P999, s.Late, s.LateMs)
	if s.Late > 0 {
		h += fmt.Sprintf(" (%d members; by second after the herd: %s; worst: %s)",
			s.LateMembers, fmtCounts(s.LateBySecond), s.Worst)
	}
	return h
}
