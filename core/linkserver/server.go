package linkserver

import (
	"context"
	"errors"

	"connectrpc.com/connect/v2"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	"github.com/corral-rt/corral/gen/corral/link/v1/linkv1connect"
	"github.com/prometheus/client_golang/prometheus"
)

// The server: the open links and the Link call that serves each, and what
// it needs of the core (Handler, Options).

// Handler is the core as the link server sees it.
type Handler interface {
	// Open is called on a new link's reader goroutine before its first
	// frame; the Conns it returns gets every frame the edge sends on l.
	Open(ctx context.Context, l *Link) Conns
}

// Conns is the core's side of one link: the edge's client connections on
// it. Its methods run on the link's reader goroutine, one at a time, and
// must not block (the core queues each connection's work elsewhere).
type Conns interface {
	// HandleFrame takes one frame from the edge, in the order sent. ctx
	// ends with the link.
	HandleFrame(ctx context.Context, f *linkv1.EdgeFrame)
	// Closed is called once after the link failed or ended: every
	// connection on it is gone. Nothing is called after it.
	Closed()
}

// Options are the link server's settings, from core.New. A nil metric is
// not counted.
type Options struct {
	// QueueFrames bounds the frames waiting on one link
	// (core.Config.LinkQueue); past it the link fails. 0: unbounded.
	QueueFrames int
	// Closed is the error a link fails with when the server closes, and
	// the cause of the Unavailable error a link opened after gets.
	Closed error

	// Links follows the open links; Sends counts stream messages sent,
	// Frames the frames in them, Overflows the links failed because their
	// queue overflowed.
	Links                    prometheus.Gauge
	Sends, Frames, Overflows prometheus.Counter
}

func (o Options) withDefaults() Options {
	if o.Closed == nil {
		o.Closed = errors.New("linkserver: closed")
	}
	if o.Links == nil {
		o.Links = prometheus.NewGauge(prometheus.GaugeOpts{Name: "unused"})
	}
	for _, c := range []*prometheus.Counter{&o.Sends, &o.Frames, &o.Overflows} {
		if *c == nil {
			*c = prometheus.NewCounter(prometheus.CounterOpts{Name: "unused"})
		}
	}
	return o
}

// Server serves the edges' Link streams (linkv1connect.LinkServiceHandler).
// All methods are safe for concurrent use.
type Server struct {
	opts  Options
	h     Handler
	links *set
}

var _ linkv1connect.LinkServiceHandler = (*Server)(nil)

// New returns a Server that hands the edges' frames to h.
func New(h Handler, o Options) *Server {
	o = o.withDefaults()
	return &Server{opts: o, h: h, links: newSet(o.Links)}
}

var (
	errLinkEOF      = errors.New("core: link closed by edge")
	errLinkOverflow = errors.New("core: link queue overflow (edge not reading)")
)

// Link serves one edge stream until the edge closes it or it fails.
func (s *Server) Link(ctx context.Context, stream linkv1connect.LinkServiceLinkServerStream) error {
	l := newLink(stream, s.opts)
	l.edge, l.version = edgeOf(ctx)
	if !s.links.add(l) {
		return connectErr(connect.CodeUnavailable, s.opts.Closed)
	}
	defer s.links.remove(l)

	conns := s.h.Open(ctx, l)
	// The sender runs on its own; the reader is this goroutine.
	sendErr := make(chan error, 1)
	go func() { sendErr <- l.sendLoop(ctx) }()

	err := l.readLoop(ctx, conns)
	l.fail(err)
	// Every connection of this link is gone: detach their sessions, and
	// drop what they had queued.
	conns.Closed()
	if serr := <-sendErr; err == nil || errors.Is(err, errLinkEOF) {
		err = serr
	}
	if err == nil || errors.Is(err, errLinkEOF) {
		return nil
	}
	if errors.Is(err, s.opts.Closed) {
		return connectErr(connect.CodeUnavailable, err)
	}
	if errors.Is(err, errLinkOverflow) {
		return connectErr(connect.CodeResourceExhausted, err)
	}
	return err
}

// connectErr wraps err, one of this package's fixed texts, in a Connect
// error with code, keeping err as the cause for errors.Is.
func connectErr(code connect.Code, err error) *connect.Error {
	return connect.NewError(code, err.Error()).WithCause(err)
}

// Close closes the server: the open links fail with Options.Closed (their
// clients are told to resume) and no link opens after. It reports false
// when the server was closed already. It does not wait for the links'
// Link calls to return.
func (s *Server) Close() bool {
	links, first := s.links.close()
	for _, l := range links {
		l.fail(s.opts.Closed)
	}
	return first
}

// All returns the open links, in no order.
func (s *Server) All() []*Link { return s.links.all() }

// Each calls fn for each open link under the set's lock: fn may call the
// link's Backlog but must not block nor use the Server.
func (s *Server) Each(fn func(*Link)) { s.links.each(fn) }
