package bench

import (
	"context"
	"math"
	"sync"
	"time"
)

// segment is a stretch of a rate profile: the rate moves linearly from
// from to to (events per second) over dur.
type segment struct {
	dur      time.Duration
	from, to float64
}

// profile is a rate over time, one segment after another.
type profile []segment

func steady(rate float64, d time.Duration) profile { return profile{{d, rate, rate}} }

func (p profile) duration() time.Duration {
	var d time.Duration
	for _, s := range p {
		d += s.dur
	}
	return d
}

// at returns when event k (from 0) is scheduled, counted from the start of
// the profile, and false when the profile ends first.
func (p profile) at(k int) (time.Duration, bool) {
	n := float64(k)
	var base time.Duration
	for _, s := range p {
		d := s.dur.Seconds()
		total := (s.from + s.to) / 2 * d
		if n < total {
			var t float64
			if s.to == s.from {
				t = n / s.from
			} else {
				// n = from*t + a*t^2, the smaller non-negative root.
				a := (s.to - s.from) / (2 * d)
				t = (-s.from + math.Sqrt(s.from*s.from+4*a*n)) / (2 * a)
			}
			return base + time.Duration(t*float64(time.Second)), true
		}
		n -= total
		base += s.dur
	}
	return 0, false
}

// pace fires the events of p in order, each when it is due, counted from
// start. It stops when the profile ends, after limit events (0: no limit),
// when ctx is done, or when fire returns false, and returns how many events
// it fired. A fire that blocks delays the events after it; they keep their
// scheduled times, so lateness shows as latency, not as a lower rate.
func pace(ctx context.Context, start time.Time, p profile, limit int, fire func(k int, at time.Time) bool) int {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	k := 0
	for limit <= 0 || k < limit {
		off, ok := p.at(k)
		if !ok {
			return k
		}
		at := start.Add(off)
		if wait := time.Until(at); wait > 500*time.Microsecond {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return k
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			return k
		}
		k++
		if !fire(k-1, at) {
			return k
		}
	}
	return k
}

// paceGo fires the first n events of p from start like pace, each in its
// own goroutine with at most inflight running at once (the pacing waits
// for a free one), and returns when every started fn has returned.
func paceGo(ctx context.Context, start time.Time, p profile, n, inflight int, fn func(k int, at time.Time)) {
	sem := make(chan struct{}, max(inflight, 1))
	var wg sync.WaitGroup
	pace(ctx, start, p, n, func(k int, at time.Time) bool {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return false
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(k, at)
		}()
		return true
	})
	wg.Wait()
}
