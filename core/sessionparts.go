package core

import (
	"context"

	"github.com/corral-rt/corral/core/linkserver"
	csession "github.com/corral-rt/corral/core/session"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// A client session while it is attached, and its connection's ordered
// work queue, are package core/session's Session and Work; the core's
// side is here: what the work calls of the core (sessionCore) and what
// every connection's work shares (newWorkOpts).
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
	return h.c.attach(ctx, l, conn, w, a)
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
	h.c.detach(s, l, conn, clean)
}

// maxAttaching bounds the attaches (session starts and resumes) the core
// runs at once, over all its links (csession.WorkOptions.Attaching). An
// attach in memory is CPU only, and on Redis a few store round trips:
// 64 at once keep both cores busy and Redis's round trips overlapped,
// while the live sessions' frames and the internal API's publishes
// compete with 64 runnable attaches in a herd, not 10,000.
const maxAttaching = 64

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
