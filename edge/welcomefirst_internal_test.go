package edge

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/corral-rt/corral/config"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	"github.com/corral-rt/corral/gen/corral/link/v1/linkv1connect"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/mono"
	"github.com/corral-rt/corral/protocol"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRateRefusalAfterWelcome: a publish past the rate limit, read right
// behind the hello before the core's Welcome came back, is refused after
// the Welcome, never before it (client.proto: the Welcome comes first).
func TestRateRefusalAfterWelcome(t *testing.T) {
	cfg := (&Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Cores: make([]linkv1connect.LinkServiceClient, 1), Edge: config.Edge{MessageRate: 1, MessageBurst: 1}}).withDefaults()
	e := &Edge{cfg: cfg, metrics: newMetrics(nil), rules: bucketRules(&cfg), conns: make(map[*conn]struct{}), users: make(map[string]int)}
	l := newLink(e, 0)
	l.up = true
	c := fuzzConn(e, l, 1, protocol.JSON)
	c.welcome = make(chan struct{})
	c.limits = newLimiter(e.rules)
	c.lastRead.Store(mono.Now())

	publish := func(id string) *corralv1.ClientFrame {
		return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Room: "r", Id: id}}}
	}
	if !c.handleFrame(publish("p1")) { // within the burst: to the core
		t.Fatal("the first publish ended the connection")
	}
	done := make(chan bool)
	go func() { done <- c.handleFrame(publish("p2")) }() // past it
	eventually.True(t, 10*time.Second, func() bool {
		return testutil.ToFloat64(e.metrics.refusedBy[refusedRateMessages]) == 1
	}, "the second publish is refused")
	// The refusal is counted; the Welcome comes now.
	l.dispatch([]*linkv1.CoreFrame{{Kind: &linkv1.CoreFrame_Session{Session: &linkv1.ConnSession{Conn: 1, SessionId: "s", ResumeToken: "t",
		Frame: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Welcome{Welcome: &corralv1.Welcome{SessionId: "s", ResumeToken: "t"}}}}}}})
	if !<-done {
		t.Fatal("the refused publish ended the connection")
	}
	c.mu.Lock()
	queued := append([][]byte(nil), c.queue...)
	c.mu.Unlock()
	var kinds []string
	for _, b := range queued {
		var f corralv1.ServerFrame
		if err := protocol.DecodeServer(protocol.JSON, b, &f); err != nil {
			t.Fatal(err)
		}
		switch {
		case f.GetWelcome() != nil:
			kinds = append(kinds, "welcome")
		case f.GetError().GetCode() == corralv1.Code_CODE_RATE_LIMITED && f.GetError().GetRef() == "p2":
			kinds = append(kinds, "rate_limited")
		default:
			t.Fatalf("unexpected frame %v", &f)
		}
	}
	if len(kinds) != 2 || kinds[0] != "welcome" || kinds[1] != "rate_limited" {
		t.Fatalf("the client got %q, want the Welcome, then the refusal", kinds)
	}
}
