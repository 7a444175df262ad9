package bench_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/corral-rt/corral/bench"
)

// TestVersusCorral runs every versus workload, small, against an
// in-process corral through the corral dialect.
func TestVersusCorral(t *testing.T) {
	tests := map[string]struct {
		workload  string
		delivered bool
		stormMode string
	}{
		"busy-room":     {"busy-room", true, ""},
		"broadcast":     {"broadcast", true, ""},
		"storm":         {"storm", true, ""},
		"storm/bounded": {"storm", true, "bounded"},
		"idle":          {"idle", false, ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			target := startCorral(t)
			target.PID = os.Getpid()
			v := bench.NewVersus()
			v.Workload = tt.workload
			v.Sockets, v.Rooms, v.Senders, v.Rate = 20, 2, 4, 40
			v.Duration, v.Settle, v.ConnectRate = 3*time.Second, 500*time.Millisecond, 200
			if tt.stormMode != "" {
				v.StormMode = tt.stormMode
			}
			v.After = time.Second // herd: the post-herd window
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := v.Run(ctx, bench.Options{Target: target, Drain: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			s := res.Versus
			if s == nil || s.Server != "corral" || s.Workload != tt.workload || s.Joined != 20 {
				t.Fatalf("versus stats: %+v", s)
			}
			if s.Gaps != 0 || s.NotRecovered != 0 {
				t.Errorf("missing %d, not recovered %d", s.Gaps, s.NotRecovered)
			}
			if s.Duplicated != 0 {
				t.Errorf("duplicated %d", s.Duplicated)
			}
			if tt.workload == "storm" && tt.stormMode == "" && s.Cut != 20 {
				t.Errorf("herd: %d of 20 sockets reset", s.Cut)
			}
			if tt.workload == "storm" && tt.stormMode == "" && (s.PostHerd == nil || s.PostHerd.Latency.Count == 0 || !strings.Contains(res.Headline, "post-herd n=")) {
				t.Errorf("herd: no post-herd figures: %+v, headline %q", s.PostHerd, res.Headline)
			}
			if tt.workload == "storm" && s.Recovered != 20 {
				t.Errorf("%s storm: %d of 20 recovered: %+v", s.StormMode, s.Recovered, s)
			}
			if tt.delivered && s.Deliveries == 0 {
				t.Errorf("nothing delivered: %+v", s)
			}
			if s.P99Ms <= 0 || res.Headline == "" {
				t.Errorf("p99 %v, headline %q", s.P99Ms, res.Headline)
			}
		})
	}
}

func TestVersusRefusesUnknown(t *testing.T) {
	for _, v := range []*bench.Versus{{Server: "nats", Workload: "idle", ConnectRate: 1}, {Server: "corral", Workload: "chaos", ConnectRate: 1}} {
		if _, err := v.Run(context.Background(), bench.Options{Target: bench.Target{WS: "ws://127.0.0.1:1/ws"}}); err == nil {
			t.Errorf("%s/%s ran", v.Server, v.Workload)
		}
	}
}
