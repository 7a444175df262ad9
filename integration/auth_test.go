package integration_test

import (
	"testing"
	"time"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/golang-jwt/jwt/v5"
)

func token(t *testing.T, secret string, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTokens: bad tokens are refused with CODE_UNAUTHENTICATED ("stop");
// grants limit join and publish.
func TestTokens(t *testing.T) {
	const secret = "integration-secret-0123456789abcdef"
	a, err := auth.NewJWT(auth.JWTConfig{HMACSecret: []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, a, nil)
			ctx := testCtx(t)
			exp := time.Now().Add(time.Hour).Unix()
			refused := map[string]string{
				"empty":      "",
				"garbage":    "not-a-token",
				"other key":  token(t, "another-secret-0123456789abcdef", jwt.MapClaims{"sub": "eve", "exp": exp}),
				"expired":    token(t, secret, jwt.MapClaims{"sub": "eve", "exp": time.Now().Add(-time.Hour).Unix()}),
				"no subject": token(t, secret, jwt.MapClaims{"exp": exp}),
				"alg none":   "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiJldmUifQ.",
			}
			for name, tok := range refused {
				t.Run(name, func(t *testing.T) {
					_, err := client.Dial(ctx, d.wsURL, client.Options{Token: tok})
					ce, ok := err.(*client.CloseError)
					if !ok || int(ce.Code) != int(corralv1.Code_CODE_UNAUTHENTICATED) {
						t.Fatalf("got %v, want close %d", err, corralv1.Code_CODE_UNAUTHENTICATED)
					}
					// 4401 means stop: it comes in an error frame, never
					// in a frame named reconnect.
					if ce.Hint != nil || ce.Refusal.GetCode() != corralv1.Code_CODE_UNAUTHENTICATED {
						t.Fatalf("4401 came with hint %v, error frame %v", ce.Hint, ce.Refusal)
					}
				})
			}

			tok := token(t, secret, jwt.MapClaims{"sub": "reader", "exp": exp, "rooms": []string{"news:*"}, "publish": []string{}})
			c, err := client.Dial(ctx, d.wsURL, client.Options{Token: tok})
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseNow()
			if c.Welcome().GetUserId() != "reader" {
				t.Fatalf("user %q", c.Welcome().GetUserId())
			}
			if _, err := c.Join(ctx, "news:today", 0, ""); err != nil {
				t.Fatal(err)
			}
			_, err = c.Join(ctx, "secret", 0, "")
			if se, ok := err.(*client.ServerError); !ok || se.Err.GetCode() != corralv1.Code_CODE_FORBIDDEN {
				t.Fatalf("join outside grants: %v", err)
			}
			_, err = c.Publish(ctx, "news:today", "p", []byte(`1`))
			if se, ok := err.(*client.ServerError); !ok || se.Err.GetCode() != corralv1.Code_CODE_FORBIDDEN {
				t.Fatalf("publish without grant: %v", err)
			}
		})
	}
}
