package bench

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// A histogram counts durations in log-linear buckets of microseconds: exact
// below 32µs, then 32 buckets per power of two (under 3.2% error). All
// methods are safe for concurrent use; Observe never blocks.
type histogram struct {
	counts [histBuckets]atomic.Uint64
	n      atomic.Uint64
	sum    atomic.Uint64 // microseconds
	max    atomic.Uint64 // microseconds
}

const (
	histSub     = 32
	histShift   = 5 // log2(histSub)
	histMaxExp  = 31
	histBuckets = histSub * (histMaxExp - histShift + 2)
)

func bucketOf(us uint64) int {
	if us < histSub {
		return int(us)
	}
	shift := bits.Len64(us) - histShift - 1
	i := histSub*(shift+1) + int(us>>shift) - histSub
	return min(i, histBuckets-1)
}

// bucketRange returns the [lo, hi) microseconds of bucket i.
func bucketRange(i int) (lo, hi uint64) {
	if i < histSub {
		return uint64(i), uint64(i) + 1
	}
	shift := i/histSub - 1
	lo = uint64(histSub+i%histSub) << shift
	return lo, lo + 1<<shift
}

func (h *histogram) observe(d time.Duration) {
	us := uint64(max(d, 0) / time.Microsecond)
	h.counts[bucketOf(us)].Add(1)
	h.n.Add(1)
	h.sum.Add(us)
	for {
		m := h.max.Load()
		if us <= m || h.max.CompareAndSwap(m, us) {
			return
		}
	}
}

// quantile returns the q-quantile (0 < q <= 1) as the middle of its bucket,
// or 0 when the histogram is empty.
func (h *histogram) quantile(q float64) time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			lo, hi := bucketRange(i)
			mid := (lo + hi) / 2
			return time.Duration(min(mid, h.max.Load())) * time.Microsecond
		}
	}
	return time.Duration(h.max.Load()) * time.Microsecond
}

// summary freezes the histogram's figures.
func (h *histogram) summary() Latency {
	n := h.n.Load()
	l := Latency{Count: n}
	if n == 0 {
		return l
	}
	l.P50 = ms(h.quantile(0.50))
	l.P95 = ms(h.quantile(0.95))
	l.P99 = ms(h.quantile(0.99))
	l.P999 = ms(h.quantile(0.999))
	l.Max = ms(time.Duration(h.max.Load()) * time.Microsecond)
	l.Mean = ms(time.Duration(h.sum.Load()/n) * time.Microsecond)
	return l
}

// buckets returns the non-empty buckets, for reports.
func (h *histogram) buckets() []Bucket {
	var out []Bucket
	for i := range h.counts {
		if c := h.counts[i].Load(); c > 0 {
			lo, hi := bucketRange(i)
			out = append(out, Bucket{LoMs: float64(lo) / 1e3, HiMs: float64(hi) / 1e3, Count: c})
		}
	}
	return out
}

// ms converts d to milliseconds for reports.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
