package eventlog

import (
	"context"
	"iter"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-rt/corral/events"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/linkq"
	"github.com/corral-rt/corral/internal/reasons"
	"github.com/corral-rt/corral/internal/retry"
	"github.com/prometheus/client_golang/prometheus"
)

// batchSize is the most member events appended to the log at once.
const batchSize = 512

// Member is a member's connection as the event log sees it: its user and
// session, and an identity (==) that tells two connections of one
// session apart, for the code and reason of a kick (RecordKick).
type Member interface {
	comparable
	UserID() string
	SessionID() string
}

// Options are what a Log needs of the core.
type Options struct {
	// Store is the core's history store: when it commits message events
	// to a log (it has Events() events.Log), member events go there too;
	// otherwise the Log keeps nothing.
	Store any
	// Limit bounds the member events waiting.
	Limit int
	// Keep reports whether a room's member events go to the log (its
	// class's events-stream); nil: every room's.
	Keep       func(room string) bool
	Logger     *slog.Logger
	Registerer prometheus.Registerer // nil: the metrics are not registered
}

// Log queues the core's member events for the log and appends them.
type Log[M Member] struct {
	log    events.Log // nil: the history store keeps no event log
	limit  int        // bounds queue
	logger *slog.Logger
	keep   func(room string) bool

	appended prometheus.Counter
	dropped  *prometheus.CounterVec
	dropBy   [numDropReasons]prometheus.Counter // dropped by reason, resolved once (reasons.go)

	queue  *linkq.Queue[*corralv1.Event]
	closed atomic.Bool // Run is closing: emit drops

	mu sync.Mutex // guards the following fields
	// kicks remembers why Disconnect closed a connection, for its
	// disconnected events.
	kicks map[M]kick
}

type kick struct {
	code   corralv1.Code
	reason string
	at     time.Time
}

// source is a history store that commits message events to a log.
type source interface {
	Events() events.Log
}

// New returns the event log of a core. Unless [Log.Store] is nil, the
// caller runs [Log.Run].
func New[M Member](o Options) *Log[M] {
	e := &Log[M]{
		limit:  o.Limit,
		logger: o.Logger,
		keep:   o.Keep,
		queue:  linkq.New[*corralv1.Event](),
		kicks:  make(map[M]kick),
	}
	if es, ok := o.Store.(source); ok {
		e.log = es.Events()
	}
	e.appended = prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_core_events_appended_total", Help: "Member events appended to the event log."})
	e.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_core_events_dropped_total", Help: "Member events not appended to the event log, by reason (queue_full, closed)."}, []string{"reason"})
	copy(e.dropBy[:], reasons.Counters("core", e.dropped, DropReasonNames[:]))
	if o.Registerer != nil {
		o.Registerer.MustRegister(e.appended, e.dropped)
	}
	return e
}

// Store is the event log the history store commits to, which Events
// streams read; nil when there is none.
func (e *Log[M]) Store() events.Log { return e.log }

// Dropped is the counter of member events dropped for r.
func (e *Log[M]) Dropped(r DropReason) prometheus.Counter { return e.dropBy[r] }

// Emit queues a member event for the log, unless the room's class keeps
// its events out of the stream. It never blocks.
func (e *Log[M]) Emit(room string, ev *corralv1.Event) {
	if e.log == nil || (e.keep != nil && !e.keep(room)) {
		return
	}
	ev.Room = room
	ev.TimeMs = time.Now().UnixMilli()
	if e.queue.Push(ev, 1, e.limit) {
		return
	}
	if e.closed.Load() {
		e.dropBy[DropClosed].Inc()
		return
	}
	e.dropBy[DropQueueFull].Inc()
}

// EmitJoined records that m joined room (resumed: rejoined by a resume).
func (e *Log[M]) EmitJoined(m M, room string, resumed bool) {
	e.Emit(room, &corralv1.Event{Kind: &corralv1.Event_Joined{Joined: &corralv1.MemberJoined{
		UserId: m.UserID(), SessionId: m.SessionID(), Resumed: resumed,
	}}})
}

// EmitLeft records that m left room.
func (e *Log[M]) EmitLeft(m M, room string) {
	e.Emit(room, &corralv1.Event{Kind: &corralv1.Event_Left{Left: &corralv1.MemberLeft{
		UserId: m.UserID(), SessionId: m.SessionID(),
	}}})
}

// RecordKick remembers why Disconnect closes the connection of m at at,
// for its disconnected events. Kicks of connections that were taken over
// before they detached are forgotten after a while.
func (e *Log[M]) RecordKick(m M, code corralv1.Code, reason string, at time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for old, k := range e.kicks {
		if at.Sub(k.at) > 5*time.Minute {
			delete(e.kicks, old)
		}
	}
	e.kicks[m] = kick{code: code, reason: reason, at: at}
}

// EmitDisconnected records that the connection of m ended while it was
// in rooms, with the code and reason of a Disconnect call that caused it.
func (e *Log[M]) EmitDisconnected(m M, rooms iter.Seq[string], clean bool) {
	e.mu.Lock()
	k, kicked := e.kicks[m]
	delete(e.kicks, m)
	e.mu.Unlock()
	for name := range rooms {
		d := &corralv1.MemberDisconnected{UserId: m.UserID(), SessionId: m.SessionID(), Clean: clean}
		if kicked {
			d.Code, d.Reason = k.code, k.reason
		}
		e.Emit(name, &corralv1.Event{Kind: &corralv1.Event_Disconnected{Disconnected: d}})
	}
}

// Run appends queued member events to the log in batches until ctx ends,
// then makes a last bounded attempt. A failed batch is retried, after a
// jittered backoff, before anything newer.
func (e *Log[M]) Run(ctx context.Context) {
	backoff := retry.Backoff{Base: 50 * time.Millisecond, Cap: 2 * time.Second}
	// A log whose Append never waits (events.Memory) gets no context and
	// timer of a deadline per batch (a batch is an event or two when Run
	// keeps up, as in a reconnect herd: 3% of its bytes).
	_, immediate := e.log.(events.Immediate)
	var batch []*corralv1.Event
	for {
		if ctx.Err() != nil {
			e.closed.Store(true)
			e.flush(append(batch, e.queue.Drain()...))
			return
		}
		if n := batchSize - len(batch); n > 0 {
			batch = append(batch, e.queue.Take(n, n)...)
		}
		if len(batch) == 0 {
			select {
			case <-ctx.Done():
			case <-e.queue.Ready():
			}
			continue
		}
		var err error
		if immediate {
			err = e.log.Append(ctx, batch)
		} else {
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err = e.log.Append(actx, batch)
			cancel()
		}
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
func (e *Log[M]) flush(batch []*corralv1.Event) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for len(batch) > 0 {
		n := min(len(batch), batchSize)
		if err := e.log.Append(ctx, batch[:n]); err != nil {
			e.logger.Warn("event log append at close failed", "events", len(batch), "err", err)
			e.dropBy[DropClosed].Add(float64(len(batch)))
			return
		}
		e.appended.Add(float64(n))
		batch = batch[n:]
	}
}
