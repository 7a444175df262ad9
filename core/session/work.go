package session

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/corral-rt/corral/core/linkserver"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/tracing"
	"github.com/prometheus/client_golang/prometheus"
)

// Core is what a connection's work calls of the core, on the
// connection's worker, one call at a time per connection.
type Core interface {
	// Attach starts or resumes the session of a new connection, whose
	// work queue is w. It returns nil when the connection was refused
	// (a close is already queued).
	Attach(ctx context.Context, l *linkserver.Link, conn uint64, w *Work, a *linkv1.Attach) *Session
	// HandleClient handles one of the client's frames.
	HandleClient(ctx context.Context, s *Session, f *corralv1.ClientFrame)
	// Refresh applies the identity of a token the client refreshed.
	Refresh(ctx context.Context, s *Session, id *corralv1.Identity)
	// ReplayTaken goes on with a paged replay of room: the edge took
	// its last page.
	ReplayTaken(ctx context.Context, s *Session, room string)
	// Detach ends the attachment of s at conn on l.
	Detach(s *Session, l *linkserver.Link, conn uint64, clean bool)
}

// WorkOptions are what the work queues of a core's connections share.
type WorkOptions struct {
	Core Core
	// MaxFrames and MaxBytes bound a connection's queue (0: no bound):
	// Config.ConnQueueFrames and ConnQueueBytes.
	MaxFrames, MaxBytes int
	// Attaching, when set, bounds the attaches (a new connection's
	// session start or resume) that run at once, over every link of the
	// core: an attach takes a slot of it instead of its link's worker
	// slot. A reconnect herd is thousands of attaches; run all at once
	// they are as many runnable goroutines, among which the live
	// sessions' frames and the internal API's publishes wait their turn
	// (seconds, in the herd). Bounded, the herd waits in a queue and
	// what is already live goes on.
	Attaching chan struct{}
	Metrics   WorkMetrics
}

// WorkMetrics are where the queues count: what waits in them, the frames
// a newer one replaced, and each drop and refusal by the core's reason.
type WorkMetrics struct {
	BacklogFrames, BacklogBytes prometheus.Gauge
	Coalesced                   prometheus.Counter
	// DropClosing: frames after the detach or the overflow; DropBacklog:
	// frames dropped by an overflow; DropDetached: frames dropped by the
	// detach; DropUnattached: frames for a connection with no session.
	DropClosing, DropBacklog, DropDetached, DropUnattached func(n int)
	// RefuseBacklog: a connection closed for its overflowing queue.
	RefuseBacklog func()
}

// Work is one connection's queue of frames. Frames of a connection are
// processed in order, one at a time; different connections run in
// parallel, so a store round trip for one client never delays another.
//
// The queue is bounded (WorkOptions.MaxFrames and MaxBytes): the edge's
// rate limits keep an honest client far below it, so a connection past
// it is closed with CODE_BACKLOG_FULL and the frames it had queued are
// dropped. A presence update or an ack still queued is replaced by a
// newer one of the same room (latest wins), so a flood of them costs at
// most one store call per room at a time. A detach never waits behind the
// queue: it drops what is queued, cancels the store call in flight, and
// the session is released as soon as that call returns.
//
// Push and Detach are called by the link's reader goroutine, PushTask
// and the other methods by any; none blocks. The frames and tasks run
// on one worker goroutine at a time, started by a push to an idle queue.
type Work struct {
	o       *WorkOptions
	link    *linkserver.Link
	workers chan struct{} // the link's worker slots
	conn    uint64
	// ctx is the connection's work; cancel ends it, at the detach.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex // guards the following fields
	queue   []queued
	bytes   int                             // proto size of the frames in queue
	latest  map[latestKey]*linkv1.EdgeFrame // replaceable frames in queue
	running bool
	s       *Session       // set by the attach
	gone    *linkv1.Detach // non-nil once detached: only the detach is left to do
	full    bool           // the queue overflowed: the connection is being closed
}

// queued is a frame waiting in a connection's queue, with its proto size
// (counted against WorkOptions.MaxBytes).
type queued struct {
	f    *linkv1.EdgeFrame
	size int
	// task, instead of f: work of the internal API on this connection's
	// session, run in order with the client's frames. It is called with
	// a nil session when it is dropped instead.
	task func(ctx context.Context, s *Session)
}

// latestKey names a frame that a newer one of the same kind and room
// replaces while it is queued.
type latestKey struct {
	kind uint8 // 1: set_presence, 2: ack
	room string
}

// NewWork returns the queue of connection conn on link l, whose workers
// bound the connections of the link processed at once; ctx ends with the
// link.
func NewWork(ctx context.Context, o *WorkOptions, l *linkserver.Link, workers chan struct{}, conn uint64) *Work {
	w := &Work{o: o, link: l, workers: workers, conn: conn}
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

// Push queues f (size is its proto size; the attach counts 0) and starts
// the connection's worker if it is idle. Past the queue's bounds f is
// refused, the queue dropped and the connection closed with
// CODE_BACKLOG_FULL; frames that come after that or after the detach are
// dropped.
func (w *Work) Push(f *linkv1.EdgeFrame, size int) {
	m := &w.o.Metrics
	w.mu.Lock()
	if w.gone != nil || w.full {
		w.mu.Unlock()
		m.DropClosing(1)
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
			m.Coalesced.Inc()
			return
		}
	}
	if barrier != "" {
		delete(w.latest, latestKey{1, barrier})
		delete(w.latest, latestKey{2, barrier})
	}
	if (w.o.MaxFrames > 0 && len(w.queue) >= w.o.MaxFrames) ||
		(w.o.MaxBytes > 0 && w.bytes+size > w.o.MaxBytes) {
		n := len(w.queue)
		w.full = true
		w.dropLocked()
		w.mu.Unlock()
		m.RefuseBacklog()
		m.DropBacklog(n)
		w.cancel()
		w.link.Close(w.conn, corralv1.Code_CODE_BACKLOG_FULL,
			fmt.Sprintf("more than %d frames or %d bytes waiting on this connection", w.o.MaxFrames, w.o.MaxBytes),
			uint32(backlogDelay.Milliseconds()))
		return
	}
	w.queue = append(w.queue, queued{f: f, size: size})
	w.bytes += size
	m.BacklogFrames.Inc()
	m.BacklogBytes.Add(float64(size))
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
		go w.run(f.GetAttach() != nil)
	}
}

// PushTask queues a task of the internal API behind the frames already
// queued, and starts the worker if it is idle. It never blocks. It
// reports false, without queueing, when the connection is closing or its
// queue is full: the API never closes a connection for being busy. The
// task runs with the connection's ctx and session, or is called with a
// nil ctx and session when it is dropped instead.
func (w *Work) PushTask(task func(ctx context.Context, s *Session)) bool {
	w.mu.Lock()
	if w.gone != nil || w.full || (w.o.MaxFrames > 0 && len(w.queue) >= w.o.MaxFrames) {
		w.mu.Unlock()
		return false
	}
	w.queue = append(w.queue, queued{task: task})
	w.o.Metrics.BacklogFrames.Inc()
	start := !w.running
	w.running = true
	w.mu.Unlock()
	if start {
		go w.run(false)
	}
	return true
}

// backlogDelay is the delay told to a connection closed with
// CODE_BACKLOG_FULL before it comes back.
const backlogDelay = 2 * time.Second

// dropLocked empties the queue. Lock must be held.
func (w *Work) dropLocked() {
	m := &w.o.Metrics
	m.BacklogFrames.Sub(float64(len(w.queue)))
	m.BacklogBytes.Sub(float64(w.bytes))
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

// Depth is how many frames and tasks wait in w's queue.
func (w *Work) Depth() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue)
}

// Session returns the connection's session, nil until the attach made
// it or when it refused the connection, and whether the worker is idle
// (for tests that wait for the attach).
func (w *Work) Session() (s *Session, idle bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.s, !w.running
}

// Detach ends the connection's work: the queued frames are dropped
// (counted), the call in flight is cancelled, and the worker detaches the
// session as soon as that call returns (at once when none runs).
func (w *Work) Detach(d *linkv1.Detach) {
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
		w.o.Metrics.DropDetached(n)
	}
	if start {
		go w.run(false)
	}
}

// run processes the queue until it is empty, and the detach once the
// connection is gone. With attach (started by the push of the attach,
// a connection's first frame), the attach runs under a slot of
// WorkOptions.Attaching and the frames after it under one of the link's
// worker slots.
func (w *Work) run(attach bool) {
	c, m := w.o.Core, &w.o.Metrics
	slots := w.workers
	if attach && w.o.Attaching != nil {
		slots = w.o.Attaching
	}
	held := w.slot(slots)
	defer func() {
		if held {
			<-slots
		}
	}()
	for {
		w.mu.Lock()
		if w.gone != nil {
			d, s := w.gone, w.s
			w.s = nil
			w.mu.Unlock()
			if s != nil {
				c.Detach(s, w.link, w.conn, d.GetClean())
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
		m.BacklogFrames.Dec()
		m.BacklogBytes.Sub(float64(size))

		if task != nil {
			task(w.ctx, s)
			continue
		}
		switch k := f.GetKind().(type) {
		case *linkv1.EdgeFrame_Attach:
			s = c.Attach(w.ctx, w.link, w.conn, w, k.Attach)
			w.mu.Lock()
			w.s = s
			w.mu.Unlock()
			if slots == w.o.Attaching {
				// The attach is done: what follows is a live session's.
				if held {
					<-slots
				}
				slots = w.workers
				held = w.slot(slots)
			}
		case *linkv1.EdgeFrame_Frame:
			if s != nil {
				// A publish's corral.publish continues the edge's trace.
				// A refusal sent meanwhile names the frame (Error.frame).
				s.handling.Store(k.Frame)
				c.HandleClient(tracing.Continue(w.ctx, f.GetTraceparent()), s, k.Frame)
				s.handling.Store(nil)
			} else {
				m.DropUnattached(1)
			}
		case *linkv1.EdgeFrame_ReplayTaken:
			if s != nil {
				c.ReplayTaken(w.ctx, s, k.ReplayTaken.GetRoom())
			}
		case *linkv1.EdgeFrame_Refresh:
			if s != nil {
				// The client's Refresh, checked by the edge: a refusal
				// names it as the client frame's would.
				s.handling.Store(refreshFrame)
				c.Refresh(w.ctx, s, k.Refresh)
				s.handling.Store(nil)
			} else {
				m.DropUnattached(1)
			}
		}
	}
}

// slot takes one of slots and reports true, or reports false when the
// work ended (detached, or the link ended) while it waited: the detach
// alone is left then, and it needs no slot. A free slot is taken without
// asking for ctx.Done: a cancelCtx makes its done channel on the first
// call and keeps it for the connection's life, a channel per idle
// connection for nothing.
func (w *Work) slot(slots chan struct{}) bool {
	select {
	case slots <- struct{}{}:
		return true
	default:
	}
	select {
	case slots <- struct{}{}:
		return true
	case <-w.ctx.Done():
		return false
	}
}
