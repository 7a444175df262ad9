package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connecthttp"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
)

// HooksBackend is an application backend for corral's hooks
// (docs/HOOKS.md) that allows everything and counts what it is asked:
// the load the hooks put on an application, and what they add to the
// users' latency when each answer takes Latency. Join and Publish are
// counted; Connect, Refresh and Call are answered too (allow, echo) but
// not counted. All methods may be called concurrently.
type HooksBackend struct {
	corralv1connect.UnimplementedHooksServiceHandler
	// Latency is added to every answer.
	Latency time.Duration

	joinCalls, joinPairs, joinResumed atomic.Int64
	publishCalls                      atomic.Int64
}

// HooksCounts is a snapshot of a HooksBackend's counters.
type HooksCounts struct {
	JoinCalls   int64 `json:"joinCalls"`
	JoinPairs   int64 `json:"joinPairs"`
	JoinResumed int64 `json:"joinResumedPairs"`
	Publish     int64 `json:"publishCalls"`
}

// Sub returns c - o, the calls made between two snapshots.
func (c HooksCounts) Sub(o HooksCounts) HooksCounts {
	return HooksCounts{c.JoinCalls - o.JoinCalls, c.JoinPairs - o.JoinPairs, c.JoinResumed - o.JoinResumed, c.Publish - o.Publish}
}

// Counts returns the calls answered so far.
func (b *HooksBackend) Counts() HooksCounts {
	return HooksCounts{b.joinCalls.Load(), b.joinPairs.Load(), b.joinResumed.Load(), b.publishCalls.Load()}
}

func (b *HooksBackend) wait(ctx context.Context) error {
	if b.Latency <= 0 {
		return nil
	}
	t := time.NewTimer(b.Latency)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *HooksBackend) Connect(ctx context.Context, req *corralv1.ConnectRequest) (*corralv1.ConnectResponse, error) {
	if err := b.wait(ctx); err != nil {
		return nil, err
	}
	return &corralv1.ConnectResponse{UserId: req.GetToken(), Join: []string{"*"}, Publish: []string{"*"},
		ExpiresUnix: time.Now().Add(24 * time.Hour).Unix()}, nil
}

func (b *HooksBackend) Refresh(ctx context.Context, req *corralv1.RefreshRequest) (*corralv1.RefreshResponse, error) {
	if err := b.wait(ctx); err != nil {
		return nil, err
	}
	return &corralv1.RefreshResponse{Join: []string{"*"}, Publish: []string{"*"}, ExpiresUnix: time.Now().Add(24 * time.Hour).Unix()}, nil
}

func (b *HooksBackend) Join(ctx context.Context, req *corralv1.JoinRequest) (*corralv1.JoinResponse, error) {
	pairs := req.GetPairs()
	b.joinCalls.Add(1)
	b.joinPairs.Add(int64(len(pairs)))
	var resumed int64
	for _, p := range pairs {
		if p.GetResumed() {
			resumed++
		}
	}
	b.joinResumed.Add(resumed)
	if err := b.wait(ctx); err != nil {
		return nil, err
	}
	res := &corralv1.JoinResponse{Results: make([]*corralv1.JoinResult, len(pairs))}
	for i := range res.Results {
		res.Results[i] = &corralv1.JoinResult{}
	}
	return res, nil
}

func (b *HooksBackend) Publish(ctx context.Context, req *corralv1.HooksServicePublishRequest) (*corralv1.HooksServicePublishResponse, error) {
	b.publishCalls.Add(1)
	if err := b.wait(ctx); err != nil {
		return nil, err
	}
	return &corralv1.HooksServicePublishResponse{}, nil
}

func (b *HooksBackend) Call(ctx context.Context, req *corralv1.CallRequest) (*corralv1.CallResponse, error) {
	if err := b.wait(ctx); err != nil {
		return nil, err
	}
	return &corralv1.CallResponse{Payload: req.GetPayload()}, nil
}

// Handler serves b over Connect, gRPC and gRPC-Web.
func (b *HooksBackend) Handler() http.Handler {
	rpc := connect.NewServer()
	corralv1connect.RegisterHooksServiceHandler(rpc, b)
	mux := http.NewServeMux()
	connecthttp.Mount(mux, rpc)
	return mux
}

// Serve serves b on addr over HTTP/1.1 and h2c (corral calls http://
// backends over h2c) until ctx is done, then closes the listener. It
// returns once listening, with the address it listens on.
func (b *HooksBackend) Serve(ctx context.Context, addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("bench: hooks backend: %w", err)
	}
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: b.Handler(), Protocols: p, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err // the run's hook calls fail, and corral's errors show it
		}
	}()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return ln.Addr().String(), nil
}

// HooksOptions are a scenario's --hooks-listen and --hooks-latency.
type HooksOptions struct {
	// Listen is where to serve a HooksBackend; empty: none.
	Listen string
	// Latency is the backend's HooksBackend.Latency.
	Latency time.Duration
}

func (h *HooksOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&h.Listen, "hooks-listen", h.Listen, "serve an allow-everything hooks backend (a HooksService that counts its calls) on this `host:port`, for corral --hooks-url http://host:port; the result gains a hooks section")
	fs.DurationVar(&h.Latency, "hooks-latency", h.Latency, "with --hooks-listen: added to every hook answer")
}

func (h *HooksOptions) params(m map[string]any) map[string]any {
	if h.Listen != "" {
		m["hooks-listen"], m["hooks-latency"] = h.Listen, h.Latency.String()
	}
	return m
}

// start serves the backend when --hooks-listen is set; nil otherwise.
func (h *HooksOptions) start(ctx context.Context) (*HooksBackend, error) {
	if h.Listen == "" {
		return nil, nil
	}
	b := &HooksBackend{Latency: h.Latency}
	if _, err := b.Serve(ctx, h.Listen); err != nil {
		return nil, err
	}
	return b, nil
}

// HooksStats is what the hooks backend was asked during a run.
type HooksStats struct {
	LatencyMs float64 `json:"latencyMs"`
	// Total covers the whole run; Window, for storm, is from the reset to
	// the end of publishing: a resumed session's rooms pass the Join hook
	// after its Welcome, so some calls come after the last one.
	Total  HooksCounts `json:"total"`
	Window HooksCounts `json:"window"`
	// JoinCallsPerResumedRoom is storm's Window.JoinCalls over the rooms
	// the sessions resumed (one per resumed session); PairsPerJoinCall
	// the mean batch in the window.
	JoinCallsPerResumedRoom float64 `json:"joinCallsPerResumedRoom,omitempty"`
	PairsPerJoinCall        float64 `json:"pairsPerJoinCall,omitempty"`
	// PublishPerPost is Total.Publish over the posts the clients made.
	PublishPerPost float64 `json:"publishPerPost,omitempty"`
}

func (s *HooksStats) text() string {
	out := fmt.Sprintf("  hooks backend          (+%g ms each) whole run: %d Join calls (%d pairs, %d resumed), %d Publish calls",
		s.LatencyMs, s.Total.JoinCalls, s.Total.JoinPairs, s.Total.JoinResumed, s.Total.Publish)
	if s.JoinCallsPerResumedRoom > 0 || s.Window.JoinCalls > 0 {
		out += fmt.Sprintf("; after the reset: %d Join calls, %d pairs (%.1f per call), %.4f calls per resumed room",
			s.Window.JoinCalls, s.Window.JoinPairs, s.PairsPerJoinCall, s.JoinCallsPerResumedRoom)
	}
	if s.PublishPerPost > 0 {
		out += fmt.Sprintf("; %.3f Publish calls per post", s.PublishPerPost)
	}
	return out + "\n"
}
