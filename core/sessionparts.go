package core

import (
	"context"
	"maps"
	"time"

	"github.com/corral-rt/corral/core/eventlog"
	"github.com/corral-rt/corral/core/linkserver"
	csession "github.com/corral-rt/corral/core/session"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// A client session while it is attached, its connection's ordered work
// queue and its life (attach, resume, join, detach) are package
// core/session's Session, Work and Lifecycle; the core's side is here:
// what the work calls of the core (sessionCore), what every connection's
// work shares (newWorkOpts) and the ports the lifecycle reaches the core
// through (newLifecycle).
type (
	session  = csession.Session
	joinReq  = csession.JoinReq
	connWork = csession.Work
	endpoint = csession.Endpoint
)

// maxPublishBudgets bounds the publish budgets a core holds (pubRates):
// the (user, room) pairs that published within burst / rate, a few
// seconds by default.
const maxPublishBudgets = 1 << 17

// sessionCore is the core as a connection's work (package core/session)
// sees it. Its methods run on the connection's worker.
type sessionCore struct{ c *Core }

var _ csession.Core = sessionCore{}

func (h sessionCore) Attach(ctx context.Context, l *linkserver.Link, conn uint64, w *connWork, a *linkv1.Attach) *session {
	return h.c.life.Attach(ctx, l, conn, w, a)
}

func (h sessionCore) HandleClient(ctx context.Context, s *session, f *corralv1.ClientFrame) {
	h.c.handleClient(ctx, s, f)
}

func (h sessionCore) Refresh(ctx context.Context, s *session, id *corralv1.Identity) {
	h.c.refresh(ctx, s, id)
}

func (h sessionCore) ReplayTaken(ctx context.Context, s *session, room string) {
	h.c.replayTaken(ctx, s, room) // replay.go
}

func (h sessionCore) Detach(s *session, l *linkserver.Link, conn uint64, clean bool) {
	h.c.life.Detach(s, l, conn, clean)
}

// maxAttaching bounds the attaches (session starts and resumes) the core
// runs at once, over all its links (csession.WorkOptions.Attaching): as
// many as one link's worker slots, so a herd on one edge runs as before,
// but its attaches no longer hold the worker slots its live sessions'
// frames need. Not fewer: an attach on Redis waits for a few store round
// trips, and 64 at once (tried) would cap a herd at 640 attaches/s where
// Redis is 20 ms away; in memory, on a quiet machine, 64 recovered the
// herd no sooner (docs/benchmarks/2026-12-06-2342-issue34-herds-quiet.md).
const maxAttaching = maxWorkersPerLink

// newWorkOpts is what every connection's work of c shares
// (csession.WorkOptions): the queue's bounds and c's metrics and reasons.
func newWorkOpts(c *Core) *csession.WorkOptions {
	m := c.metrics
	return &csession.WorkOptions{
		Core:      sessionCore{c},
		MaxFrames: int(c.cfg.ConnQueueFrames),
		MaxBytes:  int(c.cfg.ConnQueueBytes),
		Attaching: make(chan struct{}, maxAttaching),
		Metrics: csession.WorkMetrics{
			BacklogFrames:  m.backlogFrames,
			BacklogBytes:   m.backlogBytes,
			Coalesced:      m.coalesced,
			DropClosing:    func(n int) { m.drop(droppedConnClosing, n) },
			DropBacklog:    func(n int) { m.drop(droppedBacklog, n) },
			DropDetached:   func(n int) { m.drop(droppedDetached, n) },
			DropUnattached: func(n int) { m.drop(droppedUnattached, n) },
			RefuseBacklog:  func() { m.refuse(refusedBacklog) },
		},
	}
}

// newLifecycle is the session lifecycle of c (csession.Lifecycle), wired
// to c's parts: the session store and table, the room table, the door,
// the joins' reads, presence, the event log and c's metrics.
func newLifecycle(c *Core) *csession.Lifecycle {
	m := c.metrics
	return &csession.Lifecycle{
		Store:    c.sess,
		Table:    c.attached,
		Rooms:    sessionRooms{c},
		Door:     sessionDoor{c.adm},
		Reads:    sessionReads{c},
		Presence: sessionPresence{&c.pres},
		Events:   sessionEvents{c.events},
		Metrics: csession.FlowMetrics{
			StoreOp:     m.storeOp,
			StaleResume: func() { m.refuse(refusedStaleResume) },
			Reconnected: func(d time.Duration) { m.reconnectSeconds.Observe(d.Seconds()) },
			Resumed:     m.resumes.Inc,
		},
		Logger:    c.cfg.Logger,
		Heartbeat: c.cfg.Heartbeat,
		TTL:       c.cfg.SessionTTL,
	}
}

// sessionRooms is the room table as a session's joins use it
// (csession.Rooms; rooms.go).
type sessionRooms struct{ c *Core }

func (p sessionRooms) Acquire(ctx context.Context, name string) (*room, error) {
	return p.c.acquireRoom(ctx, name, true)
}

func (p sessionRooms) Release(r *room)       { p.c.releaseRoom(r) }
func (p sessionRooms) ReleaseMember(r *room) { p.c.releaseMember(r) }

func (p sessionRooms) Failed(ctx context.Context, s *session, q *joinReq, err error) {
	p.c.joinFailed(ctx, s, q, err) // errors.go
}

// sessionDoor is the door as a session's joins pass it
// (csession.Admission; door.go).
type sessionDoor struct{ a *admission }

func (p sessionDoor) Admit(ctx context.Context, s *session, reqs []*joinReq) []*joinReq {
	return p.a.admit(ctx, s, reqs)
}

func (p sessionDoor) RefuseFull(ctx context.Context, s *session, q *joinReq) {
	p.a.refuseFull(ctx, s, q)
}

// sessionReads are the joins' reads and the hooks of a room going live
// (csession.Reads).
type sessionReads struct{ c *Core }

func (p sessionReads) Missed(ctx context.Context, qs []*joinReq) { p.c.readMissed(ctx, qs) }    // replay.go
func (p sessionReads) Open(ctx context.Context, qs []*joinReq)   { p.c.grow.readOpen(ctx, qs) } // grow.go
func (p sessionReads) Old(ctx context.Context, qs []*joinReq)    { p.c.keyed.readOld(ctx, qs) } // keyed.go

// sessionEvents is the event log as a session's joins and detach
// write it (csession.Events; core/eventlog).
type sessionEvents struct{ e *eventlog.Log[*session] }

func (p sessionEvents) EmitJoined(s *session, room string, resumed bool) {
	p.e.EmitJoined(s, room, resumed)
}

func (p sessionEvents) EmitDisconnected(s *session, rooms map[string]*room, clean bool) {
	p.e.EmitDisconnected(s, maps.Keys(rooms), clean)
}

// sessionPresence is presence as a session's joins and detach change it
// (csession.Presence; presence.go).
type sessionPresence struct{ p *presenceState }

func (p sessionPresence) Join(ctx context.Context, s *session, r *room, state []byte) {
	p.p.join(ctx, s, r, state)
}

func (p sessionPresence) Leave(s *session, room string, clean bool) { p.p.leave(s, room, clean) }
func (p sessionPresence) Detach(s *session, clean bool)             { p.p.detach(s, clean) }
