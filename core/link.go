package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect/v2"
	"github.com/corral-rt/corral/core/frame"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	"github.com/corral-rt/corral/gen/corral/link/v1/linkv1connect"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/linkq"
	"google.golang.org/protobuf/proto"
)

// The core's side of the link (docs/ARCHITECTURE.md, "The link"): one
// edge's Link stream, many client connections multiplexed on it; its
// reader (readLoop, handle: a connection's frames onto its connWork), its
// bounded queue (enqueue, never blocking a room) and its one sender
// (sendLoop: what is ready, as one stream message).

// One LinkResponse carries at most this many frames and (unless one frame
// alone is larger) this many bytes, so a stream message stays well under
// the receiver's limit even when a queue is deep.
const (
	maxFramesPerSend = 4096
	maxBytesPerSend  = 1 << 20
)

var _ linkv1connect.LinkServiceHandler = (*Core)(nil)

// link is one edge stream: many client connections multiplexed.
type link struct {
	core   *Core
	stream linkv1connect.LinkServiceLinkServerStream
	// edge and version are what the edge said of itself (edgeIDHeader,
	// versionHeader; the link's own random id when it said nothing);
	// started is when the link began. For Info.
	edge, version string
	started       time.Time

	queue *linkq.Queue[*linkv1.CoreFrame]
	done  chan struct{} // closed by fail
	// edgeQueued is the bytes in the send queues of the edge's connections
	// on this link, as the edge last reported (LinkRequest.queued_bytes).
	edgeQueued atomic.Uint64

	mu  sync.Mutex // guards the following fields
	err error      // why the link failed; non-nil once failed

	// conns maps the edge's connection ids to their work queues. Only the
	// link's reader goroutine touches it.
	conns map[uint64]*connWork
	// workers bounds the connections whose frames are processed at once.
	workers chan struct{}
}

// Link serves one edge stream until the edge closes it or it fails.
func (c *Core) Link(ctx context.Context, stream linkv1connect.LinkServiceLinkServerStream) error {
	l := &link{
		core:    c,
		stream:  stream,
		started: time.Now(),
		queue:   linkq.New[*linkv1.CoreFrame](),
		done:    make(chan struct{}),
		conns:   make(map[uint64]*connWork),
		workers: make(chan struct{}, maxWorkersPerLink),
	}
	l.edge, l.version = edgeOf(ctx)
	if !c.links.add(l) {
		return connectErr(connect.CodeUnavailable, errCoreClosed)
	}
	defer c.links.remove(l)

	// The sender runs on its own; the reader is this goroutine.
	sendErr := make(chan error, 1)
	go func() { sendErr <- l.sendLoop(ctx) }()

	err := l.readLoop(ctx)
	l.fail(err)
	// Every connection of this link is gone: detach their sessions, and
	// drop what they had queued.
	for _, w := range l.conns {
		w.detach(&linkv1.Detach{})
	}
	if serr := <-sendErr; err == nil || errors.Is(err, errLinkEOF) {
		err = serr
	}
	if err == nil || errors.Is(err, errLinkEOF) {
		return nil
	}
	if errors.Is(err, errCoreClosed) {
		return connectErr(connect.CodeUnavailable, err)
	}
	if errors.Is(err, errLinkOverflow) {
		return connectErr(connect.CodeResourceExhausted, err)
	}
	return err
}

var (
	errLinkEOF      = errors.New("core: link closed by edge")
	errLinkOverflow = errors.New("core: link queue overflow (edge not reading)")
)

func (l *link) readLoop(ctx context.Context) error {
	for {
		req, err := l.stream.Receive()
		if err != nil {
			if errors.Is(err, context.Canceled) || isEOF(err) {
				return errLinkEOF
			}
			return fmt.Errorf("core: link receive: %w", err)
		}
		select {
		case <-l.done:
			return l.failure()
		default:
		}
		if req.QueuedBytes != nil {
			l.edgeQueued.Store(req.GetQueuedBytes())
		}
		for _, f := range req.GetFrames() {
			l.handle(ctx, f)
		}
	}
}

// enqueue queues f for the edge. It never blocks; if the queue is full the
// link fails and its clients resume elsewhere.
func (l *link) enqueue(f *linkv1.CoreFrame) { l.enqueueSized(f, frame.Size(f)) }

// enqueueEach queues f, one room's frame, on each of links: built and
// sized once for the room, not once per link.
func enqueueEach[V any](links map[*link]V, f *linkv1.CoreFrame) {
	size := frame.Size(f)
	for l := range links {
		l.enqueueSized(f, size)
	}
}

// enqueueSized is enqueue of f whose encoded size is known.
func (l *link) enqueueSized(f *linkv1.CoreFrame, size int) {
	if l.queue.Push(f, size, l.core.cfg.LinkQueue) {
		return
	}
	if l.failure() != nil {
		return
	}
	l.core.metrics.linkOverflows.Inc()
	l.fail(errLinkOverflow)
}

// backlog reports what waits toward the edge on this link: the frames and
// bytes in the core's queue, and the bytes the edge last reported in its
// connections' send queues.
func (l *link) backlog() (frames, bytes int, edgeBytes uint64) {
	frames, bytes = l.queue.Len()
	return frames, bytes, l.edgeQueued.Load()
}

// fail ends the link with err (the first error wins).
func (l *link) fail(err error) {
	if err == nil {
		err = errLinkEOF
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	l.err = err
	l.queue.Close()
	close(l.done)
}

func (l *link) failure() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// sendLoop drains the queue without blocking and sends what it took as one
// stream message, until the link fails.
func (l *link) sendLoop(ctx context.Context) error {
	for {
		select {
		case <-l.done:
			return nil
		case <-ctx.Done():
			l.fail(ctx.Err())
			return nil
		case <-l.queue.Ready():
		}
		for {
			batch := l.queue.Take(maxFramesPerSend, maxBytesPerSend)
			if len(batch) == 0 {
				break
			}
			l.core.metrics.linkSends.Inc()
			l.core.metrics.linkFrames.Add(float64(len(batch)))
			// The frames are never touched after this: the in-process
			// transport may hand them to the edge without copying.
			if err := l.stream.Send(&linkv1.LinkResponse{Frames: batch}); err != nil {
				l.fail(fmt.Errorf("core: link send: %w", err))
				return err
			}
		}
	}
}

// maxWorkersPerLink bounds the connections of one link whose frames are
// processed at the same time (each may wait on the store).
const maxWorkersPerLink = 1024

// handle routes one frame from the edge to its connection's queue. It runs
// on the link's reader goroutine.
func (l *link) handle(ctx context.Context, f *linkv1.EdgeFrame) {
	conn := f.GetConn()
	w := l.conns[conn]
	if r := f.GetReattach(); r != nil {
		f = reattachFrame(conn, r)
	}
	switch k := f.GetKind().(type) {
	case *linkv1.EdgeFrame_Attach:
		if w != nil {
			// A reused id: the edge lost track. The old one is gone.
			w.detach(&linkv1.Detach{})
		}
		w = newConnWork(ctx, l, conn)
		l.conns[conn] = w
		w.push(f, 0)
	case *linkv1.EdgeFrame_Detach:
		if w == nil {
			l.core.metrics.drop(droppedUnattached, 1)
			return
		}
		delete(l.conns, conn)
		w.detach(k.Detach)
	case *linkv1.EdgeFrame_Frame, *linkv1.EdgeFrame_Refresh:
		if w == nil {
			// Frames after a close we initiated, or a confused edge; the
			// connection is not attached, so there is no one to answer.
			l.core.metrics.drop(droppedUnattached, 1)
			return
		}
		w.push(f, proto.Size(f))
	default:
		l.core.metrics.drop(droppedUnknownFrame, 1)
	}
}

// send queues a frame for one connection.
func (l *link) send(conn uint64, f *corralv1.ServerFrame) {
	l.enqueue(frame.Conn(conn, f))
}

// close asks the edge to close a connection with a hint.
func (l *link) close(conn uint64, code corralv1.Code, reason string, delayMs uint32) {
	l.enqueue(frame.Close(conn, code, reason, delayMs))
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
