package redisguard_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"

	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/faultproxy"
	"github.com/corral-rt/corral/internal/redisguard"
	"github.com/corral-rt/corral/internal/redistest"
)

// setup starts a private Redis behind toxiproxy and a guarded client
// through it.
func setup(t *testing.T, timeout time.Duration) (*redisguard.Guard, rueidis.Client, *faultproxy.Toxic, *prometheus.Registry, *syncBuf) {
	t.Helper()
	srv := redistest.StartProcess(t, 0)
	tox, err := faultproxy.StartToxic(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tox.Close)
	reg := prometheus.NewRegistry()
	logs := new(syncBuf)
	g := redisguard.New(redisguard.Options{
		Timeout: timeout, ProbeEvery: 50 * time.Millisecond, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	})
	opt := rueidis.ClientOption{InitAddress: []string{tox.Addr()}, DisableCache: true}
	g.Configure(&opt)
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		g.Close()
		c.Close()
	})
	g.Watch(c)
	waitFor(t, "ready", g.Ready)
	return g, c, tox, reg, logs
}

// TestTimeoutToxic: Redis stops answering (a timeout toxic both ways, a
// partition); a guarded command fails with ErrTimeout within the bound,
// not the caller's context's error, and is counted; /readyz's state turns
// false, one line says so, and all turns back when the toxic goes.
func TestTimeoutToxic(t *testing.T) {
	const timeout = 300 * time.Millisecond
	g, c, tox, reg, logs := setup(t, timeout)
	rc := g.Wrap(c, "history")
	ctx := context.Background()
	if err := rc.Do(ctx, rc.B().Set().Key("k").Value("v").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"upstream", "downstream"} {
		if err := tox.Add("cut_"+s, "timeout", s, map[string]any{"timeout": 0}); err != nil {
			t.Fatal(err)
		}
	}
	for _, call := range []struct {
		name string
		do   func(context.Context) error
	}{
		{"Do", func(ctx context.Context) error { return rc.Do(ctx, rc.B().Get().Key("k").Build()).Error() }},
		{"DoMulti", func(ctx context.Context) error {
			return errors.Join(rc.DoMulti(ctx, rc.B().Get().Key("k").Build(), rc.B().Incr().Key("n").Build())[1].Error())
		}},
		{"script", func(ctx context.Context) error {
			return rueidis.NewLuaScript("return 1").Exec(ctx, rc, nil, nil).Error()
		}},
	} {
		t.Run(call.name, func(t *testing.T) {
			// The caller's own context would wait a minute.
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			start := time.Now()
			err := call.do(cctx)
			took := time.Since(start)
			if !errors.Is(err, redisguard.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("got %v, want ErrTimeout (and not the caller's deadline)", err)
			}
			if took > timeout+2*time.Second {
				t.Fatalf("failed after %v, the bound is %v", took, timeout)
			}
		})
	}
	if n := errs(t, reg, "history", "timeout"); n < 3 {
		t.Fatalf("corral_store_errors_total{store=history,kind=timeout} = %v, want >= 3", n)
	}
	waitFor(t, "not ready", func() bool { return !g.Ready() })
	for _, s := range []string{"upstream", "downstream"} {
		if err := tox.Remove("cut_" + s); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "ready again", g.Ready)
	// Commands work again, on new connections.
	waitFor(t, "commands again", func() bool {
		return rc.Do(ctx, rc.B().Get().Key("k").Build()).Error() == nil
	})
	out := logs.String()
	if strings.Count(out, "redis unreachable") != 1 || strings.Count(out, "redis reachable again") != 1 {
		t.Fatalf("want one unreachable and one reachable-again line, log:\n%s", out)
	}
}

// TestLatencyWithinBound: a slow Redis (latency below the timeout) is
// slow, not failed.
func TestLatencyWithinBound(t *testing.T) {
	g, c, tox, reg, _ := setup(t, 2*time.Second)
	rc := g.Wrap(c, "sessions")
	if err := tox.Add("slow", "latency", "downstream", map[string]any{"latency": 300}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := rc.Do(context.Background(), rc.B().Set().Key("k").Value("v").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("took %v: the latency toxic did not apply", took)
	}
	for _, kind := range []string{"timeout", "connection", "other"} {
		if n := errs(t, reg, "sessions", kind); n != 0 {
			t.Fatalf("%v %s errors after slow successes", n, kind)
		}
	}
	if !g.Ready() {
		t.Fatal("a slow Redis is still ready")
	}
}

// TestResetCountsReconnect: connections reset by the peer are replaced,
// and the replacements are counted as reconnects; the failed command is a
// connection error, not a timeout.
func TestResetCountsReconnect(t *testing.T) {
	g, c, tox, reg, _ := setup(t, 2*time.Second)
	rc := g.Wrap(c, "presence")
	ctx := context.Background()
	if err := rc.Do(ctx, rc.B().Ping().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := tox.Add("rst", "reset_peer", "upstream", map[string]any{"timeout": 0}); err != nil {
		t.Fatal(err)
	}
	err := rc.Do(ctx, rc.B().Set().Key("k").Value("v").Build()).Error()
	if err == nil || errors.Is(err, redisguard.ErrTimeout) {
		t.Fatalf("through reset_peer: %v, want a connection error", err)
	}
	if n := errs(t, reg, "presence", "connection"); n < 1 {
		t.Fatalf("connection errors counted: %v", n)
	}
	if err := tox.Remove("rst"); err != nil {
		t.Fatal(err)
	}
	// The same key goes to the same (reset) connection, which rueidis
	// opens again on its next use.
	waitFor(t, "commands again", func() bool { return rc.Do(ctx, rc.B().Set().Key("k").Value("v").Build()).Error() == nil })
	waitFor(t, "a reconnect counted", func() bool {
		return value(t, reg, "corral_store_reconnects_total", nil) >= 1
	})
}

// value reads the series of metric name with the given labels (0 when
// absent).
func value(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue series
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

func errs(t *testing.T, reg *prometheus.Registry, store, kind string) float64 {
	t.Helper()
	return value(t, reg, "corral_store_errors_total", map[string]string{"store": store, "kind": kind})
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	eventually.True(t, 15*time.Second, ok, "%s", what)
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMasterChangeCounted: the probe notices that the master it reached
// is gone (here a restart, which changes its run_id as a failover to
// another server does): counted once, and logged.
func TestMasterChangeCounted(t *testing.T) {
	srv := redistest.StartProcess(t, 0)
	reg := prometheus.NewRegistry()
	logs := new(syncBuf)
	g := redisguard.New(redisguard.Options{
		Timeout: time.Second, ProbeEvery: 50 * time.Millisecond, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	})
	opt := rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true}
	g.Configure(&opt)
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		g.Close()
		c.Close()
	})
	// pings reads how many PINGs the server answered since it started;
	// fewProbes waits until it answered 4 more than when called (a probe
	// is a PING, then INFO server): the guard looked at the same master
	// several times.
	admin := redistest.Client(t, srv.Addr())
	pings := func() int {
		info, err := admin.Do(context.Background(), admin.B().Info().Section("commandstats").Build()).ToString()
		if err != nil {
			return -1 // the admin connection meets the restart first
		}
		for line := range strings.Lines(info) {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_ping:calls="); ok {
				n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
				return n
			}
		}
		return 0
	}
	fewProbes := func(what string) {
		t.Helper()
		from := -1
		waitFor(t, "the server's stats", func() bool { from = pings(); return from >= 0 })
		waitFor(t, what, func() bool { return pings() >= from+4 })
	}
	g.Watch(c)
	waitFor(t, "ready", g.Ready)
	fewProbes("a few probes of the same master")
	if n := value(t, reg, "corral_store_failovers_total", nil); n != 0 {
		t.Fatalf("failovers counted before any: %v", n)
	}
	srv.Restart()
	waitFor(t, "the master change counted", func() bool {
		return value(t, reg, "corral_store_failovers_total", nil) == 1
	})
	fewProbes("a few probes of the new master")
	if n := value(t, reg, "corral_store_failovers_total", nil); n != 1 {
		t.Fatalf("one master change counted %v times", n)
	}
	if !strings.Contains(logs.String(), "redis master changed") {
		t.Fatalf("no log line: %s", logs.String())
	}
}
