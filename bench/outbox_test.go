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
	"github.com/corral-rt/corral/internal/pgtest"
	"github.com/corral-rt/corral/server"
)

// TestOutboxBurst smoke-runs outbox-burst at tiny scale in both modes on a
// private PostgreSQL: through the outbox nothing is lost or duplicated;
// the dual write, crashed for the first half of the run, loses what it
// committed then.
func TestOutboxBurst(t *testing.T) {
	pg := pgtest.Start(t)
	n, err := server.Start(server.Options{
		Mode: server.Serve, Node: config.Node{Addr: "127.0.0.1:0", InternalAddr: "127.0.0.1:0", OutboxURL: pg.URL},
		Auth: auth.Dev{}, APIInsecure: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	target := bench.Target{WS: "ws://" + n.Addr() + "/ws", API: "http://" + n.InternalAddr()}
	for _, mode := range []string{"outbox", "dual-write"} {
		t.Run(mode, func(t *testing.T) {
			s := &bench.OutboxBurst{
				DB: pg.URL, Mode: mode, Sockets: 10, Rate: 40, Duration: time.Second,
				Pool: 2, Workers: 4, Size: 100, ConnectRate: 200,
				CrashAt: 0, CrashFor: 500 * time.Millisecond, SLO: time.Second,
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := s.Run(ctx, bench.Options{Target: target, Drain: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			o := res.Outbox
			if o == nil || o.Committed != 40 {
				t.Fatalf("outbox stats %+v, want 40 committed", o)
			}
			switch {
			case mode == "outbox" && (o.Lost != 0 || o.Duplicate != 0 || len(res.Delivery.Violations) > 0):
				t.Fatalf("through the outbox: %+v, violations %v", o, res.Delivery.Violations)
			case mode == "dual-write" && (o.Lost == 0 || o.Lost == 40):
				t.Fatalf("the dual write crashed for half the run and lost %d of 40", o.Lost)
			}
			if res.Delivery.Received == 0 {
				t.Fatalf("nothing delivered: %+v", res.Delivery)
			}
		})
	}
}
