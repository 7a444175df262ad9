package integration_test

import (
	"testing"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/hooks"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/roomclass"
	"github.com/corral-rt/corral/server"
)

// Failure policies and the join cache per room class (issue 20 item 3,
// docs/HOOKS.md "When the backend is down"): with the backend down each
// hook's policy gives the client the documented code at once, never a
// hang, and counts what it lets through unchecked.

// policyClasses: "known:*" rooms keep resumes (allow-known), "open:*"
// rooms take publishes unchecked, "cached:*" and "secret-cached*" rooms
// cache admissions an hour; everything else is the default class (closed,
// no cache).
const policyClasses = `rooms:
  - name: known
    match: "known:*"
    hooks: {join: true, join-policy: allow-known}
  - name: open
    match: "open:*"
    hooks: {publish: true, publish-policy: open}
  - name: cached
    match: ["cached:*", "secret-cached*"]
    hooks: {join: true, join-cache-ttl: 1h}
`

// TestHooksJoinPolicyByClass: with the backend down, a resume keeps the
// rooms of an allow-known class and is refused (Left 4103, kept in the
// store) those of a closed one; a new join is refused with 4103 and a
// retry delay under either.
func TestHooksJoinPolicyByClass(t *testing.T) {
	b := &appBackend{}
	_, classes := classFile(t, policyClasses)
	hooked := withHooks(serveBackend(t, b), func(c *hooks.Config) { c.Policy.Connect = false })
	d := start(t, "serve", nil, func(o *server.Options) { hooked(o); classes(o) })
	ctx := testCtx(t)
	c := dial(t, d, "erin", protocol.Proto)
	rooms := []string{"known:a", "game:a"} // game:* is hooked by the Policy's Join patterns, default class
	for _, room := range rooms {
		if _, err := c.Join(ctx, room, 0, ""); err != nil {
			t.Fatal(err)
		}
	}
	w := c.Welcome()
	c.CloseNow()
	b.down.Store(true)
	next, joined, left := resumeRooms(t, d, "erin", w, rooms, 2)
	if !joined["known:a"] || left["game:a"] != corralv1.Code_CODE_UNAVAILABLE {
		t.Fatalf("resume with the backend down: joined %v, left %v; want known:a kept, game:a left with 4103", joined, left)
	}
	for _, room := range []string{"known:b", "game:b"} {
		_, err := next.Join(ctx, room, 0, "")
		if e := serverErr(t, err); e.GetCode() != corralv1.Code_CODE_UNAVAILABLE || e.GetRetryAfterMs() == 0 {
			t.Fatalf("join %s with the backend down: %v, want 4103 with retryAfterMs", room, e)
		}
	}
	text := scrape(t, coreBase(d))
	if got := sample(t, text, `corral_hook_unchecked_total{hook="join"}`); got != 1 {
		t.Fatalf("corral_hook_unchecked_total{hook=\"join\"} = %v, want 1 (known:a)", got)
	}
}

// TestHooksPublishPolicyByClass: with the backend down, a publish to a
// class with publish-policy open is stored as sent and counted; one to a
// closed room is refused with 4103 and a retry delay, and a retry with
// the same id goes through once the backend is back.
func TestHooksPublishPolicyByClass(t *testing.T) {
	b := &appBackend{}
	_, classes := classFile(t, policyClasses)
	hooked := withHooks(serveBackend(t, b), func(c *hooks.Config) { c.Policy.Connect = false })
	d := start(t, "serve", nil, func(o *server.Options) { hooked(o); classes(o) })
	ctx := testCtx(t)
	c := dial(t, d, "fay", protocol.Proto)
	for _, room := range []string{"open:1", "chat:1"} {
		if _, err := c.Join(ctx, room, 0, ""); err != nil {
			t.Fatal(err)
		}
	}
	b.down.Store(true)
	if _, err := c.Publish(ctx, "open:1", "o1", []byte(`"shout"`)); err != nil {
		t.Fatalf("publish-policy open with the backend down: %v", err)
	}
	m := nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return f.GetMessage().GetRoom() == "open:1" }).GetMessage()
	if string(m.GetPayload()) != `"shout"` {
		t.Fatalf("unchecked publish delivered %s, want the client's payload", m.GetPayload())
	}
	_, err := c.Publish(ctx, "chat:1", "c1", []byte(`"hi"`))
	if e := serverErr(t, err); e.GetCode() != corralv1.Code_CODE_UNAVAILABLE || e.GetRetryAfterMs() == 0 {
		t.Fatalf("publish to a closed room with the backend down: %v, want 4103 with retryAfterMs", e)
	}
	text := scrape(t, coreBase(d))
	if got := sample(t, text, `corral_hook_unchecked_total{hook="publish"}`); got != 1 {
		t.Fatalf("corral_hook_unchecked_total{hook=\"publish\"} = %v, want 1", got)
	}
	b.down.Store(false)
	// The breaker may be open after the failures: retry as told.
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := c.Publish(ctx, "chat:1", "c1", []byte(`"hi"`))
		if err == nil {
			break
		}
		e := serverErr(t, err)
		if e.GetCode() != corralv1.Code_CODE_UNAVAILABLE || time.Now().After(deadline) {
			t.Fatalf("retried publish: %v", e)
		}
		time.Sleep(time.Duration(e.GetRetryAfterMs()) * time.Millisecond)
	}
}

// TestHooksRefreshPolicy: with the backend down, a refresh under closed
// closes the connection with 4103 and a reconnect delay; under
// allow-known it is answered 4103 with retryAfterMs, the connection
// outlives its token's expiry by the grace, then closes with 4104.
func TestHooksRefreshPolicy(t *testing.T) {
	for _, policy := range []roomclass.Failure{roomclass.Closed, roomclass.AllowKnown} {
		t.Run(string(policy), func(t *testing.T) {
			b := &appBackend{}
			const grace = 2 * time.Second
			d := start(t, "serve", nil, withHooks(serveBackend(t, b), func(c *hooks.Config) {
				c.Policy.RefreshPolicy, c.Policy.RefreshGrace = policy, grace
			}))
			ctx := testCtx(t)
			exp := time.Now().Add(2 * time.Second).Truncate(time.Second).Add(time.Second)
			b.expires.Store(exp.Unix())
			c, err := hookDial(t, d, "user:gil")
			if err != nil {
				t.Fatal(err)
			}
			if c.Welcome().GetExpiresUnix() != exp.Unix() {
				t.Fatalf("welcome.expiresUnix %d, want %d", c.Welcome().GetExpiresUnix(), exp.Unix())
			}
			if _, err := c.Join(ctx, "lobby", 0, ""); err != nil {
				t.Fatal(err)
			}
			b.down.Store(true)
			_, err = c.Refresh(ctx, "renew")
			if policy == roomclass.Closed {
				ce := waitClosed(t, c)
				if int(ce.Code) != int(corralv1.Code_CODE_UNAVAILABLE) || ce.Hint.GetDelayMs() == 0 {
					t.Fatalf("closed with %v (hint %v), want 4103 with a delay", ce, ce.Hint)
				}
				return
			}
			if e := serverErr(t, err); e.GetCode() != corralv1.Code_CODE_UNAVAILABLE || e.GetRetryAfterMs() == 0 {
				t.Fatalf("refresh with the backend down: %v, want 4103 with retryAfterMs", e)
			}
			// Past the token's exp, within the grace: still open.
			time.Sleep(time.Until(exp.Add(grace / 4)))
			if _, err := c.Publish(ctx, "lobby", "after-exp", []byte(`1`)); err != nil {
				t.Fatalf("publish within the grace: %v", err)
			}
			wantExpired(t, c)
			if time.Now().Before(exp.Add(grace)) {
				t.Fatal("closed before the token's expiry plus the grace")
			}
			text := scrape(t, coreBase(d))
			if got := sample(t, text, `corral_hook_unchecked_total{hook="refresh"}`); got != 1 {
				t.Fatalf("corral_hook_unchecked_total{hook=\"refresh\"} = %v, want 1", got)
			}
		})
	}
}

// TestHooksJoinCacheByClass: in a class with hooks.join-cache-ttl, a
// second join of the same user within the TTL makes no backend call; a
// refusal is asked again; a room of the default class (no TTL) is asked
// every time.
func TestHooksJoinCacheByClass(t *testing.T) {
	b := &appBackend{}
	_, classes := classFile(t, policyClasses)
	hooked := withHooks(serveBackend(t, b), func(c *hooks.Config) { c.Policy.Connect = false })
	d := start(t, "serve", nil, func(o *server.Options) { hooked(o); classes(o) })
	ctx := testCtx(t)
	for _, tc := range []struct {
		room      string
		refused   bool
		wantPairs int64 // backend pairs for two joins
	}{
		{"cached:1", false, 1},
		{"secret-cached", true, 2},
		{"game:1", false, 2},
	} {
		before := b.joinPairs.Load()
		for i := range 2 {
			c := dial(t, d, "hal", protocol.Proto)
			_, err := c.Join(ctx, tc.room, 0, "")
			switch {
			case tc.refused:
				wantCode(t, err, corralv1.Code_CODE_FORBIDDEN)
			case err != nil:
				t.Fatalf("%s join %d: %v", tc.room, i, err)
			}
		}
		if got := b.joinPairs.Load() - before; got != tc.wantPairs {
			t.Errorf("%s: %d pairs asked of the backend for two joins, want %d", tc.room, got, tc.wantPairs)
		}
	}
	text := scrape(t, coreBase(d))
	if got := sample(t, text, `corral_hook_join_cache_total{result="hit"}`); got != 1 {
		t.Errorf("cache hits %v, want 1", got)
	}
}
