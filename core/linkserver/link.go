package linkserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-rt/corral/core/frame"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	"github.com/corral-rt/corral/gen/corral/link/v1/linkv1connect"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/linkq"
)

// One link: its reader (readLoop: the edge's frames to the core's Conns),
// its bounded queue (Enqueue, never blocking a producer) and its one
// sender (sendLoop: what is ready, as one stream message).

// One LinkResponse carries at most this many frames and (unless one frame
// alone is larger) this many bytes, so a stream message stays well under
// the receiver's limit even when a queue is deep.
const (
	maxFramesPerSend = 4096
	maxBytesPerSend  = 1 << 20
)

// Link is one edge stream: many client connections multiplexed. Its
// methods may be called concurrently; none blocks.
type Link struct {
	stream linkv1connect.LinkServiceLinkServerStream
	// edge and version are what the edge said of itself (edgeIDHeader,
	// versionHeader; the link's own random id when it said nothing);
	// started is when the link began. For Info.
	edge, version string
	started       time.Time

	limit int // Options.QueueFrames
	opts  *Options
	queue *linkq.Queue[*linkv1.CoreFrame]
	done  chan struct{} // closed by fail
	// edgeQueued is the bytes in the send queues of the edge's connections
	// on this link, as the edge last reported (LinkRequest.queued_bytes).
	edgeQueued atomic.Uint64

	mu  sync.Mutex // guards the following fields
	err error      // why the link failed; non-nil once failed
}

func newLink(stream linkv1connect.LinkServiceLinkServerStream, o Options) *Link {
	return &Link{
		stream:  stream,
		started: time.Now(),
		limit:   o.QueueFrames,
		opts:    &o,
		queue:   linkq.New[*linkv1.CoreFrame](),
		done:    make(chan struct{}),
	}
}

// Unserved returns a link no stream serves: what producers enqueue stays
// in its queue for Take. For tests of the producers, in place of a stream.
func Unserved(o Options) *Link {
	return newLink(linkv1connect.LinkServiceLinkServerStream{}, o.withDefaults())
}

// Edge and Version are what the edge said of itself when the link opened
// (its own random id when it said nothing); Started is when the link
// began.
func (l *Link) Edge() string       { return l.edge }
func (l *Link) Version() string    { return l.version }
func (l *Link) Started() time.Time { return l.started }

func (l *Link) readLoop(ctx context.Context, conns Conns) error {
	for {
		req, err := l.stream.Receive()
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
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
			conns.HandleFrame(ctx, f)
		}
	}
}

// Enqueue queues f for the edge. It never blocks; if the queue is full the
// link fails and its clients resume elsewhere.
func (l *Link) Enqueue(f *linkv1.CoreFrame) { l.EnqueueSized(f, frame.Size(f)) }

// EnqueueEach queues f, one room's frame, on each of links: built and
// sized once for the room, not once per link.
func EnqueueEach[V any](links map[*Link]V, f *linkv1.CoreFrame) {
	size := frame.Size(f)
	for l := range links {
		l.EnqueueSized(f, size)
	}
}

// EnqueueSized is Enqueue of f whose encoded size (frame.Size) is known.
func (l *Link) EnqueueSized(f *linkv1.CoreFrame, size int) {
	if l.queue.Push(f, size, l.limit) {
		return
	}
	if l.failure() != nil {
		return
	}
	l.opts.Overflows.Inc()
	l.fail(errLinkOverflow)
}

// Send queues a frame for one connection.
func (l *Link) Send(conn uint64, f *corralv1.ServerFrame) {
	l.Enqueue(frame.Conn(conn, f))
}

// Close asks the edge to close a connection with a hint.
func (l *Link) Close(conn uint64, code corralv1.Code, reason string, delayMs uint32) {
	l.Enqueue(frame.Close(conn, code, reason, delayMs))
}

// Backlog reports what waits toward the edge on this link: the frames and
// bytes in the core's queue, and the bytes the edge last reported in its
// connections' send queues.
func (l *Link) Backlog() (frames, bytes int, edgeBytes uint64) {
	frames, bytes = l.queue.Len()
	return frames, bytes, l.edgeQueued.Load()
}

// Take removes and returns what is queued, up to maxFrames frames and
// maxBytes (at least one frame when any); Ready is signalled when frames
// arrive. With Unserved, how a test reads what was enqueued.
func (l *Link) Take(maxFrames, maxBytes int) []*linkv1.CoreFrame {
	return l.queue.Take(maxFrames, maxBytes)
}

// Ready is signalled when frames were queued since the last Take.
func (l *Link) Ready() <-chan struct{} { return l.queue.Ready() }

// fail ends the link with err (the first error wins).
func (l *Link) fail(err error) {
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

func (l *Link) failure() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// sendLoop drains the queue without blocking and sends what it took as one
// stream message, until the link fails.
func (l *Link) sendLoop(ctx context.Context) error {
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
			l.opts.Sends.Inc()
			l.opts.Frames.Add(float64(len(batch)))
			// The frames are never touched after this: the in-process
			// transport may hand them to the edge without copying.
			if err := l.stream.Send(&linkv1.LinkResponse{Frames: batch}); err != nil {
				l.fail(fmt.Errorf("core: link send: %w", err))
				return err
			}
		}
	}
}
