package core

import (
	"context"

	"github.com/corral-rt/corral/core/linkserver"
	csession "github.com/corral-rt/corral/core/session"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"google.golang.org/protobuf/proto"
)

// The core's side of a link (package core/linkserver serves the stream):
// the edge's client connections on one link by their id, each with its
// ordered work queue (package core/session, Work), and the one switch over the kinds of
// frame the edge sends (handle). Everything here but the workers runs on
// the link's reader goroutine.

// linkHandler is the core as package linkserver sees it.
type linkHandler struct{ c *Core }

// Open starts the core's side of a new link.
func (h linkHandler) Open(ctx context.Context, l *linkserver.Link) linkserver.Conns {
	return newLinkConns(h.c, l)
}

// linkConns is one link's connections.
type linkConns struct {
	core *Core
	link *linkserver.Link

	// conns maps the edge's connection ids to their work queues. Only the
	// link's reader goroutine touches it.
	conns map[uint64]*connWork
	// workers bounds the connections whose frames are processed at once.
	workers chan struct{}
}

// maxWorkersPerLink bounds the connections of one link whose frames are
// processed at the same time (each may wait on the store).
const maxWorkersPerLink = 1024

func newLinkConns(c *Core, l *linkserver.Link) *linkConns {
	return &linkConns{core: c, link: l, conns: make(map[uint64]*connWork), workers: make(chan struct{}, maxWorkersPerLink)}
}

// HandleFrame is handle (linkserver.Conns).
func (l *linkConns) HandleFrame(ctx context.Context, f *linkv1.EdgeFrame) { l.handle(ctx, f) }

// Closed detaches every connection of the link, which is gone: their
// sessions are detached and what they had queued dropped.
func (l *linkConns) Closed() {
	for _, w := range l.conns {
		w.Detach(&linkv1.Detach{})
	}
}

// handle routes one frame from the edge to its connection's queue. It runs
// on the link's reader goroutine.
func (l *linkConns) handle(ctx context.Context, f *linkv1.EdgeFrame) {
	conn := f.GetConn()
	w := l.conns[conn]
	if r := f.GetReattach(); r != nil {
		f = reattachFrame(conn, r)
	}
	switch k := f.GetKind().(type) {
	case *linkv1.EdgeFrame_Attach:
		if w != nil {
			// A reused id: the edge lost track. The old one is gone.
			w.Detach(&linkv1.Detach{})
		}
		w = csession.NewWork(ctx, l.core.workOpts, l.link, l.workers, conn)
		l.conns[conn] = w
		w.Push(f, 0)
	case *linkv1.EdgeFrame_Detach:
		if w == nil {
			l.core.metrics.drop(droppedUnattached, 1)
			return
		}
		delete(l.conns, conn)
		w.Detach(k.Detach)
	case *linkv1.EdgeFrame_Frame, *linkv1.EdgeFrame_Refresh, *linkv1.EdgeFrame_ReplayTaken:
		if w == nil {
			// Frames after a close we initiated, or a confused edge; the
			// connection is not attached, so there is no one to answer.
			l.core.metrics.drop(droppedUnattached, 1)
			return
		}
		w.Push(f, proto.Size(f))
	default:
		l.core.metrics.drop(droppedUnknownFrame, 1)
	}
}

// reattachFrame turns an edge's Reattach into the Attach of a client's
// Resume: a reattach takes the same path as a resume, through the same
// checks (the session store's token and user, and admit for every room).
func reattachFrame(conn uint64, r *linkv1.Reattach) *linkv1.EdgeFrame {
	return &linkv1.EdgeFrame{Conn: conn, Kind: &linkv1.EdgeFrame_Attach{Attach: &linkv1.Attach{
		Hello: &corralv1.Hello{Client: r.GetClient(), Resume: &corralv1.Resume{
			SessionId: r.GetSessionId(), ResumeToken: r.GetResumeToken(), Rooms: r.GetRooms(),
		}},
		Identity:   r.GetIdentity(),
		RemoteAddr: r.GetRemoteAddr(),
		Protocol:   r.GetProtocol(),
		Info:       r.GetInfo(),
	}}}
}
