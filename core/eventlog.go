package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/events"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/grants"
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

// apiState is the internal API's part of a Core.
type apiState struct {
	cfg APIConfig
	log events.Log // nil: the history store keeps no event log

	appended prometheus.Counter
	dropped  *prometheus.CounterVec

	wake chan struct{} // capacity 1: "the queue is not empty"

	mu     sync.Mutex // guards the following fields
	queue  []*corralv1.Event
	closed bool
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

// initAPI sets up the internal API's state; New calls it once the stores
// are known.
func (c *Core) initAPI() {
	a := &c.api
	a.cfg = c.cfg.API.withDefaults()
	if es, ok := c.hist.(eventSource); ok {
		a.log = es.Events()
	}
	a.wake = make(chan struct{}, 1)
	a.kicks = make(map[*session]kick)
	a.appended = prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_core_events_appended_total", Help: "Member events appended to the event log."})
	a.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_core_events_dropped_total", Help: "Member events not appended to the event log, by reason (queue_full, closed)."}, []string{"reason"})
	if c.cfg.Registerer != nil {
		c.cfg.Registerer.MustRegister(a.appended, a.dropped)
	}
	if a.log != nil {
		c.wg.Add(1)
		go c.appendLoop()
	}
}

// emit queues a member event for the log. It never blocks.
func (c *Core) emit(room string, ev *corralv1.Event) {
	a := &c.api
	if a.log == nil {
		return
	}
	ev.Room = room
	ev.TimeMs = time.Now().UnixMilli()
	a.mu.Lock()
	switch {
	case a.closed:
		a.mu.Unlock()
		a.dropped.WithLabelValues("closed").Inc()
		return
	case len(a.queue) >= a.cfg.EventQueue:
		a.mu.Unlock()
		a.dropped.WithLabelValues("queue_full").Inc()
		return
	}
	a.queue = append(a.queue, ev)
	first := len(a.queue) == 1
	a.mu.Unlock()
	if first {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
}

// emitJoined records that s joined room (resumed: rejoined by a resume).
func (c *Core) emitJoined(s *session, room string, resumed bool) {
	c.emit(room, &corralv1.Event{Kind: &corralv1.Event_Joined{Joined: &corralv1.MemberJoined{
		UserId: s.user, SessionId: s.id, Resumed: resumed,
	}}})
}

// emitLeft records that s left room.
func (c *Core) emitLeft(s *session, room string) {
	c.emit(room, &corralv1.Event{Kind: &corralv1.Event_Left{Left: &corralv1.MemberLeft{
		UserId: s.user, SessionId: s.id,
	}}})
}

// recordKick remembers why Disconnect closes the connection of s, for its
// disconnected events. Kicks of connections that were taken over before
// they detached are forgotten after a while.
func (a *apiState) recordKick(s *session, k kick) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for old, ok := range a.kicks {
		if k.at.Sub(ok.at) > 5*time.Minute {
			delete(a.kicks, old)
		}
	}
	a.kicks[s] = k
}

// emitDisconnected records that the connection of s ended while it was in
// rooms, with the code and reason of a Disconnect call that caused it.
func (c *Core) emitDisconnected(s *session, rooms map[string]*room, clean bool) {
	a := &c.api
	a.mu.Lock()
	k, kicked := a.kicks[s]
	delete(a.kicks, s)
	a.mu.Unlock()
	for name := range rooms {
		d := &corralv1.MemberDisconnected{UserId: s.user, SessionId: s.id, Clean: clean}
		if kicked {
			d.Code, d.Reason = k.code, k.reason
		}
		c.emit(name, &corralv1.Event{Kind: &corralv1.Event_Disconnected{Disconnected: d}})
	}
}

// appendLoop appends queued member events to the log in batches until the
// core closes, then makes a last bounded attempt.
func (c *Core) appendLoop() {
	defer c.wg.Done()
	a := &c.api
	backoff := time.Duration(0)
	var batch []*corralv1.Event
	for {
		closing := false
		if len(batch) == 0 {
			select {
			case <-c.ctx.Done():
				closing = true
			case <-a.wake:
			}
		} else {
			// A failed batch: retry after the backoff.
			t := time.NewTimer(backoff)
			select {
			case <-c.ctx.Done():
				closing = true
			case <-t.C:
			}
			t.Stop()
		}
		a.mu.Lock()
		if closing {
			a.closed = true
		}
		n := min(len(a.queue), eventBatch-len(batch))
		batch = append(batch, a.queue[:n]...)
		clear(a.queue[:n])
		a.queue = a.queue[n:]
		if len(a.queue) == 0 {
			a.queue = nil
		}
		more := len(a.queue) > 0
		a.mu.Unlock()
		if closing {
			c.flushEvents(batch)
			return
		}
		if len(batch) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
		err := a.log.Append(ctx, batch)
		cancel()
		if err != nil {
			backoff = min(max(2*backoff, 50*time.Millisecond), 2*time.Second)
			if c.ctx.Err() == nil {
				c.cfg.Logger.Warn("event log append failed; retrying", "events", len(batch), "err", err)
			}
			continue
		}
		a.appended.Add(float64(len(batch)))
		batch, backoff = batch[:0], 0
		if more {
			select {
			case a.wake <- struct{}{}:
			default:
			}
		}
	}
}

// flushEvents appends what is left at close, within a short bound.
func (c *Core) flushEvents(batch []*corralv1.Event) {
	a := &c.api
	a.mu.Lock()
	batch = append(batch, a.queue...)
	a.queue = nil
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for len(batch) > 0 {
		n := min(len(batch), eventBatch)
		if err := a.log.Append(ctx, batch[:n]); err != nil {
			c.cfg.Logger.Warn("event log append at close failed", "events", len(batch), "err", err)
			a.dropped.WithLabelValues("closed").Add(float64(len(batch)))
			return
		}
		a.appended.Add(float64(n))
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
		if len(f.rooms) > 0 && !auth.Match(f.rooms, ev.GetRoom()) {
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
