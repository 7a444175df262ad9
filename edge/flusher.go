package edge

import (
	"context"
	"sync"
	"time"

	"github.com/corral-rt/corral/internal/mono"
	"github.com/prometheus/client_golang/prometheus"
)

// flusher writes the frames queued for busy connections (see conn.idle),
// once per Config.CoalesceWindow, from one goroutine per shard for all of
// them: a busy room's members are written one after another, each in one
// write(2) without blocking, for one wake-up per window between them.
// A writer goroutine per busy socket cost a goroutine, a timer and two
// wake-ups per window each (a fifth of the server's CPU in the busy-room
// workload, docs/BENCHMARKS.md). A socket that cannot take its frames
// without blocking (full, or partly written) gets its own writer goroutine
// (conn.writeLoop), which writes the rest and ends.
type flusher struct {
	window time.Duration
	passes prometheus.Histogram // each pass's duration
	wake   chan struct{}        // capacity 1: "next moved earlier"

	mu  sync.Mutex
	due []*conn // connections for the next pass, each once (conn.scheduled)
	// next is when the first of due is due (mono.Now nanoseconds; 0: due is
	// empty): a window after its last write.
	next int64
}

// newFlushers makes n flushers for window (none when the window is not
// positive: every frame is written at once).
func newFlushers(n int, window time.Duration, passes prometheus.Histogram) []*flusher {
	if window <= 0 {
		return nil
	}
	fs := make([]*flusher, max(n, 1))
	for i := range fs {
		fs[i] = &flusher{window: window, passes: passes, wake: make(chan struct{}, 1)}
	}
	return fs
}

// add puts c in the first pass at or after at (mono.Now nanoseconds). The
// caller holds c.mu and has set c.scheduled, which keeps c in due at most
// once.
func (f *flusher) add(c *conn, at int64) {
	f.mu.Lock()
	f.due = append(f.due, c)
	sooner := f.next == 0 || at < f.next
	if sooner {
		f.next = at
	}
	f.mu.Unlock()
	if sooner {
		select {
		case f.wake <- struct{}{}:
		default:
		}
	}
}

// slack is how early a pass writes a connection: one due within it is
// written now rather than in a pass of its own.
func (f *flusher) slack() int64 { return int64(f.window / 4) }

// run makes a pass when the first connection in due is due, and again for
// as long as there are any, until ctx ends. Each connection is written a
// window after its last write, or up to slack sooner; one due later goes
// back into due (conn.flushDue). An edge with no busy socket holds the
// flusher parked: no ticker.
func (f *flusher) run(ctx context.Context) {
	t := time.NewTimer(f.window)
	t.Stop()
	defer t.Stop()
	var pass []*conn
	for {
		f.mu.Lock()
		next := f.next
		f.mu.Unlock()
		if next == 0 {
			select {
			case <-ctx.Done():
				return
			case <-f.wake:
			}
			continue
		}
		if wait := time.Duration(next - mono.Now()); wait > 0 {
			t.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-f.wake: // one due sooner: wait for it instead
				t.Stop()
				continue
			case <-t.C:
			}
		}
		f.mu.Lock()
		pass, f.due, f.next = f.due, pass[:0], 0
		f.mu.Unlock()
		now := mono.Now()
		for _, c := range pass {
			c.flushDue(f, now)
		}
		clear(pass) // hold no connection until the next pass
		f.passes.Observe(time.Duration(mono.Now() - now).Seconds())
	}
}
