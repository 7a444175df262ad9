package hooks_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connecthttp"
	"github.com/corral-rt/corral/config"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
	"github.com/corral-rt/corral/hooks"
	"github.com/corral-rt/corral/internal/eventually"
)

// backend is a HooksService for tests: rooms starting with "secret" are
// refused, calls are counted, and fail/delay make it misbehave.
type backend struct {
	corralv1connect.UnimplementedHooksServiceHandler
	joinCalls, joinPairs atomic.Int64
	calls                atomic.Int64 // Call
	fail                 atomic.Bool
	delay                atomic.Int64 // nanoseconds
	auth                 atomic.Value // last Authorization header
}

func (b *backend) trouble(ctx context.Context) error {
	if d := time.Duration(b.delay.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if b.fail.Load() {
		return connect.NewError(connect.CodeInternal, "database on fire")
	}
	return nil
}

func (b *backend) Join(ctx context.Context, req *corralv1.JoinRequest) (*corralv1.JoinResponse, error) {
	b.joinCalls.Add(1)
	b.joinPairs.Add(int64(len(req.GetPairs())))
	if err := b.trouble(ctx); err != nil {
		return nil, err
	}
	res := &corralv1.JoinResponse{}
	for _, p := range req.GetPairs() {
		r := &corralv1.JoinResult{}
		if strings.HasPrefix(p.GetRoom(), "secret") {
			r.Refusal = &corralv1.Refusal{Code: corralv1.Code_CODE_FORBIDDEN, Reason: "members only"}
		}
		r.Info = memberInfo[p.GetRoom()]
		res.Results = append(res.Results, r)
	}
	return res, nil
}

func (b *backend) Connect(ctx context.Context, req *corralv1.ConnectRequest) (*corralv1.ConnectResponse, error) {
	if info, ok := connect.CallInfoForServerContext(ctx); ok {
		b.auth.Store(info.RequestHeader().Get("Authorization"))
	}
	if err := b.trouble(ctx); err != nil {
		return nil, err
	}
	if req.GetToken() == "bad-info" {
		return &corralv1.ConnectResponse{UserId: "alice", Info: []byte(`{"name":`)}, nil
	}
	if req.GetToken() != "good" {
		return &corralv1.ConnectResponse{Refusal: &corralv1.Refusal{Code: 1, Reason: "who are you"}}, nil
	}
	return &corralv1.ConnectResponse{UserId: "alice", Join: []string{"*"}}, nil
}

func (b *backend) Call(ctx context.Context, req *corralv1.CallRequest) (*corralv1.CallResponse, error) {
	b.calls.Add(1)
	if err := b.trouble(ctx); err != nil {
		return nil, err
	}
	return &corralv1.CallResponse{Payload: append([]byte("echo:"), req.GetPayload()...)}, nil
}

// memberInfo is the backend's JoinResult.info by room.
var memberInfo = map[string][]byte{
	"info:ok":     []byte(`{"name":"Alice"}`),
	"info:max":    []byte(`"` + strings.Repeat("x", hooks.MaxInfo-2) + `"`),
	"info:big":    []byte(`"` + strings.Repeat("x", hooks.MaxInfo-1) + `"`),
	"info:broken": []byte(`{"name":`),
}

// start serves b over h2c and returns a client of it.
func start(t *testing.T, b *backend, tune func(*hooks.Config)) *hooks.Client {
	t.Helper()
	srv := httptest.NewUnstartedServer(backendMux(b))
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = p
	srv.Start()
	t.Cleanup(srv.Close)
	return newClient(t, hooks.Config{Hooks: config.Hooks{URL: srv.URL, Timeout: 5 * time.Second}}, tune)
}

// backendMux serves b's HooksService.
func backendMux(b *backend) *http.ServeMux {
	rpc := connect.NewServer()
	corralv1connect.RegisterHooksServiceHandler(rpc, b)
	mux := http.NewServeMux()
	connecthttp.Mount(mux, rpc)
	return mux
}

// newClient is a hooks client with cfg, tuned by tune (if set), closed
// when the test ends.
func newClient(t *testing.T, cfg hooks.Config, tune func(*hooks.Config)) *hooks.Client {
	t.Helper()
	if tune != nil {
		tune(&cfg)
	}
	c, err := hooks.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestJoinCoalescesConcurrentCallers(t *testing.T) {
	b := &backend{}
	c := start(t, b, func(cfg *hooks.Config) { cfg.JoinWindow = 50 * time.Millisecond; cfg.JoinMaxBatch = 400 })
	const callers, rooms = 100, 10
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for i := range callers {
		wg.Go(func() {
			var pairs []*corralv1.JoinPair
			for r := range rooms {
				room := fmt.Sprintf("room-%d-%d", i, r)
				if r%3 == 0 {
					room = "secret-" + room
				}
				pairs = append(pairs, &corralv1.JoinPair{UserId: fmt.Sprint("u", i), Room: room})
			}
			res, err := c.Join(context.Background(), pairs, nil)
			if err != nil {
				errs <- err
				return
			}
			for k, r := range res {
				if refused := r.GetRefusal() != nil; refused != strings.HasPrefix(pairs[k].GetRoom(), "secret") {
					errs <- fmt.Errorf("pair %s: refused %v", pairs[k].GetRoom(), refused)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := b.joinPairs.Load(); got != callers*rooms {
		t.Fatalf("backend saw %d pairs, want %d", got, callers*rooms)
	}
	// 1,000 pairs, at most 400 per call: at least 3 calls; the callers
	// all start within the window, so a few more at most.
	if got := b.joinCalls.Load(); got < 3 || got > 10 {
		t.Fatalf("backend got %d Join calls for %d pairs, want 3..10", got, callers*rooms)
	}
}

// TestJoinCache: an admission is answered from the cache within its
// room's TTL; a refusal is asked again every time; a room whose TTL is 0
// is never cached.
func TestJoinCache(t *testing.T) {
	tests := []struct {
		name      string
		opts      *hooks.JoinOptions
		room      string
		wantCalls int64
	}{
		{"config TTL, admitted", nil, "a", 1},
		{"config TTL, refused", nil, "secret", 3},
		{"room TTL, admitted", &hooks.JoinOptions{CacheTTL: func(string) time.Duration { return time.Hour }}, "a", 1},
		{"room TTL 0", &hooks.JoinOptions{CacheTTL: func(string) time.Duration { return 0 }}, "a", 3},
		{"room TTL, refused", &hooks.JoinOptions{CacheTTL: func(string) time.Duration { return time.Hour }}, "secret", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &backend{}
			c := start(t, b, func(cfg *hooks.Config) { cfg.JoinCacheTTL = time.Hour })
			pairs := []*corralv1.JoinPair{{UserId: "u", Room: tt.room}}
			for range 3 {
				res, err := c.Join(context.Background(), pairs, tt.opts)
				if err != nil {
					t.Fatal(err)
				}
				if refused := res[0].GetRefusal() != nil; refused != strings.HasPrefix(tt.room, "secret") {
					t.Fatalf("result %v", res[0])
				}
			}
			if got := b.joinCalls.Load(); got != tt.wantCalls {
				t.Fatalf("backend calls %d, want %d", got, tt.wantCalls)
			}
		})
	}
}

// TestJoinCacheExpires: an admission cached under a TTL is asked again
// once the room's TTL (read at each lookup) has passed.
func TestJoinCacheExpires(t *testing.T) {
	b := &backend{}
	c := start(t, b, nil)
	var ttl atomic.Int64
	ttl.Store(int64(time.Hour))
	opts := &hooks.JoinOptions{CacheTTL: func(string) time.Duration { return time.Duration(ttl.Load()) }}
	pairs := []*corralv1.JoinPair{{UserId: "u", Room: "a"}}
	join := func() {
		t.Helper()
		if _, err := c.Join(context.Background(), pairs, opts); err != nil {
			t.Fatal(err)
		}
	}
	join()
	join()
	if got := b.joinCalls.Load(); got != 1 {
		t.Fatalf("backend calls %d, want 1", got)
	}
	ttl.Store(int64(time.Nanosecond)) // a reload shortened the class's TTL
	join()
	if got := b.joinCalls.Load(); got != 2 {
		t.Fatalf("backend calls %d after the TTL passed, want 2", got)
	}
}

func TestBackendDownOpensBreaker(t *testing.T) {
	b := &backend{}
	b.fail.Store(true)
	c := start(t, b, func(cfg *hooks.Config) {
		cfg.BreakerFailures = 3
		cfg.BreakerCooldown = time.Hour
		cfg.Key = "s3cret"
	})
	for i := range 3 {
		_, err := c.Connect(context.Background(), &corralv1.ConnectRequest{Token: "good"})
		if !errors.Is(err, hooks.ErrUnavailable) || hooks.Kind(err) != hooks.KindBackend {
			t.Fatalf("call %d: %v (kind %q), want a backend failure", i, err, hooks.Kind(err))
		}
	}
	if got := b.auth.Load(); got != "Bearer s3cret" {
		t.Fatalf("Authorization %q", got)
	}
	b.fail.Store(false)
	_, err := c.Connect(context.Background(), &corralv1.ConnectRequest{Token: "good"})
	if hooks.Kind(err) != hooks.KindBreakerOpen {
		t.Fatalf("after 3 failures: %v, want breaker_open", err)
	}
	if d := hooks.RetryAfter(err); d < time.Minute {
		t.Fatalf("RetryAfter %v, want the breaker's time left", d)
	}
	// The other hooks have breakers of their own.
	if _, err := c.Call(context.Background(), &corralv1.CallRequest{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
}

func TestBreakerProbeCloses(t *testing.T) {
	b := &backend{}
	b.fail.Store(true)
	c := start(t, b, func(cfg *hooks.Config) { cfg.BreakerFailures = 1; cfg.BreakerCooldown = 50 * time.Millisecond })
	if _, err := c.Call(context.Background(), &corralv1.CallRequest{}); hooks.Kind(err) != hooks.KindBackend {
		t.Fatal(err)
	}
	b.fail.Store(false)
	eventually.NoError(t, 10*time.Second, func() error {
		_, err := c.Call(context.Background(), &corralv1.CallRequest{})
		if err != nil && hooks.Kind(err) != hooks.KindBreakerOpen {
			t.Fatalf("%v", err)
		}
		return err
	})
}

func TestSlowBackendTimesOut(t *testing.T) {
	b := &backend{}
	b.delay.Store(int64(time.Minute))
	c := start(t, b, func(cfg *hooks.Config) { cfg.Timeout = 100 * time.Millisecond })
	done := make(chan error, 1)
	go func() {
		_, err := c.Join(context.Background(), []*corralv1.JoinPair{{UserId: "u", Room: "a"}}, nil)
		done <- err
	}()
	select {
	case err := <-done:
		if hooks.Kind(err) != hooks.KindTimeout {
			t.Fatalf("%v, want a timeout", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Join hung on a slow backend")
	}
}

func TestInFlightBound(t *testing.T) {
	b := &backend{}
	b.delay.Store(int64(time.Minute))
	c := start(t, b, func(cfg *hooks.Config) { cfg.MaxInFlight = 1; cfg.Timeout = time.Minute })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Call(ctx, &corralv1.CallRequest{})
	eventually.True(t, 10*time.Second, func() bool { return b.calls.Load() > 0 }, "the first call at the backend")
	_, err := c.Call(context.Background(), &corralv1.CallRequest{})
	if hooks.Kind(err) != hooks.KindOverloaded {
		t.Fatalf("%v, want overloaded while one call is in flight", err)
	}
}

func TestClientRefusal(t *testing.T) {
	for name, tc := range map[string]struct {
		in   *corralv1.Refusal
		code corralv1.Code
	}{
		"client code passes":  {&corralv1.Refusal{Code: corralv1.Code_CODE_LIMIT_EXCEEDED, Reason: "r"}, corralv1.Code_CODE_LIMIT_EXCEEDED},
		"unspecified mapped":  {&corralv1.Refusal{}, corralv1.Code_CODE_FORBIDDEN},
		"unknown code mapped": {&corralv1.Refusal{Code: 4499}, corralv1.Code_CODE_FORBIDDEN},
		"out of table mapped": {&corralv1.Refusal{Code: 13}, corralv1.Code_CODE_FORBIDDEN},
	} {
		t.Run(name, func(t *testing.T) {
			code, reason := hooks.ClientRefusal(tc.in, corralv1.Code_CODE_FORBIDDEN)
			if code != tc.code || reason == "" {
				t.Fatalf("got %v %q, want %v", code, reason, tc.code)
			}
		})
	}
}

func TestConnectRefusedAndAllowed(t *testing.T) {
	c := start(t, &backend{}, nil)
	res, err := c.Connect(context.Background(), &corralv1.ConnectRequest{Token: "bad"})
	if err != nil || res.GetRefusal() == nil {
		t.Fatalf("%v %v, want a refusal", res, err)
	}
	res, err = c.Connect(context.Background(), &corralv1.ConnectRequest{Token: "good"})
	if err != nil || res.GetUserId() != "alice" {
		t.Fatalf("%v %v", res, err)
	}
}

func TestPolicyFor(t *testing.T) {
	p := &hooks.Policy{Join: []string{"game:*"}, Publish: []string{"chat:*", "game:lobby"}}
	for room, want := range map[string]hooks.Events{
		"game:1":     {Join: true},
		"game:lobby": {Join: true, Publish: true},
		"chat:x":     {Publish: true},
		"other":      {},
	} {
		if got := p.For(room); got != want {
			t.Errorf("For(%q) = %+v, want %+v", room, got, want)
		}
	}
	var none *hooks.Policy
	if none.For("x") != (hooks.Events{}) {
		t.Error("a nil policy sends events")
	}
}

// TestSlowBackendGrowsBatches: with one Join call in flight at most, the
// joins that arrive while the backend is slow wait in one open batch: the
// backend gets bigger batches, not more calls.
func TestSlowBackendGrowsBatches(t *testing.T) {
	b := &backend{}
	b.delay.Store(int64(300 * time.Millisecond))
	c := start(t, b, func(cfg *hooks.Config) { cfg.JoinWindow = time.Millisecond; cfg.JoinMaxCalls = 1 })
	const callers = 20
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * 10 * time.Millisecond)
			if _, err := c.Join(context.Background(), []*corralv1.JoinPair{{UserId: fmt.Sprint("u", i), Room: "a"}}, nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := b.joinPairs.Load(); got != callers {
		t.Fatalf("backend saw %d pairs, want %d", got, callers)
	}
	// The first caller's batch goes alone; the others arrive during its
	// 300 ms and share the next call (a third when the machine is slow).
	if got := b.joinCalls.Load(); got > 3 {
		t.Fatalf("%d Join calls for %d callers arriving during slow calls, want at most 3", got, callers)
	}
}

// TestMemberInfo: valid info of up to MaxInfo bytes passes; larger or
// invalid info refuses that pair only (the rest of the batch stands) and
// is counted as a bad response; a Connect answer with invalid info is a
// bad response (unavailable), never an admission.
func TestMemberInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := start(t, &backend{}, func(cfg *hooks.Config) { cfg.Registerer = reg })
	rooms := []string{"info:ok", "info:max", "info:big", "info:broken", "plain"}
	var pairs []*corralv1.JoinPair
	for _, r := range rooms {
		pairs = append(pairs, &corralv1.JoinPair{UserId: "alice", Room: r})
	}
	res, err := c.Join(context.Background(), pairs, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		refused bool
		info    string
	}{
		"info:ok":     {info: `{"name":"Alice"}`},
		"info:max":    {info: string(memberInfo["info:max"])},
		"info:big":    {refused: true},
		"info:broken": {refused: true},
		"plain":       {},
	}
	for i, room := range rooms {
		tt := tests[room]
		if got := res[i].GetRefusal() != nil; got != tt.refused {
			t.Errorf("%s: refused %v, want %v", room, got, tt.refused)
		}
		if !tt.refused && string(res[i].GetInfo()) != tt.info {
			t.Errorf("%s: info %q, want %q", room, res[i].GetInfo(), tt.info)
		}
	}
	if got := counted(t, reg, "corral_hook_errors_total", map[string]string{"hook": "join", "kind": "bad_response"}); got != 2 {
		t.Errorf("bad responses counted: %v, want 2", got)
	}
	_, err = c.Connect(context.Background(), &corralv1.ConnectRequest{Token: "bad-info"})
	if !errors.Is(err, hooks.ErrUnavailable) {
		t.Fatalf("connect with invalid info: %v, want ErrUnavailable", err)
	}
}

// counted returns the value of the counter name with labels in reg.
func counted(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// TestResponseBudget: responses being read count against one byte
// budget for every hook: a response larger than it fails with
// KindOverloaded, as do calls past it while others are read; the budget
// is given back (a small call after them passes).
func TestResponseBudget(t *testing.T) {
	b := &backend{}
	const budget = 1 << 20
	// The calls' bound is not what this tests: 16 responses of 300 KiB
	// under -race on a loaded CI took longer than 5 s.
	c := start(t, b, func(cfg *hooks.Config) { cfg.ResponseBudget, cfg.Timeout = budget, time.Minute })
	ctx := context.Background()
	_, err := c.Call(ctx, &corralv1.CallRequest{Payload: bytes.Repeat([]byte("x"), 3<<20)})
	if hooks.Kind(err) != hooks.KindOverloaded {
		t.Fatalf("a 3 MiB response under a 1 MiB budget: %v, want overloaded", err)
	}
	var wg sync.WaitGroup
	var ok, over atomic.Int64
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Call(ctx, &corralv1.CallRequest{Payload: bytes.Repeat([]byte("x"), 300<<10)})
			switch {
			case err == nil:
				ok.Add(1)
			case hooks.Kind(err) == hooks.KindOverloaded:
				over.Add(1)
			default:
				t.Errorf("call: %v", err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() == 0 {
		t.Fatalf("no call of 300 KiB passed under a 1 MiB budget (%d over)", over.Load())
	}
	if res, err := c.Call(ctx, &corralv1.CallRequest{Payload: []byte("x")}); err != nil || string(res.GetPayload()) != "echo:x" {
		t.Fatalf("a small call after the others: %v, %v: the budget was not given back", res, err)
	}
}
