package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-rt/corral/events"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/grants"
	"github.com/corral-rt/corral/internal/linkq"
	"github.com/corral-rt/corral/internal/reasons"
	"github.com/corral-rt/corral/internal/retry"
	"github.com/corral-rt/corral/roompattern"
	"github.com/prometheus/client_golang/prometheus"
)

// The event log (package events) holds committed room events for
// backends. Message events are committed by the history store with the
// message; member events (joined, left, disconnected, presence) are queued
// here without blocking the member's path and appended in batches by one
// goroutine, shortly after the change. The queue is bounded: when the log
// is unreachable for long, the newest member events are dropped and
// counted (corral_core_events_dropped_total). An Events stream (api.go)
// reads the log through an eventFilter.

// Bounds of an Events filter that have no setting: as many room patterns,
// and as long, as a user's grants.
const (
	maxEventPatterns   = grants.MaxPatterns
	maxEventPatternLen = grants.MaxPatternLen
)

// eventBatch is the most member events appended to the log at once.
const eventBatch = 512

// eventLog queues the core's member events for the log and appends them.
// Its methods are safe for concurrent use; emit* never block.
type eventLog struct {
	log    events.Log // nil: the history store keeps no event log
	limit  int        // bounds queue
	logger *slog.Logger
	// keep reports whether a room's member events go to the log (its
	// class's events-stream); nil: every room's. Set before use.
	keep func(room string) bool

	appended prometheus.Counter
	dropped  *prometheus.CounterVec
	dropBy   [numEventDropReasons]prometheus.Counter // dropped by reason, resolved once (reasons.go)

	queue  *linkq.Queue[*corralv1.Event]
	closed atomic.Bool // run is closing: emit drops

	mu sync.Mutex // guards the following fields
	// kicks remembers why Disconnect closed a session's connection, for
	// its disconnected events.
	kicks map[*session]kick
}

type kick struct {
	code   corralv1.Code
	reason string
	at     time.Time
}

// eventSource is a history store that commits message events to a log.
type eventSource interface {
	Events() events.Log
}

// newEventLog returns the event log of a core whose history store is
// hist, with at most limit member events waiting. Unless hist keeps no
// log, the caller runs run.
func newEventLog(hist any, limit int, logger *slog.Logger, reg prometheus.Registerer) *eventLog {
	e := &eventLog{
		limit:  limit,
		logger: logger,
		queue:  linkq.New[*corralv1.Event](),
		kicks:  make(map[*session]kick),
	}
	if es, ok := hist.(eventSource); ok {
		e.log = es.Events()
	}
	e.appended = prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_core_events_appended_total", Help: "Member events appended to the event log."})
	e.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_core_events_dropped_total", Help: "Member events not appended to the event log, by reason (queue_full, closed)."}, []string{"reason"})
	copy(e.dropBy[:], reasons.Counters("core", e.dropped, eventDropReasonNames[:]))
	if reg != nil {
		reg.MustRegister(e.appended, e.dropped)
	}
	return e
}

// emit queues a member event for the log, unless the room's class keeps
// its events out of the stream. It never blocks.
func (e *eventLog) emit(room string, ev *corralv1.Event) {
	if e.log == nil || (e.keep != nil && !e.keep(room)) {
		return
	}
	ev.Room = room
	ev.TimeMs = time.Now().UnixMilli()
	if e.queue.Push(ev, 1, e.limit) {
		return
	}
	if e.closed.Load() {
		e.dropBy[eventsClosed].Inc()
		return
	}
	e.dropBy[eventsQueueFull].Inc()
}

// emitJoined records that s joined room (resumed: rejoined by a resume).
func (e *eventLog) emitJoined(s *session, room string, resumed bool) {
	e.emit(room, &corralv1.Event{Kind: &corralv1.Event_Joined{Joined: &corralv1.MemberJoined{
		UserId: s.user, SessionId: s.id, Resumed: resumed,
	}}})
}

// emitLeft records that s left room.
func (e *eventLog) emitLeft(s *session, room string) {
	e.emit(room, &corralv1.Event{Kind: &corralv1.Event_Left{Left: &corralv1.MemberLeft{
		UserId: s.user, SessionId: s.id,
	}}})
}

// recordKick remembers why Disconnect closes the connection of s, for its
// disconnected events. Kicks of connections that were taken over before
// they detached are forgotten after a while.
func (e *eventLog) recordKick(s *session, k kick) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for old, ok := range e.kicks {
		if k.at.Sub(ok.at) > 5*time.Minute {
			delete(e.kicks, old)
		}
	}
	e.kicks[s] = k
}

// emitDisconnected records that the connection of s ended while it was in
// rooms, with the code and reason of a Disconnect call that caused it.
func (e *eventLog) emitDisconnected(s *session, rooms map[string]*room, clean bool) {
	e.mu.Lock()
	k, kicked := e.kicks[s]
	delete(e.kicks, s)
	e.mu.Unlock()
	for name := range rooms {
		d := &corralv1.MemberDisconnected{UserId: s.user, SessionId: s.id, Clean: clean}
		if kicked {
			d.Code, d.Reason = k.code, k.reason
		}
		e.emit(name, &corralv1.Event{Kind: &corralv1.Event_Disconnected{Disconnected: d}})
	}
}

// run appends queued member events to the log in batches until ctx ends,
// then makes a last bounded attempt. A failed batch is retried, after a
// jittered backoff, before anything newer.
func (e *eventLog) run(ctx context.Context) {
	backoff := retry.Backoff{Base: 50 * time.Millisecond, Cap: 2 * time.Second}
	var batch []*corralv1.Event
	for {
		if ctx.Err() != nil {
			e.closed.Store(true)
			e.flush(append(batch, e.queue.Drain()...))
			return
		}
		if n := eventBatch - len(batch); n > 0 {
			batch = append(batch, e.queue.Take(n, n)...)
		}
		if len(batch) == 0 {
			select {
			case <-ctx.Done():
			case <-e.queue.Ready():
			}
			continue
		}
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := e.log.Append(actx, batch)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				e.logger.Warn("event log append failed; retrying", "events", len(batch), "err", err)
			}
			backoff.Wait(ctx)
			continue
		}
		e.appended.Add(float64(len(batch)))
		batch = batch[:0]
		backoff.Reset()
	}
}

// flush appends what is left at close, within a short bound.
func (e *eventLog) flush(batch []*corralv1.Event) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for len(batch) > 0 {
		n := min(len(batch), eventBatch)
		if err := e.log.Append(ctx, batch[:n]); err != nil {
			e.logger.Warn("event log append at close failed", "events", len(batch), "err", err)
			e.dropBy[eventsClosed].Add(float64(len(batch)))
			return
		}
		e.appended.Add(float64(n))
		batch = batch[n:]
	}
}

// eventFilter selects the events an Events stream sends.
type eventFilter struct {
	rooms []string
	kinds uint32 // bit per EventKind; 0: every kind
}

func newEventFilter(req *corralv1.EventsRequest) (*eventFilter, error) {
	f := &eventFilter{rooms: req.GetRooms()}
	if len(f.rooms) > maxEventPatterns {
		return nil, fmt.Errorf("core: more than %d room patterns", maxEventPatterns)
	}
	for _, p := range f.rooms {
		if p == "" {
			return nil, errors.New("core: empty room pattern")
		}
		if len(p) > maxEventPatternLen {
			return nil, fmt.Errorf("core: room pattern longer than %d bytes", maxEventPatternLen)
		}
	}
	for _, k := range req.GetKinds() {
		if k <= corralv1.EventKind_EVENT_KIND_UNSPECIFIED || k > corralv1.EventKind_EVENT_KIND_PRESENCE {
			return nil, fmt.Errorf("core: unknown event kind %d", k)
		}
		f.kinds |= 1 << uint32(k)
	}
	return f, nil
}

// keep returns the events that pass the filter; it may return evs itself.
func (f *eventFilter) keep(evs []*corralv1.Event) []*corralv1.Event {
	if len(f.rooms) == 0 && f.kinds == 0 {
		return evs
	}
	var out []*corralv1.Event
	for _, ev := range evs {
		if f.kinds != 0 && f.kinds&(1<<uint32(kindOf(ev))) == 0 {
			continue
		}
		if len(f.rooms) > 0 && !roompattern.Match(f.rooms, ev.GetRoom()) {
			continue
		}
		out = append(out, ev)
	}
	return out
}

func kindOf(ev *corralv1.Event) corralv1.EventKind {
	switch ev.GetKind().(type) {
	case *corralv1.Event_Message:
		return corralv1.EventKind_EVENT_KIND_MESSAGE
	case *corralv1.Event_Joined:
		return corralv1.EventKind_EVENT_KIND_JOINED
	case *corralv1.Event_Left:
		return corralv1.EventKind_EVENT_KIND_LEFT
	case *corralv1.Event_Disconnected:
		return corralv1.EventKind_EVENT_KIND_DISCONNECTED
	case *corralv1.Event_Presence:
		return corralv1.EventKind_EVENT_KIND_PRESENCE
	}
	return corralv1.EventKind_EVENT_KIND_UNSPECIFIED
}
