package edge

import (
	"context"
	"sync"
	"time"

	"github.com/corral-rt/corral/internal/mono"
	"github.com/prometheus/client_golang/prometheus"
)

// sender is one shard of the edge's writers: one goroutine that writes,
// without blocking, every connection handed to it (conn.send), one after
// another. A connection is handed over when a frame is queued and no writer
// holds it (conn.push), or when its socket has room again after a write it
// did not take whole (EPOLLOUT, poller.waitWritable). Connections are
// spread over the shards by id, one shard per core.
//
// No timer is involved: a socket that is not busy is written as soon as
// its shard gets to it; frames queued while the shard is busy (other
// sockets, or this one's previous write) go together in the next write
// (tailscale derp's sendLoop: drain what is queued, write it once). An idle
// connection holds no goroutine; a socket without room waits in the
// poller, not on a goroutine.
//
// After Stop (the edge closed), a connection handed over is written on a
// goroutine of its own, blocking (conn.sendBlocking), so that a connection
// still open is never left with frames and no writer.
type sender struct {
	passes prometheus.Histogram // each pass's duration
	wake   chan struct{}        // capacity 1: "due is no longer empty"

	mu      sync.Mutex // guards the following fields
	due     []*conn    // connections to write, each once (conn.writing)
	stopped bool
}

func newSenders(n int, passes prometheus.Histogram) []*sender {
	ss := make([]*sender, max(n, 1))
	for i := range ss {
		ss[i] = &sender{passes: passes, wake: make(chan struct{}, 1)}
	}
	return ss
}

// add hands c to the shard. The caller holds c's writer token
// (conn.writing), which keeps c in due at most once.
func (s *sender) add(c *conn) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		go c.sendBlocking()
		return
	}
	s.due = append(s.due, c)
	first := len(s.due) == 1
	s.mu.Unlock()
	if first {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// addAll hands cs, all of this shard, to it at once: one lock and one
// wake-up for a link batch's connections (handoff). The caller holds each
// one's writer token.
func (s *sender) addAll(cs []*conn) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		for _, c := range cs {
			go c.sendBlocking()
		}
		return
	}
	first := len(s.due) == 0
	s.due = append(s.due, cs...)
	s.mu.Unlock()
	if first {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// handoff collects the connections whose writer token was taken while one
// batch from the core was queued (link.dispatch), each once, by shard, and
// hands them to their senders after the whole batch is queued. Handed over
// at its first frame, a socket was written with that frame alone while the
// batch's next frames for it were still being queued (a burst of n room
// messages: up to n writes per member); handed over after, it gets the
// batch in one write. No timer: a batch is what the core queued while its
// sender was busy (core link.sendLoop), so it is one frame at a low rate
// and grows only under load.
//
// A handoff is not safe for concurrent use: the link's is guarded by the
// link's lock, and reused from batch to batch.
type handoff struct {
	byShard [][]*conn
}

// add keeps c, whose writer token the caller took, for flush.
func (h *handoff) add(c *conn) {
	ss := c.e.senders
	if len(h.byShard) != len(ss) {
		h.byShard = make([][]*conn, len(ss))
	}
	i := c.shard()
	h.byShard[i] = append(h.byShard[i], c)
}

// flush hands what add kept to the senders, a shard at a time.
func (h *handoff) flush(ss []*sender) {
	for i, cs := range h.byShard {
		if len(cs) == 0 {
			continue
		}
		ss[i].addAll(cs)
		clear(cs) // hold no connection until the next batch
		h.byShard[i] = cs[:0]
	}
}

// run writes the connections handed over, in passes, until ctx ends; then
// what is still due is written blocking, each on a goroutine.
func (s *sender) run(ctx context.Context) {
	var pass []*conn
	for {
		s.mu.Lock()
		pass, s.due = s.due, pass[:0]
		s.mu.Unlock()
		if len(pass) == 0 {
			select {
			case <-ctx.Done():
				s.stop()
				return
			case <-s.wake:
			}
			continue
		}
		start := mono.Now()
		for _, c := range pass {
			c.send()
		}
		clear(pass) // hold no connection until the next pass
		s.passes.Observe(time.Duration(mono.Now() - start).Seconds())
	}
}

// stop ends the shard: what is due, and what is handed over from now on,
// is written blocking on goroutines of its own.
func (s *sender) stop() {
	s.mu.Lock()
	s.stopped = true
	due := s.due
	s.due = nil
	s.mu.Unlock()
	for _, c := range due {
		go c.sendBlocking()
	}
}
