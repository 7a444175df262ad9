package bench_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/bench"
	"github.com/corral-rt/corral/config"
	"github.com/corral-rt/corral/roomclass"
	"github.com/corral-rt/corral/server"
)

// TestDocEdit smoke-runs docedit against a server with keyed-state deltas
// and one without: every member rebuilds every version (the scenario's
// own check), and with deltas the state frames are fewer bytes per
// change.
func TestDocEdit(t *testing.T) {
	perChange := map[bool]float64{}
	for _, withDelta := range []bool{false, true} {
		def := roomclass.Default()
		def.State.Delta = withDelta
		opts := server.Options{
			Mode: server.Serve, Node: config.Node{Addr: "127.0.0.1:0", InternalAddr: "127.0.0.1:0"},
			Auth: auth.Dev{}, APIInsecure: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		}
		opts.Core.Classes = roomclass.NewLive(roomclass.NewTable(def, nil))
		n, err := server.Start(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			n.Close(ctx)
		})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		sc := &bench.DocEdit{Members: 6, Writers: 2, Rate: 20, Duration: time.Second, Size: 2048, Timeout: 5 * time.Second}
		res, err := sc.Run(ctx, bench.Options{Target: bench.Target{WS: "ws://" + n.Addr() + "/ws", API: "http://" + n.InternalAddr()}, Drain: 5 * time.Second})
		if err != nil {
			t.Fatalf("delta %v: %v", withDelta, err)
		}
		st := res.DocEdit
		if st == nil || st.Edits == 0 || st.Changes == 0 || st.WireBytes == 0 || res.Headline == "" {
			t.Fatalf("delta %v: figures missing: %+v", withDelta, st)
		}
		if (st.Deltas > 0) != withDelta {
			t.Errorf("delta %v: %d changes as deltas", withDelta, st.Deltas)
		}
		perChange[withDelta] = st.BytesPerChange
	}
	if perChange[true] >= perChange[false] {
		t.Errorf("bytes per change with deltas %.0f, without %.0f: want fewer with", perChange[true], perChange[false])
	}
}
