package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/bench"
	"github.com/corral-rt/corral/client"
	"github.com/corral-rt/corral/config"
	"github.com/corral-rt/corral/hooks"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/server"
)

// startCorral runs corral in this process, stopped when the test ends.
// With apiKeys its internal API requires one of them.
func startCorral(t *testing.T, apiKeys ...string) bench.Target {
	t.Helper()
	return startCorralHooks(t, hooks.Config{}, apiKeys...)
}

// startCorralHooks is startCorral with the hooks configured.
func startCorralHooks(t *testing.T, hc hooks.Config, apiKeys ...string) bench.Target {
	t.Helper()
	n, err := server.Start(server.Options{
		Mode: server.Serve, Node: config.Node{Addr: "127.0.0.1:0", InternalAddr: "127.0.0.1:0"},
		Auth: auth.Dev{}, APIKeys: apiKeys, APIInsecure: len(apiKeys) == 0,
		Hooks:  hc,
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
	return bench.Target{WS: "ws://" + n.Addr() + "/ws", API: "http://" + n.InternalAddr()}
}

// TestScenarios smoke-runs every scenario at tiny scale. It asserts that
// the run completes and the delivery check passes, never a figure.
func TestScenarios(t *testing.T) {
	tests := map[string]struct {
		scenario bench.Scenario
		tune     func(*bench.Options)
		hooks    hooks.Policy // with --hooks-listen on hooksAddr
	}{
		"broadcast": {scenario: &bench.Broadcast{
			Sockets: 20, Rooms: 2, Rate: 40, Duration: 2 * time.Second, Size: 100,
			Publishers: 4, ConnectRate: 200, Timeout: 5 * time.Second, SLO: time.Second,
		}},
		"broadcast/ramp/proto/sources": {scenario: &bench.Broadcast{
			Sockets: 20, Rooms: 2, Ramp: []float64{20, 40}, Step: time.Second, Size: 300,
			Publishers: 4, ConnectRate: 200, Timeout: 5 * time.Second, SLO: time.Second,
		}, tune: func(o *bench.Options) { o.Encoding = 1; o.Sources = 2 }},
		"broadcast/sse": {scenario: &bench.Broadcast{
			Sockets: 20, Rooms: 2, Rate: 40, Duration: 2 * time.Second, Size: 100,
			Publishers: 4, ConnectRate: 200, Timeout: 5 * time.Second, SLO: time.Second,
		}, tune: func(o *bench.Options) { o.Transport = client.SSE }},
		"broadcast/stream/proto": {scenario: &bench.Broadcast{
			Sockets: 20, Rooms: 2, Rate: 40, Duration: 2 * time.Second, Size: 100,
			Publishers: 4, ConnectRate: 200, Timeout: 5 * time.Second, SLO: time.Second,
		}, tune: func(o *bench.Options) { o.Transport = client.HTTPStream; o.Encoding = 1 }},
		"storm/sse": {scenario: &bench.Storm{
			Clients: 50, Rooms: 5, Rate: 10, Steady: time.Second, After: time.Second,
			RecoverTimeout: 30 * time.Second, ConnectRate: 200, Publishers: 4, Size: 100, Timeout: 5 * time.Second,
		}, tune: func(o *bench.Options) { o.Transport = client.SSE }},
		"connect": {scenario: &bench.Connect{
			Sockets: 20, Rooms: 2, Rate: 100, Inflight: 8, Hold: 500 * time.Millisecond, Probes: 2, SLO: time.Second,
		}},
		"connect/no-api": {scenario: &bench.Connect{
			Sockets: 20, Rooms: 2, Rate: 100, Inflight: 8, Hold: 500 * time.Millisecond, Probes: 2, SLO: time.Second,
		}, tune: func(o *bench.Options) { o.Target.API = "" }},
		"connect/presence": {scenario: &bench.Connect{
			Sockets: 20, Rooms: 2, Rate: 100, Inflight: 8, Hold: 500 * time.Millisecond, Probes: 2, SLO: time.Second, Presence: true,
		}},
		"storm/presence": {scenario: &bench.Storm{
			Clients: 50, Rooms: 5, Rate: 10, Steady: time.Second, After: time.Second, Presence: true,
			RecoverTimeout: 30 * time.Second, ConnectRate: 200, Publishers: 4, Size: 100, Timeout: 5 * time.Second,
		}},
		"cursors": {scenario: &bench.Cursors{
			Members: 10, Senders: 3, Hz: 20, Rooms: 1, Duration: 2 * time.Second, Rate: 5,
			Fresh: 200 * time.Millisecond, ConnectRate: 200, AckTimeout: 5 * time.Second, SLO: time.Second,
		}},
		"storm": {scenario: &bench.Storm{
			Clients: 50, Rooms: 5, Rate: 10, Steady: time.Second, After: time.Second,
			RecoverTimeout: 30 * time.Second, ConnectRate: 200, Publishers: 4, Size: 100, Timeout: 5 * time.Second,
		}},
		"storm/rejoin": {scenario: &bench.Storm{
			Clients: 50, Rooms: 5, Rate: 10, Steady: time.Second, After: time.Second, Rejoin: true,
			RecoverTimeout: 30 * time.Second, ConnectRate: 200, Publishers: 4, Size: 100, Timeout: 5 * time.Second,
		}},
		"storm/proxy": {scenario: &bench.Storm{
			Clients: 50, Rooms: 5, Rate: 10, Steady: time.Second, After: time.Second, Cause: "rst-proxy",
			RecoverTimeout: 30 * time.Second, ConnectRate: 200, Publishers: 4, Size: 100, Timeout: 5 * time.Second,
		}},
		"storm/hooks": {scenario: &bench.Storm{
			Clients: 50, Rooms: 5, Rate: 10, Steady: time.Second, After: time.Second,
			RecoverTimeout: 30 * time.Second, ConnectRate: 200, Publishers: 4, Size: 100, Timeout: 5 * time.Second,
			Hooks: bench.HooksOptions{Listen: "127.0.0.1:28411"},
		}, hooks: hooks.Policy{Join: []string{"*"}}},
		"chat-burst/hooks": {scenario: &bench.ChatBurst{
			Sockets: 20, Rooms: 2, Senders: 10, Rate: 40, RampUp: time.Second, Duration: time.Second,
			Size: 100, AckTimeout: 5 * time.Second, ConnectRate: 200, SLO: time.Second,
			Hooks: bench.HooksOptions{Listen: "127.0.0.1:28412", Latency: time.Millisecond},
		}, hooks: hooks.Policy{Publish: []string{"*"}}},
		"chat-burst": {scenario: &bench.ChatBurst{
			Sockets: 20, Rooms: 2, Senders: 10, Rate: 40, RampUp: time.Second, Duration: time.Second,
			Size: 100, AckTimeout: 5 * time.Second, ConnectRate: 200, SLO: time.Second,
		}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var target bench.Target
			if len(tt.hooks.Join)+len(tt.hooks.Publish) > 0 {
				addr := ""
				switch sc := tt.scenario.(type) {
				case *bench.Storm:
					addr = sc.Hooks.Listen
				case *bench.ChatBurst:
					addr = sc.Hooks.Listen
				}
				target = startCorralHooks(t, hooks.Config{Hooks: config.Hooks{URL: "http://" + addr}, Policy: tt.hooks})
			} else {
				target = startCorral(t)
			}
			target.PID = os.Getpid()
			var progress bytes.Buffer
			o := bench.Options{Target: target, Drain: 5 * time.Second, Progress: &progress}
			if tt.tune != nil {
				tt.tune(&o)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := tt.scenario.Run(ctx, o)
			if err != nil {
				if res != nil {
					res.WriteText(testWriter{t})
				}
				t.Fatal(err)
			}
			if v := res.Delivery.Violations; len(v) > 0 {
				t.Fatalf("delivery violations: %v", v)
			}
			if res.Delivery.Received == 0 || res.Delivery.Expected == 0 {
				t.Errorf("nothing delivered: %+v", res.Delivery)
			}
			if p := res.Presence; p != nil && (p.Members != res.Connect.Joined || p.MaxFramesPerMember == 0 || p.Bytes == 0) {
				t.Errorf("presence counts: %+v", p)
			}
			if st := res.Storm; st != nil && (st.Cut != st.Clients || st.Resumed != st.Cut || st.Failed != 0 || res.Errors["reset"] > 0) {
				t.Errorf("storm: %d clients, %d cut, %d resumed, %d failed, %d reset", st.Clients, st.Cut, st.Resumed, st.Failed, res.Errors["reset"])
			}
			if h := res.Hooks; (h != nil) != (len(tt.hooks.Join)+len(tt.hooks.Publish) > 0) {
				t.Errorf("hooks section %+v, want one only with hooks", h)
			} else if h != nil {
				if len(tt.hooks.Join) > 0 && (h.Window.JoinCalls == 0 || h.Window.JoinResumed != int64(res.Storm.Resumed) || h.JoinCallsPerResumedRoom <= 0) {
					t.Errorf("storm window: %+v, %d resumed", h, res.Storm.Resumed)
				}
				if len(tt.hooks.Publish) > 0 && (h.Total.Publish != int64(res.Delivery.Published) || h.PublishPerPost != 1) {
					t.Errorf("publish: %+v, %d posts", h, res.Delivery.Published)
				}
			}
			if res.Connect == nil || res.Connect.Joined != res.Connect.Target {
				t.Errorf("connections: %+v, errors %v", res.Connect, res.Errors)
			}
			if len(res.Steps) == 0 || len(res.Timeline) == 0 || res.Headline == "" {
				t.Errorf("result incomplete: %d steps, %d seconds, headline %q", len(res.Steps), len(res.Timeline), res.Headline)
			}
			var text, page, record bytes.Buffer
			if err := res.WriteText(&text); err != nil || !strings.Contains(text.String(), "delivery check") {
				t.Errorf("text: %v\n%s", err, text.String())
			}
			if err := res.WriteHTML(&page); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(page.String(), "<svg") {
				t.Error("the HTML report has no <svg")
			}
			if strings.Contains(page.String(), "src=\"http") || strings.Contains(page.String(), "href=\"http") {
				t.Error("the HTML report loads external assets")
			}
			if err := res.WriteJSON(&record); err != nil {
				t.Fatal(err)
			}
			var back bench.Result
			if err := json.Unmarshal(record.Bytes(), &back); err != nil || back.Scenario != res.Scenario {
				t.Errorf("JSON record does not read back: %v", err)
			}
		})
	}
}

// TestMetricsCost reads the server's cost from its /metrics endpoint when
// no pid is given.
func TestMetricsCost(t *testing.T) {
	target := startCorral(t)
	c := &bench.Connect{Sockets: 10, Rooms: 1, Rate: 100, Inflight: 4, Hold: 100 * time.Millisecond, Probes: 1}
	res, err := c.Run(context.Background(), bench.Options{Target: target, Drain: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Server == nil || !strings.HasSuffix(res.Server.Source, "/metrics") || res.Server.RSSEnd == 0 {
		t.Errorf("server cost from metrics: %+v", res.Server)
	}
}

// TestAPIKey publishes through an internal API that requires a key.
func TestAPIKey(t *testing.T) {
	const key = "bench-test-key-0123456789"
	tiny := func() *bench.Broadcast {
		return &bench.Broadcast{Sockets: 4, Rooms: 1, Rate: 20, Duration: time.Second, Size: 100,
			Publishers: 2, ConnectRate: 100, Timeout: 5 * time.Second, SLO: time.Second}
	}
	target := startCorral(t, key)
	res, err := tiny().Run(context.Background(), bench.Options{Target: target, Drain: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors["publish:unauthenticated"] == 0 || res.Best >= 0 {
		t.Errorf("without the key: errors %v, best step %d; want refusals", res.Errors, res.Best)
	}
	target.APIKey = key
	res, err = tiny().Run(context.Background(), bench.Options{Target: target, Drain: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) > 0 || res.Delivery.Published == 0 {
		t.Errorf("with the key: errors %v, %d published", res.Errors, res.Delivery.Published)
	}
}

func TestRefusesRemoteTargets(t *testing.T) {
	tests := map[string]bench.Target{
		"remote ws":  {WS: "ws://192.0.2.1:8080/ws", API: "http://127.0.0.1:1"},
		"remote api": {WS: "ws://127.0.0.1:1/ws", API: "http://192.0.2.1:8091"},
		"bad scheme": {WS: "ftp://127.0.0.1/ws", API: "http://127.0.0.1:1"},
		"no api":     {WS: "ws://127.0.0.1:1/ws"},
	}
	for name, target := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := bench.NewBroadcast().Run(context.Background(), bench.Options{Target: target})
			if err == nil || errors.Is(err, bench.ErrViolation) {
				t.Fatalf("got %v, want a refusal", err)
			}
		})
	}
}

func TestScenariosByName(t *testing.T) {
	for _, s := range bench.Scenarios() {
		if bench.Lookup(s.Name()) == nil || s.Describe() == "" {
			t.Errorf("scenario %q: no lookup or description", s.Name())
		}
	}
	if bench.Lookup("nope") != nil {
		t.Error("Lookup of an unknown name")
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// TestStormDrain smoke-runs storm --cause drain: two corral nodes on one
// Redis; the clients start on a, which drains, and move to b.
func TestStormDrain(t *testing.T) {
	redisURL := "redis://" + redistest.Start(t)
	prefix := redistest.Prefix(t)
	node := func() *server.Node {
		n, err := server.Start(server.Options{
			Mode: server.Serve, Node: config.Node{Addr: "127.0.0.1:0", InternalAddr: "127.0.0.1:0", RedisURL: redisURL, RedisPrefix: prefix},
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
		return n
	}
	a, b := node(), node()
	s := &bench.Storm{
		Clients: 40, Rooms: 4, Rate: 10, Steady: time.Second, After: time.Second,
		RecoverTimeout: 30 * time.Second, ConnectRate: 200, Publishers: 4, Size: 100, Timeout: 5 * time.Second,
		Cause: "drain", DrainWindow: 500 * time.Millisecond, Fallback: "ws://" + b.Addr() + "/ws",
		Admin: "http://" + a.InternalAddr(),
	}
	target := bench.Target{WS: "ws://" + a.Addr() + "/ws", API: "http://" + b.InternalAddr(), PID: os.Getpid()}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := s.Run(ctx, bench.Options{Target: target, Drain: 5 * time.Second, Progress: io.Discard})
	if err != nil {
		if res != nil {
			res.WriteText(testWriter{t})
		}
		t.Fatal(err)
	}
	if st := res.Storm; st == nil || st.Resumed != 40 || st.Failed != 0 || st.PeakPerSecond == 0 {
		t.Fatalf("storm stats: %+v", res.Storm)
	}
	if len(res.Delivery.Violations) > 0 || res.Delivery.Received == 0 {
		t.Fatalf("delivery: %+v", res.Delivery)
	}
}
