package edge

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	"github.com/corral-rt/corral/gen/corral/link/v1/linkv1connect"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestLinkLostAnswersQueued: frames a client sent that were still queued for
// the core when the link's stream ended are answered 4103 UNAVAILABLE with
// their id (the SDK resends at once), not left to the SDK's resend timeout;
// frames that expect no answer are not answered. A growing message's
// append is answered as a publish (ref: its id).
func TestLinkLostAnswersQueued(t *testing.T) {
	cfg := (&Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Cores: make([]linkv1connect.LinkServiceClient, 1)}).withDefaults()
	e := &Edge{cfg: cfg, metrics: newMetrics(nil), conns: make(map[*conn]struct{}), users: make(map[string]int)}
	l := newLink(e, 0)
	l.up = true
	c := fuzzConn(e, l, 1, protocol.JSON)
	l.dispatch([]*linkv1.CoreFrame{{Kind: &linkv1.CoreFrame_Session{Session: &linkv1.ConnSession{Conn: 1, SessionId: "s", ResumeToken: "t", Frame: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Welcome{Welcome: &corralv1.Welcome{SessionId: "s", ResumeToken: "t"}}}}}}})
	c.mu.Lock()
	c.queue = c.queue[:0]
	c.mu.Unlock()

	sent := []*corralv1.ClientFrame{
		{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Room: "r", Id: "p1"}}},
		{Kind: &corralv1.ClientFrame_Ack{Ack: &corralv1.Ack{Room: "r", Seq: 1}}},
		{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Room: "r", Id: "p2"}}},
		{Kind: &corralv1.ClientFrame_Call{Call: &corralv1.Call{Id: 7}}},
		{Kind: &corralv1.ClientFrame_Append{Append: &corralv1.Append{Room: "r", Id: "a1", Data: []byte("tok")}}},
	}
	for _, f := range sent {
		if !l.forward(c, f) {
			t.Fatalf("forward %v: refused with the link up", f)
		}
	}
	l.down() // the stream ended with all of them still queued

	c.mu.Lock()
	queued := c.queue
	c.mu.Unlock()
	var got []string
	for _, b := range queued {
		var f corralv1.ServerFrame
		if err := protocol.DecodeServer(protocol.JSON, b, &f); err != nil {
			t.Fatal(err)
		}
		switch {
		case f.GetError() != nil:
			if f.GetError().GetCode() != corralv1.Code_CODE_UNAVAILABLE {
				t.Fatalf("publish %s answered %v, want CODE_UNAVAILABLE", f.GetError().GetRef(), f.GetError().GetCode())
			}
			got = append(got, "error:"+f.GetError().GetRef())
		case f.GetCallResult() != nil:
			if f.GetCallResult().GetError().GetCode() != corralv1.Code_CODE_UNAVAILABLE {
				t.Fatalf("call answered %v, want CODE_UNAVAILABLE", f.GetCallResult().GetError())
			}
			got = append(got, fmt.Sprint("call:", f.GetCallResult().GetId()))
		default:
			t.Fatalf("unexpected frame %v", &f)
		}
	}
	want := []string{"error:p1", "error:p2", "call:7", "error:a1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the link dropped the client got %q, want %q", got, want)
	}
	if n := testutil.ToFloat64(e.metrics.refusedBy[refusedLinkLost]); n != 4 {
		t.Fatalf("refused{link_lost} = %v, want 4", n)
	}
}
