package core

import (
	"context"
	"fmt"
	"sync"
	"time"

	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/tracing"
)

// connWork is one connection's queue of frames. Frames of a connection are
// processed in order, one at a time; different connections run in
// parallel, so a store round trip for one client never delays another.
//
// The queue is bounded (Config.ConnQueueFrames and ConnQueueBytes): the
// edge's rate limits keep an honest client far below it, so a connection
// past it is closed with CODE_BACKLOG_FULL and the frames it had queued
// are dropped. A presence update or an ack still queued is replaced by a
// newer one of the same room (latest wins), so a flood of them costs at
// most one store call per room at a time. A detach never waits behind the
// queue: it drops what is queued, cancels the store call in flight, and
// the session is released as soon as that call returns.
//
// It stays in package core, beside the link server (core/linkserver)
// rather than in it: what it orders is the session's life (the attach
// makes the session it keeps, every frame and the internal API's tasks
// run on that session, the detach ends it), and its bounds, coalescing
// and drops are the core's client-frame rules and reasons. The link server
// moves frames and never sees a session; connWork will go with the
// sessions (resume.go, session.go) when they become a package.
type connWork struct {
	l    *linkConns
	conn uint64
	// ctx is the connection's work; cancel ends it, at the detach.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex // guards the following fields
	queue   []queued
	bytes   int                             // proto size of the frames in queue
	latest  map[latestKey]*linkv1.EdgeFrame // replaceable frames in queue
	running bool
	s       *session       // set by the attach
	gone    *linkv1.Detach // non-nil once detached: only the detach is left to do
	full    bool           // the queue overflowed: the connection is being closed
}

// queued is a frame waiting in a connection's queue, with its proto size
// (counted against Config.ConnQueueBytes).
type queued struct {
	f    *linkv1.EdgeFrame
	size int
	// task, instead of f: work of the internal API on this connection's
	// session (control.go), run in order with the client's frames. It is
	// called with a nil session when it is dropped instead.
	task func(ctx context.Context, s *session)
}

// latestKey names a frame that a newer one of the same kind and room
// replaces while it is queued.
type latestKey struct {
	kind uint8 // 1: set_presence, 2: ack
	room string
}

func newConnWork(ctx context.Context, l *linkConns, conn uint64) *connWork {
	w := &connWork{l: l, conn: conn}
	w.ctx, w.cancel = context.WithCancel(ctx)
	return w
}

// replaceable reports the key under which f replaces an older queued frame,
// and the room f orders against (a join or a leave of that room ends what
// may be replaced before it).
func replaceable(f *linkv1.EdgeFrame) (key latestKey, ok bool, barrier string) {
	switch k := f.GetFrame().GetKind().(type) {
	case *corralv1.ClientFrame_SetPresence:
		return latestKey{1, k.SetPresence.GetRoom()}, true, ""
	case *corralv1.ClientFrame_Ack:
		return latestKey{2, k.Ack.GetRoom()}, true, ""
	case *corralv1.ClientFrame_Join:
		return latestKey{}, false, k.Join.GetRoom()
	case *corralv1.ClientFrame_Leave:
		return latestKey{}, false, k.Leave.GetRoom()
	}
	return latestKey{}, false, ""
}

// push queues f (size is its proto size; the attach counts 0) and starts
// the connection's worker if it is idle. Past the queue's bounds f is
// refused, the queue dropped and the connection closed with
// CODE_BACKLOG_FULL; frames that come after that or after the detach are
// dropped.
func (w *connWork) push(f *linkv1.EdgeFrame, size int) {
	m := w.l.core.metrics
	cfg := &w.l.core.cfg
	w.mu.Lock()
	if w.gone != nil || w.full {
		w.mu.Unlock()
		m.drop(droppedConnClosing, 1)
		return
	}
	key, ok, barrier := replaceable(f)
	if ok {
		if old := w.latest[key]; old != nil {
			// Replaceable frames are few beside publishes: find the old
			// one's place from the back rather than index every frame.
			for i := len(w.queue) - 1; i >= 0; i-- {
				if q := &w.queue[i]; q.f == old {
					w.bytes += size - q.size
					q.size = size
					break
				}
			}
			old.Kind = f.Kind
			w.mu.Unlock()
			m.coalesced.Inc()
			return
		}
	}
	if barrier != "" {
		delete(w.latest, latestKey{1, barrier})
		delete(w.latest, latestKey{2, barrier})
	}
	if (cfg.ConnQueueFrames > 0 && len(w.queue) >= int(cfg.ConnQueueFrames)) ||
		(cfg.ConnQueueBytes > 0 && w.bytes+size > int(cfg.ConnQueueBytes)) {
		n := len(w.queue)
		w.full = true
		w.dropLocked()
		w.mu.Unlock()
		m.refuse(refusedBacklog)
		m.drop(droppedBacklog, n)
		w.cancel()
		w.l.close(w.conn, corralv1.Code_CODE_BACKLOG_FULL,
			fmt.Sprintf("more than %d frames or %d bytes waiting on this connection", cfg.ConnQueueFrames, cfg.ConnQueueBytes),
			uint32(backlogDelay.Milliseconds()))
		return
	}
	w.queue = append(w.queue, queued{f: f, size: size})
	w.bytes += size
	m.backlogFrames.Inc()
	m.backlogBytes.Add(float64(size))
	if ok {
		if w.latest == nil {
			w.latest = make(map[latestKey]*linkv1.EdgeFrame)
		}
		w.latest[key] = f
	}
	start := !w.running
	w.running = true
	w.mu.Unlock()
	if start {
		go w.run()
	}
}

// pushTask queues a task of the internal API (control.go) behind the
// frames already queued, and starts the worker if it is idle. It never
// blocks. It reports false, without queueing, when the connection is
// closing or its queue is full: the API never closes a connection for
// being busy.
func (w *connWork) pushTask(task func(ctx context.Context, s *session)) bool {
	cfg := &w.l.core.cfg
	w.mu.Lock()
	if w.gone != nil || w.full || (cfg.ConnQueueFrames > 0 && len(w.queue) >= int(cfg.ConnQueueFrames)) {
		w.mu.Unlock()
		return false
	}
	w.queue = append(w.queue, queued{task: task})
	w.l.core.metrics.backlogFrames.Inc()
	start := !w.running
	w.running = true
	w.mu.Unlock()
	if start {
		go w.run()
	}
	return true
}

// backlogDelay is the delay told to a connection closed with
// CODE_BACKLOG_FULL before it comes back.
const backlogDelay = 2 * time.Second

// dropLocked empties the queue. Lock must be held.
func (w *connWork) dropLocked() {
	m := w.l.core.metrics
	m.backlogFrames.Sub(float64(len(w.queue)))
	m.backlogBytes.Sub(float64(w.bytes))
	for _, q := range w.queue {
		if q.task != nil {
			q.task(nil, nil) // dropped: the task only reports it
		}
	}
	clear(w.queue)
	w.queue = w.queue[:0]
	w.bytes = 0
	clear(w.latest)
}

// detach ends the connection's work: the queued frames are dropped
// (counted), the call in flight is cancelled, and the worker detaches the
// session as soon as that call returns (at once when none runs).
func (w *connWork) detach(d *linkv1.Detach) {
	w.mu.Lock()
	if w.gone != nil {
		w.mu.Unlock()
		return
	}
	n := len(w.queue)
	w.gone = d
	w.dropLocked()
	start := !w.running
	w.running = true
	w.mu.Unlock()
	w.cancel()
	if n > 0 {
		w.l.core.metrics.drop(droppedDetached, n)
	}
	if start {
		go w.run()
	}
}

// run processes the queue until it is empty, and the detach once the
// connection is gone.
func (w *connWork) run() {
	c := w.l.core
	// A free slot is taken without asking for ctx.Done: a cancelCtx makes
	// its done channel on the first call and keeps it for the
	// connection's life, a channel per idle connection for nothing.
	select {
	case w.l.workers <- struct{}{}:
		defer func() { <-w.l.workers }()
	default:
		select {
		case w.l.workers <- struct{}{}:
			defer func() { <-w.l.workers }()
		case <-w.ctx.Done():
			// Detached (or the link ended) while waiting for a worker
			// slot: the detach alone is left, and it needs no slot.
		}
	}
	for {
		w.mu.Lock()
		if w.gone != nil {
			d, s := w.gone, w.s
			w.s = nil
			w.mu.Unlock()
			if s != nil {
				c.detach(s, w.l.link, w.conn, d.GetClean())
			}
			return
		}
		if len(w.queue) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		f, size, task := w.queue[0].f, w.queue[0].size, w.queue[0].task
		w.queue[0] = queued{}
		w.queue = w.queue[1:]
		w.bytes -= size
		if key, ok, _ := replaceable(f); ok && w.latest[key] == f {
			delete(w.latest, key)
		}
		s := w.s
		w.mu.Unlock()
		c.metrics.backlogFrames.Dec()
		c.metrics.backlogBytes.Sub(float64(size))

		if task != nil {
			task(w.ctx, s)
			continue
		}
		switch k := f.GetKind().(type) {
		case *linkv1.EdgeFrame_Attach:
			s = c.attach(w.ctx, w.l.link, w.conn, w, k.Attach)
			w.mu.Lock()
			w.s = s
			w.mu.Unlock()
		case *linkv1.EdgeFrame_Frame:
			if s != nil {
				// A publish's corral.publish continues the edge's trace.
				// A refusal sent meanwhile names the frame (Error.frame).
				s.handling.Store(k.Frame)
				c.handleClient(tracing.Continue(w.ctx, f.GetTraceparent()), s, k.Frame)
				s.handling.Store(nil)
			} else {
				c.metrics.drop(droppedUnattached, 1)
			}
		case *linkv1.EdgeFrame_ReplayTaken:
			if s != nil {
				s.replayTaken(w.ctx, c, k.ReplayTaken.GetRoom()) // replay.go
			}
		case *linkv1.EdgeFrame_Refresh:
			if s != nil {
				// The client's Refresh, checked by the edge: a refusal
				// names it as the client frame's would.
				s.handling.Store(refreshFrame)
				c.refresh(w.ctx, s, k.Refresh)
				s.handling.Store(nil)
			} else {
				c.metrics.drop(droppedUnattached, 1)
			}
		}
	}
}
