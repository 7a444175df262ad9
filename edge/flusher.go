package edge

import (
	"context"
	"sync"
	"time"
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
	wake   chan struct{} // capacity 1: "due is no longer empty"

	mu  sync.Mutex
	due []*conn // connections for the next pass, each once (conn.scheduled)
}

// newFlushers makes n flushers for window (none when the window is not
// positive: every frame is written at once).
func newFlushers(n int, window time.Duration) []*flusher {
	if window <= 0 {
		return nil
	}
	fs := make([]*flusher, max(n, 1))
	for i := range fs {
		fs[i] = &flusher{window: window, wake: make(chan struct{}, 1)}
	}
	return fs
}

// add puts c in the next pass. The caller holds c.mu and has just set
// c.scheduled, which keeps c in due at most once.
func (f *flusher) add(c *conn) {
	f.mu.Lock()
	f.due = append(f.due, c)
	first := len(f.due) == 1
	f.mu.Unlock()
	if first {
		select {
		case f.wake <- struct{}{}:
		default:
		}
	}
}

// run makes a pass over the connections due one window after the first
// of them was added, and again whenever more are, until ctx ends. An edge
// with no busy socket holds it parked: no ticker.
func (f *flusher) run(ctx context.Context) {
	t := time.NewTimer(f.window)
	t.Stop()
	defer t.Stop()
	var pass []*conn
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		}
		t.Reset(f.window)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f.mu.Lock()
		pass, f.due = f.due, pass[:0]
		f.mu.Unlock()
		for _, c := range pass {
			c.flushDue()
		}
		clear(pass) // hold no connection until the next pass
	}
}
