package integration_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/server"
	"github.com/golang-jwt/jwt/v5"
)

// Token lifetime (docs/SECURITY.md): a connection is closed with
// CODE_TOKEN_EXPIRED at its token's exp, unless the client refreshed the
// token first; a refresh swaps the identity and re-checks the rooms.

const refreshSecret = "integration-refresh-secret-0123456789"

func refreshAuth(t *testing.T) auth.Authenticator {
	t.Helper()
	a, err := auth.NewJWT(auth.JWTConfig{HMACSecret: []byte(refreshSecret)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// userToken is a token for user granting rooms (join and publish),
// expiring at exp.
func userToken(t *testing.T, user string, exp time.Time, rooms ...string) string {
	return token(t, refreshSecret, jwt.MapClaims{"sub": user, "exp": exp.Unix(), "rooms": rooms, "publish": rooms})
}

func dialToken(t *testing.T, d *deployment, tok string) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, d.wsURL, client.Options{Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// wantExpired waits for c's close and checks it says CODE_TOKEN_EXPIRED.
func wantExpired(t *testing.T, c *client.Conn) {
	t.Helper()
	ce := waitClosed(t, c)
	if int(ce.Code) != int(corralv1.Code_CODE_TOKEN_EXPIRED) || ce.Hint.GetCode() != corralv1.Code_CODE_TOKEN_EXPIRED {
		t.Fatalf("closed with %v (hint %v), want %d", ce, ce.Hint, corralv1.Code_CODE_TOKEN_EXPIRED)
	}
}

// TestTokenExpiry: at the token's exp the connection is closed with 4104,
// and the Welcome said when; a token without exp never expires.
func TestTokenExpiry(t *testing.T) {
	a := refreshAuth(t)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, a, nil)
			ctx := testCtx(t)
			exp := time.Now().Add(2 * time.Second)
			c := dialToken(t, d, userToken(t, "ann", exp, "r"))
			if got := c.Welcome().GetExpiresUnix(); got != exp.Unix() {
				t.Fatalf("welcome.expiresUnix %d, want %d", got, exp.Unix())
			}
			if _, err := c.Join(ctx, "r", 0, ""); err != nil {
				t.Fatal(err)
			}
			wantExpired(t, c)
			if time.Now().Before(time.Unix(exp.Unix(), 0)) {
				t.Fatalf("closed before the token's exp")
			}
			if m := scrape(t, edgeBase(d)); !strings.Contains(m, `corral_edge_server_closes_total{code="4104"}`) {
				t.Fatal("close 4104 not counted")
			}
		})
	}
}

// TestTokenRefresh: a refresh before exp keeps the connection past the
// old exp; rooms the new token does not grant are left with 4403 (before
// Refreshed), the others stay.
func TestTokenRefresh(t *testing.T) {
	a := refreshAuth(t)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, a, nil)
			ctx := testCtx(t)
			old := time.Now().Add(2 * time.Second)
			c := dialToken(t, d, userToken(t, "ann", old, "keep", "drop"))
			peer := dialToken(t, d, userToken(t, "ben", time.Now().Add(time.Hour), "keep"))
			for _, room := range []string{"keep", "drop"} {
				if _, err := c.Join(ctx, room, 0, ""); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := peer.Join(ctx, "keep", 0, ""); err != nil {
				t.Fatal(err)
			}
			next := time.Now().Add(time.Hour)
			r, err := c.Refresh(ctx, userToken(t, "ann", next, "keep"))
			if err != nil {
				t.Fatal(err)
			}
			if r.GetExpiresUnix() != next.Unix() {
				t.Fatalf("refreshed.expiresUnix %d, want %d", r.GetExpiresUnix(), next.Unix())
			}
			// The Left came first (frames are in order; Refresh returned
			// on Refreshed).
			left := nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return f.GetLeft() != nil || f.GetRefreshed() != nil })
			if l := left.GetLeft(); l.GetRoom() != "drop" || l.GetCode() != corralv1.Code_CODE_FORBIDDEN {
				t.Fatalf("got %v before refreshed, want left drop 4403", left)
			}
			// Past the old exp the connection still works.
			time.Sleep(time.Until(time.Unix(old.Unix()+1, 0)) + 200*time.Millisecond)
			if _, err := c.Publish(ctx, "keep", "after-exp", payload(1)); err != nil {
				t.Fatalf("publish after the old exp: %v", err)
			}
			nextFrame(t, peer, func(f *corralv1.ServerFrame) bool { return f.GetMessage().GetId() == "after-exp" })
			// The new grants hold for joins too.
			_, err = c.Join(ctx, "drop", 0, "")
			if e := serverErr(t, err); e.GetCode() != corralv1.Code_CODE_FORBIDDEN {
				t.Fatalf("join outside the refreshed grants: %v", e)
			}
		})
	}
}

// TestRefreshRefused: a refresh with another user's token, a garbage
// token or an expired one is refused with Error 4401 and changes nothing:
// the connection keeps its rooms and still closes at the old exp.
func TestRefreshRefused(t *testing.T) {
	a := refreshAuth(t)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, a, nil)
			ctx := testCtx(t)
			c := dialToken(t, d, userToken(t, "ann", time.Now().Add(3*time.Second), "r"))
			if _, err := c.Join(ctx, "r", 0, ""); err != nil {
				t.Fatal(err)
			}
			later := time.Now().Add(time.Hour)
			for name, tok := range map[string]string{
				"other user": userToken(t, "eve", later, "r", "*"),
				"garbage":    "not-a-token",
				"other key":  token(t, "another-secret-0123456789abcdef", jwt.MapClaims{"sub": "ann", "exp": later.Unix()}),
				"expired":    userToken(t, "ann", time.Now().Add(-time.Hour), "r"),
			} {
				_, err := c.Refresh(ctx, tok)
				if e := serverErr(t, err); e.GetCode() != corralv1.Code_CODE_UNAUTHENTICATED || e.GetRoom() != "" || e.GetFrame() != "refresh" {
					t.Fatalf("%s: got %v, want error 4401 refusing the refresh", name, e)
				}
			}
			if _, err := c.Publish(ctx, "r", "still-in", payload(1)); err != nil {
				t.Fatalf("publish after refused refreshes: %v", err)
			}
			if c.Welcome().GetUserId() != "ann" {
				t.Fatal("user changed")
			}
			wantExpired(t, c)
			m := scrape(t, edgeBase(d))
			wantCounted(t, m, "corral_edge_refused_total", "refresh_token")
		})
	}
}

// TestRefreshRateLimited: refresh frames share the control bucket: past
// it a refresh is refused with 4101 and a retry delay.
func TestRefreshRateLimited(t *testing.T) {
	a := refreshAuth(t)
	d := start(t, "serve", a, func(o *server.Options) {
		o.Edge.ControlRate, o.Edge.ControlBurst = 0.001, 2
	})
	ctx := testCtx(t)
	c := dialToken(t, d, userToken(t, "ann", time.Now().Add(time.Hour), "r"))
	for i := range 2 {
		if _, err := c.Refresh(ctx, userToken(t, "ann", time.Now().Add(time.Hour), "r")); err != nil {
			t.Fatalf("refresh %d within the burst: %v", i, err)
		}
	}
	_, err := c.Refresh(ctx, userToken(t, "ann", time.Now().Add(time.Hour), "r"))
	if e := serverErr(t, err); e.GetCode() != corralv1.Code_CODE_RATE_LIMITED || e.GetRetryAfterMs() == 0 {
		t.Fatalf("refresh over the limit: %v", e)
	}
	wantCounted(t, scrape(t, edgeBase(d)), "corral_edge_refused_total", "rate_control")
}
