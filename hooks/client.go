package hooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connecthttp"
	"github.com/corral-rt/corral/config"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
	"github.com/corral-rt/corral/internal/bearer"
	"github.com/prometheus/client_golang/prometheus"
)

// Config configures a [Client]. URL is required.
type Config struct {
	// Hooks is the settings of package config (the hooks-* keys):
	//   - URL, the backend's base URL: "http://host:port" (HTTP/2 without
	//     TLS, h2c) or "https://...";
	//   - Key, when set, sent on every call as "Authorization: Bearer
	//     Key" (KeyFile is read by the command, not here);
	//   - Timeout bounds one backend call. Default 2s;
	//   - MaxInFlight bounds each hook's calls in flight; past it a call
	//     fails at once (KindOverloaded). Default 256;
	//   - ResponseBudget bounds the bytes of backend responses being
	//     read, every hook's calls together; a call whose response would
	//     pass it fails (KindOverloaded). Default 64 MiB. Each response
	//     is also bounded on its own (4 MiB);
	//   - JoinWindow is how long a join waits for others to share its
	//     backend call. Default 2ms; negative: no wait (concurrent joins
	//     still share a call that has not gone out);
	//   - JoinMaxBatch bounds the pairs of one Join call. Default 1000;
	//   - JoinHerdWindow is the longest a join waits in a herd: when
	//     pairs arrive fast enough that JoinHerdBatch of them come within
	//     it, a new batch waits JoinHerdBatch/rate (at least JoinWindow)
	//     instead of JoinWindow, and goes at once when it holds
	//     JoinHerdBatch pairs. Default 250ms; config.Off: every batch
	//     waits JoinWindow;
	//   - JoinCacheTTL keeps each (user, room) admission that long (a
	//     refusal is never kept: it is asked again), for the Join calls
	//     whose JoinOptions give no TTL. 0: no cache.
	config.Hooks
	// HTTPClient sends the calls. Nil: h2c for http:// URLs, the default
	// client for https://.
	HTTPClient connecthttp.HTTPClient
	// Policy says which events go to the backend.
	Policy Policy
	// BreakerFailures consecutive failures open a hook's breaker for
	// BreakerCooldown. Defaults 5 and 5s.
	BreakerFailures int
	BreakerCooldown time.Duration
	// JoinHerdBatch is the batch a herd's joins wait to fill. Default 200.
	JoinHerdBatch int
	// JoinMaxCalls bounds the Join calls in flight; a batch ready meanwhile
	// waits and keeps taking pairs. Default 4.
	JoinMaxCalls int
	// JoinCacheSize bounds the cached decisions. Default 100,000.
	JoinCacheSize int
	// Logger receives structured logs. Nil: slog.Default().
	Logger *slog.Logger
	// Registerer receives the hooks' metrics. Nil: not registered.
	Registerer prometheus.Registerer
}

// Hook names, the label hook of the metrics.
const (
	HookConnect = "connect"
	HookRefresh = "refresh"
	HookJoin    = "join"
	HookPublish = "publish"
	HookCall    = "call"
)

// Client calls the application's HooksService. Safe for concurrent use.
type Client struct {
	cfg     Config
	api     corralv1connect.HooksServiceClient
	metrics *metrics
	guards  map[string]*guard
	joins   *joiner

	ctx    context.Context // ends at Close: the batched calls' parent
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a client of the backend at cfg.URL. It does not connect.
func New(cfg Config) (*Client, error) {
	if cfg.URL == "" {
		return nil, errors.New("hooks: Config.URL is required")
	}
	if !strings.HasPrefix(cfg.URL, "http://") && !strings.HasPrefix(cfg.URL, "https://") {
		return nil, fmt.Errorf("hooks: URL %q: want http:// (h2c) or https://", cfg.URL)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 256
	}
	if cfg.ResponseBudget <= 0 {
		cfg.ResponseBudget = 64 << 20
	}
	if cfg.BreakerFailures <= 0 {
		cfg.BreakerFailures = 5
	}
	if cfg.BreakerCooldown <= 0 {
		cfg.BreakerCooldown = 5 * time.Second
	}
	if cfg.JoinWindow == 0 {
		cfg.JoinWindow = 2 * time.Millisecond
	}
	if cfg.JoinMaxBatch <= 0 {
		cfg.JoinMaxBatch = 1000
	}
	if cfg.JoinHerdWindow == 0 {
		cfg.JoinHerdWindow = config.Window(250 * time.Millisecond)
	}
	if cfg.JoinHerdBatch <= 0 {
		cfg.JoinHerdBatch = 200
	}
	if cfg.JoinMaxCalls <= 0 {
		cfg.JoinMaxCalls = 4
	}
	if cfg.JoinCacheSize <= 0 {
		cfg.JoinCacheSize = 100_000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
		if strings.HasPrefix(cfg.URL, "http://") {
			hc = h2cClient()
		}
	}
	hc = &budgetClient{inner: hc, max: cfg.ResponseBudget}
	var ics []connect.ClientInterceptor
	if cfg.Key != "" {
		ics = append(ics, bearer.Interceptor(cfg.Key))
	}
	c := &Client{
		cfg:     cfg,
		api:     corralv1connect.NewHooksServiceClient(connect.NewClient(connecthttp.NewTransport(hc, cfg.URL, connecthttp.WithCompressors()), ics...)),
		metrics: newMetrics(cfg.Registerer),
		guards:  make(map[string]*guard),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	for _, h := range []string{HookConnect, HookRefresh, HookJoin, HookPublish, HookCall} {
		c.guards[h] = newGuard(h, &c.cfg, c.metrics)
	}
	c.joins = newJoiner(c)
	return c, nil
}

// Policy returns the client's policy.
func (c *Client) Policy() *Policy { return &c.cfg.Policy }

// JoinCacheTTL returns Config.JoinCacheTTL.
func (c *Client) JoinCacheTTL() time.Duration { return c.cfg.JoinCacheTTL }

// Unchecked counts an event of hook that its failure policy let through
// without the backend's answer (corral_hook_unchecked_total).
func (c *Client) Unchecked(hook string, n int) {
	c.metrics.unchecked.WithLabelValues(hook).Add(float64(n))
}

// Close cancels the calls in flight and waits for the batched ones. Safe
// to call twice.
func (c *Client) Close() {
	c.cancel()
	c.wg.Wait()
}

// Connect asks the backend who a connection is. A response with refusal
// set is the backend's "no"; an error wraps [ErrUnavailable].
func (c *Client) Connect(ctx context.Context, req *corralv1.ConnectRequest) (*corralv1.ConnectResponse, error) {
	var res *corralv1.ConnectResponse
	err := c.guards[HookConnect].do(ctx, func(ctx context.Context) (err error) {
		res, err = c.api.Connect(ctx, req)
		if err == nil && res.GetRefusal() == nil && res.GetUserId() == "" {
			return badResponse("Connect admitted without a user id")
		}
		if err == nil && res.GetRefusal() == nil {
			if bad := checkInfo(res.GetInfo()); bad != nil {
				return badResponse("Connect: " + bad.Error())
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	c.count(HookConnect, res.GetRefusal() == nil)
	return res, nil
}

// Refresh asks the backend to extend a connection.
func (c *Client) Refresh(ctx context.Context, req *corralv1.RefreshRequest) (*corralv1.RefreshResponse, error) {
	var res *corralv1.RefreshResponse
	err := c.guards[HookRefresh].do(ctx, func(ctx context.Context) (err error) {
		res, err = c.api.Refresh(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	c.count(HookRefresh, res.GetRefusal() == nil)
	return res, nil
}

// Publish asks the backend about a client's publish.
func (c *Client) Publish(ctx context.Context, req *corralv1.HooksServicePublishRequest) (*corralv1.HooksServicePublishResponse, error) {
	var res *corralv1.HooksServicePublishResponse
	err := c.guards[HookPublish].do(ctx, func(ctx context.Context) (err error) {
		res, err = c.api.Publish(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	c.count(HookPublish, res.GetRefusal() == nil)
	return res, nil
}

// Call passes a client's call to the backend.
func (c *Client) Call(ctx context.Context, req *corralv1.CallRequest) (*corralv1.CallResponse, error) {
	var res *corralv1.CallResponse
	err := c.guards[HookCall].do(ctx, func(ctx context.Context) (err error) {
		res, err = c.api.Call(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	c.count(HookCall, res.GetRefusal() == nil)
	return res, nil
}

func (c *Client) count(hook string, allowed bool) {
	r := resultAllowed
	if !allowed {
		r = resultRefused
	}
	c.metrics.calls.WithLabelValues(hook, r).Inc()
}

// guard is one hook's timeout, concurrency bound and breaker.
type guard struct {
	hook    string
	timeout time.Duration
	sem     chan struct{}
	br      *breaker
	m       *metrics
}

func newGuard(hook string, cfg *Config, m *metrics) *guard {
	g := &guard{hook: hook, timeout: cfg.Timeout, sem: make(chan struct{}, cfg.MaxInFlight), m: m}
	state := m.breaker.WithLabelValues(hook)
	state.Set(0)
	g.br = &breaker{
		failures: cfg.BreakerFailures, cooldown: cfg.BreakerCooldown, now: time.Now,
		onState: func(s breakerState) { state.Set(float64(s)) },
	}
	return g
}

// do runs call within the hook's bounds. It returns nil, call's error
// wrapped as unavailable, or an unavailable error for a call that never
// went out.
func (g *guard) do(ctx context.Context, call func(context.Context) error) error {
	if ok, left := g.br.allow(); !ok {
		return g.fail(&unavailable{hook: g.hook, kind: KindBreakerOpen, retry: left})
	}
	select {
	case g.sem <- struct{}{}:
	default:
		g.br.release() // not the backend's fault
		return g.fail(&unavailable{hook: g.hook, kind: KindOverloaded})
	}
	defer func() { <-g.sem }()
	cctx, cancel := context.WithTimeout(ctx, g.timeout)
	start := time.Now()
	err := call(cctx)
	cancel()
	g.m.duration.WithLabelValues(g.hook).Observe(time.Since(start).Seconds())
	if err == nil {
		g.br.done(true)
		return nil
	}
	if ctx.Err() != nil {
		// The caller gave up (its connection ended): not the backend's
		// failure.
		g.br.release()
		return fmt.Errorf("hooks: %s: %w", g.hook, ctx.Err())
	}
	if errors.Is(err, errResponseBudget) {
		// Like a full semaphore: the sum of every hook's responses,
		// not this backend answer alone (budget.go).
		g.br.release()
		return g.fail(&unavailable{hook: g.hook, kind: KindOverloaded, err: err})
	}
	g.br.done(false)
	kind := KindBackend
	var bad *badResponseError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || connect.CodeOf(err) == connect.CodeDeadlineExceeded:
		kind = KindTimeout
	case errors.As(err, &bad):
		kind = KindBadResponse
	}
	return g.fail(&unavailable{hook: g.hook, kind: kind, err: err})
}

func (g *guard) fail(u *unavailable) error {
	g.m.errors.WithLabelValues(g.hook, u.kind).Inc()
	g.m.calls.WithLabelValues(g.hook, resultFailed).Inc()
	return u
}

type badResponseError struct{ msg string }

func (e *badResponseError) Error() string { return "hooks: bad response: " + e.msg }

func badResponse(msg string) error { return &badResponseError{msg} }

// h2cClient speaks HTTP/2 without TLS, as a Connect or gRPC backend on an
// http:// URL expects.
func h2cClient() *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{
		Protocols:       p,
		MaxIdleConns:    16,
		IdleConnTimeout: 90 * time.Second,
	}}
}
