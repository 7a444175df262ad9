package client_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/server"
	"github.com/golang-jwt/jwt/v5"
)

const refreshSecret = "client-refresh-secret-0123456789abcdef"

// startJWT runs corral with HMAC JWT auth.
func startJWT(t *testing.T) *server.Node {
	t.Helper()
	a, err := auth.NewJWT(auth.JWTConfig{HMACSecret: []byte(refreshSecret)})
	if err != nil {
		t.Fatal(err)
	}
	return startCorral(t, func(o *server.Options) { o.Auth = a })
}

// shortTokens returns a TokenProvider of tokens for user that expire two
// seconds after they are made, and the count of calls.
func shortTokens(t *testing.T, user string) (func(context.Context) (string, error), *atomic.Int32) {
	var n atomic.Int32
	return func(context.Context) (string, error) {
		n.Add(1)
		return jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
			"sub": user, "exp": time.Now().Add(2 * time.Second).Unix(), "rooms": []string{"*"}, "publish": []string{"*"},
		}).SignedString([]byte(refreshSecret))
	}, &n
}

// TestSessionRefreshesToken: with a TokenProvider the Session refreshes
// its short-lived token on the live connection: it outlives several
// expiries on its first connection, with no disconnect.
func TestSessionRefreshesToken(t *testing.T) {
	n := startJWT(t)
	provider, calls := shortTokens(t, "ann")
	ctx := testCtx(t)
	s, err := client.Connect(ctx, "ws://"+n.Addr()+"/ws", client.SessionOptions{
		Options: client.Options{TokenProvider: provider}, Backoff: fast,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	r := record(s, "ann", checker.New())
	if _, err := s.Join(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if s.Welcome().GetExpiresUnix() == 0 {
		t.Fatal("welcome without expiresUnix")
	}
	first := s.Welcome().GetExpiresUnix()
	// Past two expiries of two-second tokens.
	time.Sleep(time.Until(time.Unix(first+3, 0)))
	if _, err := s.Publish(ctx, "r", "p1", []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	for _, ev := range r.events {
		if ev.Kind == client.EventDisconnected {
			t.Errorf("disconnected: %v", ev.Err)
		}
	}
	r.mu.Unlock()
	if got := s.Attempts(); len(got) != 1 {
		t.Errorf("connections %v, want the first only", got)
	}
	if calls.Load() < 3 {
		t.Errorf("token provider called %d times, want the hello's and two refreshes", calls.Load())
	}
}

// TestSessionTokenExpires: without a TokenProvider the connection ends at
// the token's expiry with CODE_TOKEN_EXPIRED; the reconnect with the same
// (expired) token is refused and the Session stops.
func TestSessionTokenExpires(t *testing.T) {
	n := startJWT(t)
	provider, _ := shortTokens(t, "ann")
	tok, _ := provider(context.Background())
	ctx := testCtx(t)
	s, err := client.Connect(ctx, "ws://"+n.Addr()+"/ws", client.SessionOptions{
		Options: client.Options{Token: tok}, Backoff: fast,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var closes []int
	timeout := time.After(20 * time.Second)
	for done := false; !done; {
		select {
		case ev, ok := <-s.Events():
			if !ok {
				done = true
				break
			}
			var ce *client.CloseError
			if ev.Kind == client.EventDisconnected && errors.As(ev.Err, &ce) {
				closes = append(closes, int(ce.Code))
			}
		case <-timeout:
			t.Fatal("the session did not end")
		}
	}
	if len(closes) == 0 || closes[0] != int(corralv1.Code_CODE_TOKEN_EXPIRED) {
		t.Fatalf("closes %v, want %d first", closes, corralv1.Code_CODE_TOKEN_EXPIRED)
	}
	var ce *client.CloseError
	if !errors.As(s.Err(), &ce) || int(ce.Code) != int(corralv1.Code_CODE_UNAUTHENTICATED) {
		t.Fatalf("session ended with %v, want %d", s.Err(), corralv1.Code_CODE_UNAUTHENTICATED)
	}
}
