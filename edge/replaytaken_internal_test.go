package edge

import (
	"io"
	"log/slog"
	"slices"
	"testing"

	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	"github.com/corral-rt/corral/gen/corral/link/v1/linkv1connect"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
)

// TestReplayTakenReported: a replay page that asks for it
// (ConnReplay.ack) is reported to the core once the connection's writer
// took it from the queue (takeLocked, reportTaken), not when it is
// queued; pages without ack are not reported; a page dropped by a close
// is not reported (the core's paged replay ends with the connection).
func TestReplayTakenReported(t *testing.T) {
	cfg := (&Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Cores: make([]linkv1connect.LinkServiceClient, 1)}).withDefaults()
	e := &Edge{cfg: cfg, metrics: newMetrics(nil), conns: make(map[*conn]struct{}), users: make(map[string]int)}
	l := newLink(e, 0)
	c := fuzzConn(e, l, 1, protocol.JSON)
	batch := &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Batch{Batch: &corralv1.Batch{}}}
	replay := func(room string, ack bool) *linkv1.CoreFrame {
		return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Replay{Replay: &linkv1.ConnReplay{Conn: 1, Room: room, Seq: 1, Epoch: "e", Frame: batch, Ack: ack}}}
	}
	taken := func() []string {
		var out []string
		for _, f := range l.queue.Take(100, 1<<20) {
			if r := f.GetReplayTaken(); r != nil && f.GetConn() == 1 {
				out = append(out, r.GetRoom())
			}
		}
		return out
	}
	l.dispatch([]*linkv1.CoreFrame{replay("a", false), replay("a", true), replay("b", true)})
	c.reportTaken()
	if got := taken(); len(got) != 0 {
		t.Fatalf("reported %q before the writer took anything", got)
	}
	c.mu.Lock()
	q := c.takeLocked()
	c.mu.Unlock()
	if len(q) != 3 {
		t.Fatalf("took %d frames, want 3", len(q))
	}
	c.reportTaken()
	if got, want := taken(), []string{"a", "b"}; !slices.Equal(got, want) {
		t.Fatalf("reported %q, want %q", got, want)
	}
	c.reportTaken()
	if got := taken(); len(got) != 0 {
		t.Fatalf("reported %q twice", got)
	}
	l.dispatch([]*linkv1.CoreFrame{replay("c", true)})
	c.closeWith(corralv1.Code_CODE_SLOW_CONSUMER, "test", 0, false)
	c.mu.Lock()
	c.takeLocked()
	c.mu.Unlock()
	c.reportTaken()
	if got := taken(); len(got) != 0 {
		t.Fatalf("reported %q of a page the close dropped", got)
	}
}
