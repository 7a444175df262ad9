package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connecthttp"
	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/client"
	"github.com/corral-rt/corral/config"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
	"github.com/corral-rt/corral/hooks"
	"github.com/corral-rt/corral/internal/readytest"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/roomclass"
	"github.com/corral-rt/corral/server"
)

// The application's backend in the loop (issue 20, docs/HOOKS.md): a real
// HooksService over h2c, called by corral.

// appBackend is a toy application: token "user:NAME" is NAME, "banned"
// is refused; rooms starting with "secret" are members-only; a payload
// "bad" is refused and "shout" replaced; Call "echo" echoes. Member info:
// Connect gives {"conn":NAME}; Join of "game:info*" gives {"name":NAME}
// (none for carol), of "game:huge" 5 KiB. A delete of the state key
// "locked" is refused.
type appBackend struct {
	corralv1connect.UnimplementedHooksServiceHandler
	joinCalls, joinPairs atomic.Int64
	down                 atomic.Bool
	slow                 atomic.Int64 // nanoseconds added to Join
	expires              atomic.Int64 // Connect's expires_unix (0: none)
	cookie               atomic.Value
	mu                   sync.Mutex
	writes               []string // each Publish hook request: kind, key, payload
}

func (b *appBackend) check(ctx context.Context) error {
	if b.down.Load() {
		return connect.NewError(connect.CodeUnavailable, "db at 10.0.0.7 is down")
	}
	return nil
}

func (b *appBackend) Connect(ctx context.Context, req *corralv1.ConnectRequest) (*corralv1.ConnectResponse, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	b.cookie.Store(req.GetCookies()["sid"])
	user, ok := strings.CutPrefix(req.GetToken(), "user:")
	if !ok {
		return &corralv1.ConnectResponse{Refusal: &corralv1.Refusal{Code: corralv1.Code_CODE_FORBIDDEN, Reason: "banned"}}, nil
	}
	return &corralv1.ConnectResponse{UserId: user, Join: []string{"*"}, Publish: []string{"*"}, ExpiresUnix: b.expires.Load(),
		Rooms: []string{"inbox:" + user}, Info: []byte(fmt.Sprintf(`{"conn":%q}`, user))}, nil
}

func (b *appBackend) Refresh(ctx context.Context, req *corralv1.RefreshRequest) (*corralv1.RefreshResponse, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	if req.GetToken() != "renew" {
		return &corralv1.RefreshResponse{Refusal: &corralv1.Refusal{Reason: "no"}}, nil
	}
	return &corralv1.RefreshResponse{Join: []string{"*"}, Publish: []string{"*"}, ExpiresUnix: time.Now().Add(time.Hour).Unix()}, nil
}

func (b *appBackend) Join(ctx context.Context, req *corralv1.JoinRequest) (*corralv1.JoinResponse, error) {
	b.joinCalls.Add(1)
	b.joinPairs.Add(int64(len(req.GetPairs())))
	if d := time.Duration(b.slow.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	res := &corralv1.JoinResponse{}
	for _, p := range req.GetPairs() {
		r := &corralv1.JoinResult{}
		switch {
		case strings.HasPrefix(p.GetRoom(), "secret"):
			r.Refusal = &corralv1.Refusal{Code: corralv1.Code_CODE_FORBIDDEN, Reason: "members only"}
		case strings.HasPrefix(p.GetRoom(), "game:info") && p.GetUserId() != "carol":
			r.Info = []byte(fmt.Sprintf(`{"name":%q}`, p.GetUserId()))
		case p.GetRoom() == "game:huge":
			r.Info = []byte(`"` + strings.Repeat("x", hooks.MaxInfo) + `"`)
		}
		res.Results = append(res.Results, r)
	}
	return res, nil
}

func (b *appBackend) Publish(ctx context.Context, req *corralv1.HooksServicePublishRequest) (*corralv1.HooksServicePublishResponse, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.writes = append(b.writes, fmt.Sprintf("%s %s %s", req.GetKind(), req.GetKey(), req.GetPayload()))
	b.mu.Unlock()
	if req.GetKind() == corralv1.PublishKind_PUBLISH_KIND_DELETE_STATE && req.GetKey() == "locked" {
		return &corralv1.HooksServicePublishResponse{Refusal: &corralv1.Refusal{Code: corralv1.Code_CODE_FORBIDDEN, Reason: "locked keys stay"}}, nil
	}
	switch string(req.GetPayload()) {
	case `"bad"`:
		return &corralv1.HooksServicePublishResponse{Refusal: &corralv1.Refusal{Code: corralv1.Code_CODE_INVALID_ARGUMENT, Reason: "no bad words"}}, nil
	case `"shout"`:
		return &corralv1.HooksServicePublishResponse{Replace: true, Payload: []byte(`"SHOUT"`)}, nil
	}
	return &corralv1.HooksServicePublishResponse{}, nil
}

func (b *appBackend) Call(ctx context.Context, req *corralv1.CallRequest) (*corralv1.CallResponse, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	if req.GetMethod() != "echo" {
		return &corralv1.CallResponse{Refusal: &corralv1.Refusal{Code: 13, Reason: "no such method"}}, nil
	}
	return &corralv1.CallResponse{Payload: []byte(fmt.Sprintf(`{"user":%q,"got":%s}`, req.GetUserId(), req.GetPayload()))}, nil
}

// serveBackend serves b over h2c and returns its URL.
func serveBackend(t *testing.T, b *appBackend) string {
	t.Helper()
	rpc := connect.NewServer()
	corralv1connect.RegisterHooksServiceHandler(rpc, b)
	mux := http.NewServeMux()
	connecthttp.Mount(mux, rpc)
	srv := httptest.NewUnstartedServer(mux)
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = p
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// withHooks turns every hook on against url (rooms: joins of "secret*"
// and "game:*", publishes of "chat:*").
func withHooks(url string, tune func(*hooks.Config)) func(*server.Options) {
	return func(o *server.Options) {
		o.Hooks = hooks.Config{Hooks: config.Hooks{URL: url, Timeout: 5 * time.Second}, Policy: hooks.Policy{
			HookPolicy: config.HookPolicy{Connect: true, Refresh: true, Call: true},
			Join:       []string{"secret*", "game:*"}, Publish: []string{"chat:*"},
		}}
		o.Edge.HookCookies = []string{"sid"}
		if tune != nil {
			tune(&o.Hooks)
		}
	}
}

func hookDial(t *testing.T, d *deployment, token string) (*client.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := http.Header{}
	h.Set("Cookie", "sid=cookie-1; other=x")
	c, err := client.Dial(ctx, d.wsURL, client.Options{Token: token, Encoding: protocol.JSON, Header: h})
	if err == nil {
		t.Cleanup(c.CloseNow)
	}
	return c, err
}

func callFrame(id uint64, method, payload string) *corralv1.ClientFrame {
	return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Call{Call: &corralv1.Call{Id: id, Method: method, Payload: []byte(payload)}}}
}

// TestHooks: each hook allowed and refused, in one process and split.
func TestHooks(t *testing.T) {
	for _, mode := range []string{"serve", "split"} {
		t.Run(mode, func(t *testing.T) {
			b := &appBackend{}
			d := start(t, mode, nil, withHooks(serveBackend(t, b), nil))
			ctx := testCtx(t)

			// Connect refused: the backend's code and reason.
			if _, err := hookDial(t, d, "banned"); err == nil || !strings.Contains(err.Error(), "banned") {
				t.Fatalf("banned dial: %v, want the backend's refusal", err)
			}
			// Connect allowed: the user, the cookie, the initial room.
			c, err := hookDial(t, d, "user:alice")
			if err != nil {
				t.Fatal(err)
			}
			if c.Welcome().GetUserId() != "alice" {
				t.Fatalf("welcome %v", c.Welcome())
			}
			if got := b.cookie.Load(); got != "cookie-1" {
				t.Fatalf("cookie seen by Connect: %v", got)
			}
			if j := nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return f.GetJoined() != nil }).GetJoined(); j.GetRoom() != "inbox:alice" {
				t.Fatalf("initial room %v, want inbox:alice", j)
			}

			// Join: refused and allowed by the backend; a room outside
			// the Policy's Join patterns do not ask it.
			_, err = c.Join(ctx, "secret-club", 0, "")
			wantCode(t, err, corralv1.Code_CODE_FORBIDDEN)
			if _, err := c.Join(ctx, "game:1", 0, ""); err != nil {
				t.Fatal(err)
			}
			calls := b.joinCalls.Load()
			if _, err := c.Join(ctx, "chat:1", 0, ""); err != nil {
				t.Fatal(err)
			}
			if b.joinCalls.Load() != calls {
				t.Fatal("a join outside the Join patterns called the backend")
			}

			// Publish: refused, replaced, passed.
			_, err = c.Publish(ctx, "chat:1", "p1", []byte(`"bad"`))
			wantCode(t, err, corralv1.Code_CODE_INVALID_ARGUMENT)
			if _, err := c.Publish(ctx, "chat:1", "p2", []byte(`"shout"`)); err != nil {
				t.Fatal(err)
			}
			m := nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return f.GetMessage() != nil }).GetMessage()
			if string(m.GetPayload()) != `"SHOUT"` || m.GetSeq() != 1 {
				t.Fatalf("message %v, want the backend's payload at seq 1", m)
			}

			// Call: answered, refused with a code outside the client table
			// (mapped to 4403).
			if err := c.Send(ctx, callFrame(7, "echo", `{"x":1}`)); err != nil {
				t.Fatal(err)
			}
			r := nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return f.GetCallResult() != nil }).GetCallResult()
			if r.GetId() != 7 || !bytes.Contains(r.GetPayload(), []byte(`"user":"alice"`)) || r.GetError() != nil {
				t.Fatalf("call result %v", r)
			}
			if err := c.Send(ctx, callFrame(8, "nope", `1`)); err != nil {
				t.Fatal(err)
			}
			r = nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return f.GetCallResult() != nil }).GetCallResult()
			if r.GetId() != 8 || r.GetError().GetCode() != corralv1.Code_CODE_FORBIDDEN {
				t.Fatalf("refused call result %v", r)
			}

			// The Go SDK's Call.
			if got, err := c.Call(ctx, "echo", []byte(`2`)); err != nil || !bytes.Contains(got, []byte(`"got":2`)) {
				t.Fatalf("client Call: %s %v", got, err)
			}
			_, err = c.Call(ctx, "nope", nil)
			wantCode(t, err, corralv1.Code_CODE_FORBIDDEN)
			// The Session's Call, on its current connection.
			sess, err := client.Connect(ctx, d.wsURL, client.SessionOptions{Options: client.Options{Token: "user:sam", Encoding: protocol.Proto}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sess.Close() })
			if got, err := sess.Call(ctx, "echo", []byte(`3`)); err != nil || !bytes.Contains(got, []byte(`"user":"sam","got":3`)) {
				t.Fatalf("Session.Call: %s %v", got, err)
			}
			_, err = sess.Call(ctx, "nope", nil)
			wantCode(t, err, corralv1.Code_CODE_FORBIDDEN)

			// Refresh: refused, then allowed.
			_, err = c.Refresh(ctx, "old")
			wantCode(t, err, corralv1.Code_CODE_UNAUTHENTICATED)
			if rf, err := c.Refresh(ctx, "renew"); err != nil || rf.GetExpiresUnix() == 0 {
				t.Fatalf("refresh: %v %v", rf, err)
			}

			// Backend down: retry-later codes, never the backend's words.
			b.down.Store(true)
			_, err = c.Join(ctx, "game:2", 0, "")
			wantCode(t, err, corralv1.Code_CODE_UNAVAILABLE)
			_, err = c.Publish(ctx, "chat:1", "p3", []byte(`"hi"`))
			wantCode(t, err, corralv1.Code_CODE_UNAVAILABLE)
			if strings.Contains(err.Error(), "10.0.0.7") {
				t.Fatalf("the client saw the backend's error: %v", err)
			}
			if err := c.Send(ctx, callFrame(9, "echo", `1`)); err != nil {
				t.Fatal(err)
			}
			r = nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return f.GetCallResult().GetId() == 9 }).GetCallResult()
			if r.GetError().GetCode() != corralv1.Code_CODE_UNAVAILABLE || r.GetError().GetRetryAfterMs() == 0 {
				t.Fatalf("call with the backend down: %v", r)
			}
			if _, err := hookDial(t, d, "user:bob"); err == nil || !strings.Contains(err.Error(), "4103") {
				t.Fatalf("dial with the backend down: %v, want close 4103", err)
			}

			// The metrics of docs/HOOKS.md (one registry in serve mode).
			if mode == "serve" {
				text := scrape(t, coreBase(d))
				for _, series := range []string{
					`corral_hook_calls_total{hook="join",result="refused"}`,
					`corral_hook_calls_total{hook="publish",result="refused"}`,
					`corral_hook_calls_total{hook="connect",result="allowed"}`,
					`corral_hook_errors_total{hook="join",kind="backend"}`,
					`corral_hook_batch_size_count{hook="join"}`,
					`corral_hook_duration_seconds_count{hook="call"}`,
					`corral_core_refused_total{reason="hook_unavailable"}`,
				} {
					if sample(t, text, series) < 1 {
						t.Errorf("%s not counted", series)
					}
				}
				if !strings.Contains(text, `corral_hook_breaker_state{hook="refresh"} 0`) {
					t.Error("no breaker state for the refresh hook")
				}
			}
		})
	}
}

// TestHooksResumeStorm: many sessions resume at once into rooms the Join
// hook decides; the backend gets at most one call per 100 resumed rooms,
// every room comes back and replays, once, the message it missed.
func TestHooksResumeStorm(t *testing.T) {
	const sessions, rooms = 500, 4
	b := &appBackend{}
	d := start(t, "serve", nil, withHooks(serveBackend(t, b), func(c *hooks.Config) {
		c.Policy.Connect = false // dev tokens: the storm is about Join
		// Margin for a loaded test machine, where 500 dials take seconds:
		// the default 2 ms made 10-14 calls here for 2,000 rooms.
		c.JoinWindow = 10 * time.Millisecond
	}))
	ctx := testCtx(t)
	welcomes := make([]*corralv1.Welcome, sessions)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 50)
	for i := range sessions {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			c := dial(t, d, fmt.Sprint("u", i), protocol.Proto)
			for r := range rooms {
				if _, err := c.Join(ctx, fmt.Sprintf("game:%d", (i+r)%50), 0, ""); err != nil {
					t.Error(err)
					return
				}
			}
			welcomes[i] = c.Welcome()
			c.CloseNow()
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// While everyone is away, each room gets a message: every resumed
	// room must replay it.
	for r := range 50 {
		if _, err := d.api.Publish(ctx, &corralv1.PublishRequest{Room: fmt.Sprintf("game:%d", r), Payload: []byte(`"away"`)}); err != nil {
			t.Fatal(err)
		}
	}
	before := b.joinCalls.Load()
	var resumed, replayed atomic.Int64
	for i := range sessions {
		wg.Go(func() {
			rs := &corralv1.Resume{SessionId: welcomes[i].GetSessionId(), ResumeToken: welcomes[i].GetResumeToken()}
			c, err := client.Dial(ctx, d.wsURL, client.Options{Token: fmt.Sprint("u", i), Encoding: protocol.Proto, Resume: rs})
			if err != nil {
				t.Error(err)
				return
			}
			defer c.CloseNow()
			missed := map[string]bool{}
			for n := 0; n < rooms || len(missed) < rooms; {
				select {
				case f, ok := <-c.Frames():
					if !ok {
						t.Errorf("session %d closed: %v", i, c.Err())
						return
					}
					if f.GetLeft() != nil {
						t.Errorf("session %d lost %v", i, f.GetLeft())
						return
					}
					if f.GetJoined() != nil {
						n++
					}
					if m := f.GetMessage(); string(m.GetPayload()) == `"away"` {
						if missed[m.GetRoom()] {
							t.Errorf("session %d: %s replayed twice", i, m.GetRoom())
						}
						missed[m.GetRoom()] = true
					}
				case <-ctx.Done():
					t.Errorf("session %d: %d of %d rooms back", i, n, rooms)
					return
				}
			}
			resumed.Add(rooms)
			replayed.Add(int64(len(missed)))
		})
	}
	wg.Wait()
	calls := b.joinCalls.Load() - before
	t.Logf("%d rooms resumed with %d Join calls", resumed.Load(), calls)
	if resumed.Load() != sessions*rooms || replayed.Load() != sessions*rooms {
		t.Fatalf("%d rooms resumed and %d missed messages replayed, want %d each", resumed.Load(), replayed.Load(), sessions*rooms)
	}
	if calls > sessions*rooms/100 {
		t.Fatalf("%d Join calls for %d resumed rooms, want at most 1 per 100", calls, sessions*rooms)
	}
}

// TestHooksSlowBackend: a Join hook slower than its timeout answers 4103
// in time, and a bystander in rooms without hooks is unaffected.
func TestHooksSlowBackend(t *testing.T) {
	b := &appBackend{}
	b.slow.Store(int64(time.Minute))
	d := start(t, "serve", nil, withHooks(serveBackend(t, b), func(c *hooks.Config) {
		c.Policy.Connect = false
		c.Timeout = 300 * time.Millisecond
	}))
	ctx := testCtx(t)
	bystander := dial(t, d, "carol", protocol.Proto)
	if _, err := bystander.Join(ctx, "lobby", 0, ""); err != nil {
		t.Fatal(err)
	}
	victim := dial(t, d, "dave", protocol.Proto)
	start := time.Now()
	_, err := victim.Join(ctx, "game:slow", 0, "")
	wantCode(t, err, corralv1.Code_CODE_UNAVAILABLE)
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("the refusal took %v", d)
	}
	for i := range 20 {
		if _, err := bystander.Publish(ctx, "lobby", fmt.Sprint("m", i), []byte(`1`)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHooksAllowKnown: with the backend down, allow-known lets a resume
// keep its rooms, and still refuses new joins.
func TestHooksAllowKnown(t *testing.T) {
	b := &appBackend{}
	d := start(t, "serve", nil, withHooks(serveBackend(t, b), func(c *hooks.Config) {
		c.Policy.Connect = false
		c.Policy.JoinPolicy = roomclass.AllowKnown
	}))
	ctx := testCtx(t)
	c := dial(t, d, "erin", protocol.Proto)
	for _, room := range []string{"game:a", "game:b"} {
		if _, err := c.Join(ctx, room, 0, ""); err != nil {
			t.Fatal(err)
		}
	}
	w := c.Welcome()
	c.CloseNow()
	b.down.Store(true)
	next, joined, left := resumeRooms(t, d, "erin", w, []string{"game:a", "game:b"}, 2)
	if len(joined) != 2 || len(left) != 0 {
		t.Fatalf("resume with the backend down: joined %v, left %v", joined, left)
	}
	_, err := next.Join(ctx, "game:c", 0, "")
	wantCode(t, err, corralv1.Code_CODE_UNAVAILABLE)
}

// TestHooksSeveralCores: an edge linked to two cores on one Redis, every
// process with hooks: each core asks the backend about its sessions'
// joins and publishes, and a rewritten publish reaches the room's members
// on both cores.
func TestHooksSeveralCores(t *testing.T) {
	b := &appBackend{}
	url := serveBackend(t, b)
	redisURL := "redis://" + redistest.Start(t)
	prefix := redistest.Prefix(t)
	var urls []string
	for range 2 {
		o := server.Options{Mode: server.CoreOnly, Node: config.Node{Addr: "127.0.0.1:0", RedisURL: redisURL, RedisPrefix: prefix}, Logger: quietLogger(),
			APIInsecure: true}
		withHooks(url, nil)(&o)
		n, err := server.Start(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close(context.Background()) })
		urls = append(urls, "http://"+n.Addr())
	}
	eo := server.Options{Mode: server.EdgeOnly, Node: config.Node{Addr: "127.0.0.1:0", CoreURL: strings.Join(urls, ",")},
		Auth: auth.Dev{}, Logger: quietLogger()}
	withoutRateLimits(withHooks(url, nil))(&eo)
	edgeNode, err := server.Start(eo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { edgeNode.Close(context.Background()) })
	readytest.Wait(t, "http://"+edgeNode.Addr()+"/readyz")
	d := &deployment{wsURL: "ws://" + edgeNode.Addr() + "/ws"}
	ctx := testCtx(t)

	const members = 8 // spread over the edge's links to both cores
	var conns []*client.Conn
	for i := range members {
		c, err := hookDial(t, d, fmt.Sprint("user:u", i))
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Join(ctx, "secret-x", 0, "")
		wantCode(t, err, corralv1.Code_CODE_FORBIDDEN)
		if _, err := c.Join(ctx, "chat:all", 0, ""); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	if _, err := conns[0].Publish(ctx, "chat:all", "s1", []byte(`"shout"`)); err != nil {
		t.Fatal(err)
	}
	_, err = conns[members-1].Publish(ctx, "chat:all", "b1", []byte(`"bad"`))
	wantCode(t, err, corralv1.Code_CODE_INVALID_ARGUMENT)
	for i, c := range conns {
		m := nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return f.GetMessage().GetRoom() == "chat:all" }).GetMessage()
		if string(m.GetPayload()) != `"SHOUT"` || m.GetSeq() != 1 {
			t.Fatalf("member %d got %v, want the backend's payload at seq 1", i, m)
		}
	}
}

// TestHooksByClass: a room class's hooks (hooks: {join, publish}) send its
// rooms to the backend with no Policy Join/Publish pattern, and
// a class that asks for a hook without a backend stops the server from
// starting instead of admitting its rooms unchecked.
func TestHooksByClass(t *testing.T) {
	const file = "rooms:\n  - name: members\n    match: \"secret*\"\n    hooks: {join: true}\n  - name: moderated\n    match: \"mod:*\"\n    hooks: {publish: true}\n"
	b := &appBackend{}
	_, classes := classFile(t, file)
	hooked := withHooks(serveBackend(t, b), func(c *hooks.Config) { c.Policy.Join, c.Policy.Publish = nil, nil })
	d := start(t, "serve", nil, func(o *server.Options) { hooked(o); classes(o) })
	ctx := testCtx(t)
	c, err := hookDial(t, d, "user:alice")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Join(ctx, "secret-club", 0, "")
	wantCode(t, err, corralv1.Code_CODE_FORBIDDEN)
	calls := b.joinCalls.Load()
	if calls == 0 {
		t.Fatal("the class's join hook was not called")
	}
	if _, err := c.Join(ctx, "game:1", 0, ""); err != nil {
		t.Fatal(err)
	}
	if got := b.joinCalls.Load(); got != calls {
		t.Fatalf("a room of no hooked class asked the backend (%d calls, want %d)", got, calls)
	}
	if _, err := c.Join(ctx, "mod:1", 0, ""); err != nil {
		t.Fatal(err)
	}
	_, err = c.Publish(ctx, "mod:1", "p1", []byte(`"bad"`))
	wantCode(t, err, corralv1.Code_CODE_INVALID_ARGUMENT)
	if _, err := c.Publish(ctx, "mod:1", "p2", []byte(`"fine"`)); err != nil {
		t.Fatal(err)
	}

	// No backend: the server refuses to start.
	_, noBackend := classFile(t, file)
	o := server.Options{Mode: server.Serve, Node: config.Node{Addr: "127.0.0.1:0"}, Auth: auth.Dev{}, Logger: quietLogger()}
	noBackend(&o)
	if n, err := server.Start(o); err == nil {
		n.Close(ctx)
		t.Fatal("a class with hooks started without a hooks backend")
	} else if !strings.Contains(err.Error(), "--hooks-url") {
		t.Fatalf("start: %v, want it to name --hooks-url", err)
	}
}

// TestHooksMemberInfo: the Join hook's info is shown to other members in
// presence (snapshot and diff) and as Message.sender_info of live and
// replayed messages; the Connect hook's info stands in when Join gives
// none; an API publish has none; oversized info refuses the join. JSON
// and proto clients; memory stores, Redis (presence and history), and
// split mode (the Connect info crosses the edge-core link).
func TestHooksMemberInfo(t *testing.T) {
	for _, mode := range []string{"serve", "redis", "split"} {
		t.Run(mode, func(t *testing.T) { testHooksMemberInfo(t, mode) })
	}
}

func testHooksMemberInfo(t *testing.T, mode string) {
	b := &appBackend{}
	d := start(t, mode, nil, withHooks(serveBackend(t, b), nil))
	ctx := testCtx(t)
	dialEnc := func(user string, enc protocol.Encoding) *client.Conn {
		c, err := client.Dial(ctx, d.wsURL, client.Options{Token: "user:" + user, Encoding: enc})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.CloseNow)
		return c
	}
	alice, bob, carol := dialEnc("alice", protocol.JSON), dialEnc("bob", protocol.Proto), dialEnc("carol", protocol.JSON)

	aw := joinPresence(t, alice, "game:info", "")
	aw.until(10*time.Second, "alice in her snapshot", func(r *client.Roster) bool { return r.Get("alice") != nil })
	if got := string(aw.roster.Get("alice").GetInfo()); got != `{"name":"alice"}` {
		t.Fatalf("alice's info in the snapshot: %q", got)
	}
	bw := joinPresence(t, bob, "game:info", "")
	bw.until(10*time.Second, "alice in bob's snapshot", func(r *client.Roster) bool { return r.Get("alice") != nil && r.Get("bob") != nil })
	if got := string(bw.roster.Get("alice").GetInfo()); got != `{"name":"alice"}` {
		t.Fatalf("alice's info in bob's snapshot (proto): %q", got)
	}
	joinPresence(t, carol, "game:info", "")
	aw.until(10*time.Second, "carol's join diff", func(r *client.Roster) bool { return r.Get("carol") != nil && r.Get("bob") != nil })
	if got := string(aw.roster.Get("carol").GetInfo()); got != `{"conn":"carol"}` {
		t.Fatalf("carol's info (Connect's, Join gave none): %q", got)
	}
	if got := string(aw.roster.Get("bob").GetInfo()); got != `{"name":"bob"}` {
		t.Fatalf("bob's info in alice's diff: %q", got)
	}

	// Live messages carry the sender's info in the room.
	if _, err := bob.Publish(ctx, "game:info", "m1", []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	if _, err := carol.Publish(ctx, "game:info", "m2", []byte(`2`)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.api.Publish(ctx, &corralv1.PublishRequest{Room: "game:info", Payload: []byte(`3`)}); err != nil {
		t.Fatal(err)
	}
	want := map[uint64]string{1: `{"name":"bob"}`, 2: `{"conn":"carol"}`, 3: ""}
	for seq := uint64(1); seq <= 3; seq++ {
		m := nextFrame(t, alice, func(f *corralv1.ServerFrame) bool { return f.GetMessage().GetSeq() == seq }).GetMessage()
		if string(m.GetSenderInfo()) != want[seq] {
			t.Fatalf("live message %d: sender_info %q, want %q", seq, m.GetSenderInfo(), want[seq])
		}
	}
	// Replayed messages carry it too (stored with the message).
	jd, err := dialEnc("dave", protocol.JSON).Join(ctx, "game:info", 0, "")
	if err != nil {
		t.Fatal(err)
	}
	erin := dialEnc("erin", protocol.Proto)
	jr, err := erin.Join(ctx, "game:info", 0, jd.GetEpoch())
	if err != nil {
		t.Fatal(err)
	}
	if !jr.GetReplay() {
		t.Fatalf("join from seq 0 of epoch %q: no replay: %v", jd.GetEpoch(), jr)
	}
	got := map[uint64]string{}
	for len(got) < 3 {
		f := nextFrame(t, erin, func(f *corralv1.ServerFrame) bool { return f.GetBatch() != nil || f.GetMessage() != nil })
		for _, bf := range append(f.GetBatch().GetFrames(), f) {
			if m := bf.GetMessage(); m != nil {
				got[m.GetSeq()] = string(m.GetSenderInfo())
			}
		}
	}
	for seq, w := range want {
		if got[seq] != w {
			t.Fatalf("replayed message %d: sender_info %q, want %q", seq, got[seq], w)
		}
	}

	// A resumed session keeps its info: the Join hook is asked again for
	// the resumed room (without it the Connect info would show).
	frank := dialEnc("frank", protocol.JSON)
	if _, err := frank.Join(ctx, "game:info", 0, ""); err != nil {
		t.Fatal(err)
	}
	w := frank.Welcome()
	before := attached(t, d)
	frank.CloseNow()
	waitDetached(t, d, before) // let the core see the drop
	back, err := client.Dial(ctx, d.wsURL, client.Options{Token: "user:frank", Encoding: protocol.JSON, Resume: &corralv1.Resume{
		SessionId: w.GetSessionId(), ResumeToken: w.GetResumeToken(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(back.CloseNow)
	nextFrame(t, back, func(f *corralv1.ServerFrame) bool {
		return f.GetJoined().GetRoom() == "game:info" && f.GetJoined().GetResumed()
	})
	if _, err := back.Publish(ctx, "game:info", "f1", []byte(`4`)); err != nil {
		t.Fatal(err)
	}
	if m := nextFrame(t, alice, func(f *corralv1.ServerFrame) bool { return f.GetMessage().GetSeq() == 4 }).GetMessage(); string(m.GetSenderInfo()) != `{"name":"frank"}` {
		t.Fatalf("message after a resume: sender_info %q", m.GetSenderInfo())
	}

	// Oversized info: the join is refused, the bad answer counted.
	_, err = alice.Join(ctx, "game:huge", 0, "")
	wantCode(t, err, corralv1.Code_CODE_FORBIDDEN)
	if sample(t, scrape(t, coreBase(d)), `corral_hook_errors_total{hook="join",kind="bad_response"}`) < 1 {
		t.Error("oversized member info not counted as a bad response")
	}
}

// TestHooksStateWrites: a class with a publish hook sees a member's
// keyed-state deletes as it sees its sets (kind and key in the request,
// a delete without payload) and its growing messages' chunks; a refused
// delete is answered as a refused set (the hook's code and reason, ref =
// the delete's ref) and deletes nothing.
func TestHooksStateWrites(t *testing.T) {
	const file = "rooms:\n  - name: moderated\n    match: \"mod:*\"\n    hooks: {publish: true}\n    state: {max-keys: 10}\n"
	b := &appBackend{}
	_, classes := classFile(t, file)
	hooked := withHooks(serveBackend(t, b), func(c *hooks.Config) { c.Policy.Join, c.Policy.Publish = nil, nil })
	d := start(t, "serve", nil, func(o *server.Options) { hooked(o); classes(o) })
	ctx := testCtx(t)
	c, err := hookDial(t, d, "user:alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Join(ctx, "mod:1", 0, ""); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"locked", "free"} {
		if _, err := c.SetState(ctx, "mod:1", key, []byte(`1`), client.StateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = c.SetState(ctx, "mod:1", "x", []byte(`"bad"`), client.StateOptions{})
	wantCode(t, err, corralv1.Code_CODE_INVALID_ARGUMENT)
	_, err = c.DeleteState(ctx, "mod:1", "locked", client.StateOptions{})
	wantCode(t, err, corralv1.Code_CODE_FORBIDDEN)
	if u, err := c.DeleteState(ctx, "mod:1", "free", client.StateOptions{}); err != nil || !u.GetDeleted() {
		t.Fatalf("delete of a free key: %v, %v", u, err)
	}
	if _, err := c.Append(ctx, "mod:1", "m1", []byte(`"hi"`), client.AppendOptions{Final: true}); err != nil {
		t.Fatal(err)
	}
	res, err := d.api.GetState(ctx, &corralv1.GetStateRequest{Room: "mod:1"})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range res.GetSnapshot().GetEntries() {
		keys = append(keys, e.GetKey())
	}
	if strings.Join(keys, ",") != "locked" {
		t.Errorf("the room's keys: %v, want only locked (its refused delete deleted nothing)", keys)
	}
	b.mu.Lock()
	got := strings.Join(b.writes, "; ")
	b.mu.Unlock()
	want := "PUBLISH_KIND_SET_STATE locked 1; PUBLISH_KIND_SET_STATE free 1; PUBLISH_KIND_SET_STATE x \"bad\"; " +
		"PUBLISH_KIND_DELETE_STATE locked ; PUBLISH_KIND_DELETE_STATE free ; PUBLISH_KIND_APPEND  \"hi\""
	if got != want {
		t.Errorf("the hook saw\n  %s\nwant\n  %s", got, want)
	}
}
