package edge

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/corral-rt/corral/gen/corral/link/v1/linkv1connect"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
)

// TestMergedSignalsBounded: a room's signal batches queued for a
// connection that does not read are merged, but never into a frame past
// maxMergedSignalBytes (20 ticks of a 60 KB signal under new keys made one
// 1.2 MB frame); no key is lost, and a key set again keeps its latest
// value.
func TestMergedSignalsBounded(t *testing.T) {
	cfg := (&Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Cores: make([]linkv1connect.LinkServiceClient, 1)}).withDefaults()
	e := &Edge{cfg: cfg, metrics: newMetrics(nil), conns: make(map[*conn]struct{}), users: make(map[string]int)}
	l := newLink(e, 0)
	c := fuzzConn(e, l, 1, protocol.JSON)
	value := func(v string) []byte { return []byte(`"` + v + strings.Repeat("v", 60<<10) + `"`) }
	for i := range 20 {
		batch := &corralv1.Batch{Frames: []*corralv1.ServerFrame{
			{Kind: &corralv1.ServerFrame_Signal{Signal: &corralv1.SignalEvent{Room: "r", Key: fmt.Sprintf("k%d", i), Payload: value("a")}}},
			{Kind: &corralv1.ServerFrame_Signal{Signal: &corralv1.SignalEvent{Room: "r", Key: "cursor", Payload: []byte(fmt.Sprint(i))}}},
		}}
		enc, err := encode(c.enc, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Batch{Batch: batch}})
		if err != nil {
			t.Fatal(err)
		}
		c.enqueueSignals("r", batch, enc, nil)
	}
	c.mu.Lock()
	queued := c.queue
	closing := c.closing
	c.mu.Unlock()
	if closing {
		t.Fatal("the connection was closed for 20 signals of 60 KB")
	}
	keys := map[string]string{}
	for _, b := range queued {
		if len(b) > maxMergedSignalBytes {
			t.Fatalf("a queued signal batch of %d bytes, want at most %d", len(b), maxMergedSignalBytes)
		}
		var f corralv1.ServerFrame
		if err := protocol.DecodeServer(protocol.JSON, b, &f); err != nil {
			t.Fatal(err)
		}
		for _, s := range f.GetBatch().GetFrames() {
			keys[s.GetSignal().GetKey()] = string(s.GetSignal().GetPayload())
		}
	}
	if len(keys) != 21 || keys["cursor"] != "19" {
		t.Fatalf("the queue holds %d keys, cursor %q; want 21 and the latest, 19", len(keys), keys["cursor"])
	}
	if len(queued) < 2 || len(queued) > 10 {
		t.Fatalf("%d batches queued for 20 ticks: want them merged up to the bound", len(queued))
	}
}
