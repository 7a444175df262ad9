package linkserver_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connectinprocess"
	"github.com/corral-rt/corral/core/frame"
	"github.com/corral-rt/corral/core/linkserver"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	"github.com/corral-rt/corral/gen/corral/link/v1/linkv1connect"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// recorder is a Handler that keeps, per link, the frames it was handed
// in order, and when the link's connections were closed.
type recorder struct {
	mu     sync.Mutex
	links  chan *linkserver.Link
	frames []uint64 // the conn of each frame, in order
	closed chan struct{}
}

func newRecorder() *recorder {
	return &recorder{links: make(chan *linkserver.Link, 4), closed: make(chan struct{}, 4)}
}

func (r *recorder) Open(_ context.Context, l *linkserver.Link) linkserver.Conns {
	r.links <- l
	return r
}

func (r *recorder) HandleFrame(_ context.Context, f *linkv1.EdgeFrame) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frames = append(r.frames, f.GetConn())
}

func (r *recorder) Closed() { r.closed <- struct{}{} }

// serve starts s in-process and opens one Link stream to it with an
// edge's id and version.
func serve(t *testing.T, s *linkserver.Server, edge string) linkv1connect.LinkServiceLinkClientStream {
	t.Helper()
	srv := connect.NewServer()
	linkv1connect.RegisterLinkServiceHandler(srv, s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	ctx, info := connect.NewClientContext(ctx)
	info.RequestHeader().Set("Corral-Edge-Id", edge)
	info.RequestHeader().Set("Corral-Version", "v1.2.3")
	stream, err := linkv1connect.NewLinkServiceClient(connect.NewClient(connectinprocess.New(srv))).Link(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stream.CloseSend(); stream.Close() })
	return stream
}

func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetCounter().GetValue() + d.GetGauge().GetValue()
}

// TestLinkBothWays: the edge's frames reach the handler in the order sent,
// the core's frames reach the edge in the order enqueued, the link knows
// the edge's id and version, and when the edge ends the stream the
// handler's Closed runs once.
func TestLinkBothWays(t *testing.T) {
	h := newRecorder()
	sends := prometheus.NewCounter(prometheus.CounterOpts{Name: "sends"})
	s := linkserver.New(h, linkserver.Options{Sends: sends})
	defer s.Close()
	stream := serve(t, s, "edge-1")
	for _, conns := range [][]uint64{{1, 2}, {3}, {4, 5, 6}} {
		req := &linkv1.LinkRequest{}
		for _, c := range conns {
			req.Frames = append(req.Frames, &linkv1.EdgeFrame{Conn: c})
		}
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	l := <-h.links
	if l.Edge() != "edge-1" || l.Version() != "v1.2.3" {
		t.Fatalf("edge %q version %q", l.Edge(), l.Version())
	}
	const n = 100
	for i := range n {
		l.Send(uint64(i), &corralv1.ServerFrame{})
	}
	for got := 0; got < n; {
		res, err := stream.Receive()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range res.GetFrames() {
			if c := f.GetConn().GetConn(); c != uint64(got) {
				t.Fatalf("frame %d is of conn %d", got, c)
			}
			got++
		}
	}
	if value(t, sends) == 0 {
		t.Fatal("no send counted")
	}
	stream.CloseSend()
	<-h.closed
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, c := range h.frames {
		if c != uint64(i+1) {
			t.Fatalf("handled %v, want 1..6 in order", h.frames)
		}
	}
	if len(h.frames) != 6 {
		t.Fatalf("handled %v, want 1..6 in order", h.frames)
	}
	select {
	case <-h.closed:
		t.Fatal("Closed ran twice")
	default:
	}
}

// TestOverflowFailsOnce: past its bound a link's Enqueue never blocks: the
// link fails, counted once however many frames follow.
func TestOverflowFailsOnce(t *testing.T) {
	overflows := prometheus.NewCounter(prometheus.CounterOpts{Name: "overflows"})
	l := linkserver.Unserved(linkserver.Options{QueueFrames: 2, Overflows: overflows})
	f := frame.Conn(1, &corralv1.ServerFrame{})
	for range 2 {
		l.Enqueue(f)
	}
	if n, bytes, _ := l.Backlog(); n != 2 || bytes != 2*frame.Size(f) || value(t, overflows) != 0 {
		t.Fatalf("backlog %d frames, %d bytes; want 2, %d", n, bytes, 2*frame.Size(f))
	}
	for range 10 {
		l.Enqueue(f)
	}
	if v := value(t, overflows); v != 1 {
		t.Fatalf("overflows counted %v, want 1", v)
	}
	// A failed link holds nothing: its clients resume elsewhere.
	if n, bytes, _ := l.Backlog(); n != 0 || bytes != 0 {
		t.Fatalf("backlog after the failure %d frames, %d bytes", n, bytes)
	}
}

// TestCloseEndsLinks: Close fails the open links with Options.Closed, which
// the edge gets as Unavailable, and refuses links opened after it.
func TestCloseEndsLinks(t *testing.T) {
	closed := errors.New("test: closed")
	h := newRecorder()
	links := prometheus.NewGauge(prometheus.GaugeOpts{Name: "links"})
	s := linkserver.New(h, linkserver.Options{Closed: closed, Links: links})
	stream := serve(t, s, "edge-1")
	if err := stream.Send(&linkv1.LinkRequest{}); err != nil {
		t.Fatal(err)
	}
	<-h.links
	if len(s.All()) != 1 || value(t, links) != 1 {
		t.Fatalf("open links %d, gauge %v; want 1", len(s.All()), value(t, links))
	}
	if !s.Close() || s.Close() {
		t.Fatal("Close reports first once")
	}
	// The server's reader ends at the edge's next frame, or when the edge
	// ends the stream.
	_ = stream.Send(&linkv1.LinkRequest{})
	stream.CloseSend()
	_, err := stream.Receive()
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("after Close: %v, want unavailable", err)
	}
	<-h.closed
	again := serve(t, s, "edge-2")
	_ = again.Send(&linkv1.LinkRequest{})
	if _, err := again.Receive(); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("a link after Close: %v, want unavailable", err)
	}
}
