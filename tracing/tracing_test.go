package tracing_test

import (
	"context"
	"github.com/corral-rt/corral/internal/readytest"
	"io"
	"log/slog"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	"github.com/corral-rt/corral/apiclient"
	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/server"
	"github.com/corral-rt/corral/tracing"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

const apiKey = "tracing-test-key-0123456789"

// TestPublishSpanTree runs corral split in this process (a core, and an
// edge connected to it over the Link on 127.0.0.1) with tracing into an
// in-memory recorder, and checks the spans of a publish:
//
//	API:  caller's span → RoomService/Publish (client) → RoomService/Publish
//	      (server, on the core) → corral.publish {room, seq} →
//	      corral.store.append, corral.fanout {room, seq}
//	Link: a WebSocket client's publish is one trace of its own, carried
//	      in the EdgeFrame: corral.edge.publish {room} (edge, a root) →
//	      corral.publish {room, seq} (core) → the same two children.
func TestPublishSpanTree(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	tracing.Enable(tp)
	t.Cleanup(func() { tracing.Enable(nil) })

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	core, err := server.Start(server.Options{Mode: server.CoreOnly, Addr: "127.0.0.1:0", Logger: quiet, APIKeys: []string{apiKey}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { core.Close(context.Background()) })
	coreURL := "http://" + core.Addr()
	edge, err := server.Start(server.Options{Mode: server.EdgeOnly, Addr: "127.0.0.1:0", CoreURL: coreURL,
		CoreAPIKey: apiKey, Auth: auth.Dev{}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { edge.Close(context.Background()) })
	readytest.Wait(t, "http://"+edge.Addr()+"/readyz")

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, "ws://"+edge.Addr()+"/ws", client.Options{Token: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Join(ctx, "lobby", 0, ""); err != nil {
		t.Fatal(err)
	}
	p, err := c.Publish(ctx, "lobby", "m1", []byte(`"over the link"`))
	if err != nil {
		t.Fatal(err)
	}

	api := apiclient.New(coreURL, apiKey, &apiclient.Options{Interceptors: []connect.ClientInterceptor{tracing.ClientInterceptor()}})
	pctx, parent := tp.Tracer("test").Start(ctx, "caller")
	res, err := api.Publish(pctx, &corralv1.PublishRequest{Room: "lobby", Payload: []byte(`"over the API"`)})
	parent.End()
	if err != nil {
		t.Fatal(err)
	}

	// The Link publish: a trace of its own, begun at the edge.
	linkPub := waitSpan(t, rec, func(s sdktrace.ReadOnlySpan) bool {
		return s.Name() == tracing.SpanPublish && hasAttr(s, tracing.AttrSeq, int64(p.GetSeq()))
	})
	if !hasAttr(linkPub, tracing.AttrRoom, "lobby") {
		t.Errorf("publish span attributes %v: no room", linkPub.Attributes())
	}
	if !linkPub.Parent().IsValid() || !linkPub.Parent().IsRemote() {
		t.Fatalf("a Link publish has parent %v, want the edge's span, remote", linkPub.Parent())
	}
	edgePub := byID(t, rec, linkPub.Parent())
	if edgePub.Name() != tracing.SpanEdgePublish || !hasAttr(edgePub, tracing.AttrRoom, "lobby") {
		t.Fatalf("Link publish's parent is %q %v, want %s {room: lobby}", edgePub.Name(), edgePub.Attributes(), tracing.SpanEdgePublish)
	}
	if edgePub.Parent().IsValid() {
		t.Errorf("the edge's publish span has parent %v: its trace would last as long as something else", edgePub.Parent())
	}
	if edgePub.SpanContext().TraceID() != linkPub.SpanContext().TraceID() {
		t.Errorf("edge and core publish spans in traces %v and %v, want one", edgePub.SpanContext().TraceID(), linkPub.SpanContext().TraceID())
	}
	if l := linkPub.Links(); len(l) != 0 {
		t.Errorf("Link publish with a parent also has links %v", l)
	}
	children(t, rec, linkPub, p.GetSeq())

	// The API publish: one tree from the caller down.
	apiPub := waitSpan(t, rec, func(s sdktrace.ReadOnlySpan) bool {
		return s.Name() == tracing.SpanPublish && hasAttr(s, tracing.AttrSeq, int64(res.GetSeq()))
	})
	server := byID(t, rec, apiPub.Parent())
	if server.Name() != "corral.v1.RoomService/Publish" || server.SpanKind() != trace.SpanKindServer {
		t.Fatalf("API publish's parent is %q (%v)", server.Name(), server.SpanKind())
	}
	cl := byID(t, rec, server.Parent())
	if cl.Name() != "corral.v1.RoomService/Publish" || cl.SpanKind() != trace.SpanKindClient {
		t.Fatalf("server span's parent is %q (%v), want the client span", cl.Name(), cl.SpanKind())
	}
	if cl.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("client span's parent %v, want the caller's %v", cl.Parent(), parent.SpanContext())
	}
	children(t, rec, apiPub, res.GetSeq())
}

// children checks that publish has exactly a store append and a fan-out.
func children(t *testing.T, rec *tracetest.SpanRecorder, publish sdktrace.ReadOnlySpan, seq uint64) {
	t.Helper()
	got := map[string]sdktrace.ReadOnlySpan{}
	eventually.Within(5*time.Second, func() bool {
		for _, s := range rec.Ended() {
			if s.Parent().SpanID() == publish.SpanContext().SpanID() {
				got[s.Name()] = s
			}
		}
		return len(got) >= 2
	})
	if len(got) != 2 || got[tracing.SpanAppend] == nil || got[tracing.SpanFanout] == nil {
		t.Fatalf("children of %s: %v, want %s and %s", publish.Name(), keys(got), tracing.SpanAppend, tracing.SpanFanout)
	}
	if !hasAttr(got[tracing.SpanFanout], tracing.AttrSeq, int64(seq)) || !hasAttr(got[tracing.SpanFanout], tracing.AttrRoom, "lobby") {
		t.Errorf("fan-out attributes %v", got[tracing.SpanFanout].Attributes())
	}
}

func waitSpan(t *testing.T, rec *tracetest.SpanRecorder, match func(sdktrace.ReadOnlySpan) bool) sdktrace.ReadOnlySpan {
	t.Helper()
	return waitSpanOr(t, rec, match, func() { t.Fatalf("no such span among %d ended", len(rec.Ended())) })
}

// waitSpanOr returns the first ended span that matches, calling fail when
// none does within 5 s.
func waitSpanOr(t *testing.T, rec *tracetest.SpanRecorder, match func(sdktrace.ReadOnlySpan) bool, fail func()) sdktrace.ReadOnlySpan {
	t.Helper()
	var found sdktrace.ReadOnlySpan
	if !eventually.Within(5*time.Second, func() bool {
		for _, s := range rec.Ended() {
			if match(s) {
				found = s
				return true
			}
		}
		return false
	}) {
		fail()
	}
	return found
}

func byID(t *testing.T, rec *tracetest.SpanRecorder, sc trace.SpanContext) sdktrace.ReadOnlySpan {
	t.Helper()
	return waitSpanOr(t, rec, func(s sdktrace.ReadOnlySpan) bool { return s.SpanContext().SpanID() == sc.SpanID() },
		func() { t.Fatalf("no ended span %v", sc.SpanID()) })
}

func hasAttr(s sdktrace.ReadOnlySpan, k attribute.Key, v any) bool {
	for _, a := range s.Attributes() {
		if a.Key == k && a.Value.AsInterface() == v {
			return true
		}
	}
	return false
}

func keys(m map[string]sdktrace.ReadOnlySpan) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
