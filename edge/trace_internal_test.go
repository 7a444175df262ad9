package edge

import (
	"io"
	"log/slog"
	"testing"

	"github.com/corral-rt/corral/gen/corral/link/v1/linkv1connect"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/tracing"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestForwardTraceparent: a client's publish carries its edge span's
// traceparent to the core only with tracing on; off, the frame has none
// and a publish costs the forward path no more than any other frame.
func TestForwardTraceparent(t *testing.T) {
	cfg := (&Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Cores: make([]linkv1connect.LinkServiceClient, 1)}).withDefaults()
	e := &Edge{cfg: cfg, metrics: newMetrics(nil), conns: make(map[*conn]struct{}), users: make(map[string]int)}
	l := newLink(e, 0)
	c := fuzzConn(e, l, 1, protocol.JSON)
	publish := &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Room: "lobby", Payload: []byte(`1`)}}}
	join := &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: "lobby"}}}
	sent := func(f *corralv1.ClientFrame) string {
		t.Helper()
		if !l.forward(c, f) {
			t.Fatal("forward: the link did not take the frame")
		}
		q := l.queue.Take(10, 1<<20)
		if len(q) != 1 || q[0].GetFrame() != f {
			t.Fatalf("queued %v, want the one frame", q)
		}
		return q[0].GetTraceparent()
	}

	tracing.Enable(nil)
	if tp := sent(publish); tp != "" {
		t.Errorf("tracing off: publish frame has traceparent %q", tp)
	}
	cost := func(f *corralv1.ClientFrame) float64 {
		return testing.AllocsPerRun(200, func() {
			l.forward(c, f)
			l.queue.Take(10, 1<<20)
		})
	}
	if pub, other := cost(publish), cost(join); pub != other {
		t.Errorf("tracing off: forwarding a publish allocates %v times, any other frame %v", pub, other)
	}

	rec := tracetest.NewSpanRecorder()
	tracing.Enable(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.AlwaysSample())))
	t.Cleanup(func() { tracing.Enable(nil) })
	tp := sent(publish)
	if tp2 := sent(join); tp2 != "" {
		t.Errorf("a join carries traceparent %q; only publishes have an edge span", tp2)
	}
	ended := rec.Ended()
	if len(ended) != 1 || ended[0].Name() != tracing.SpanEdgePublish {
		t.Fatalf("ended spans %v, want one %s", ended, tracing.SpanEdgePublish)
	}
	sc := ended[0].SpanContext()
	if want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"; tp != want {
		t.Errorf("traceparent %q, want the edge span's %q", tp, want)
	}
}
