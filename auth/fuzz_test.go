package auth_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/corral-rt/corral/auth"
)

// fuzzSecret is the only key FuzzAuthenticate's authenticator knows.
var fuzzSecret = []byte("fuzz-secret-fuzz-secret-fuzz-sec")

func FuzzAuthenticate(f *testing.F) {
	a, err := auth.NewJWT(auth.JWTConfig{HMACSecret: fuzzSecret, Audience: "corral"})
	if err != nil {
		f.Fatal(err)
	}
	far := time.Now().AddDate(50, 0, 0).Unix()
	for _, c := range []jwt.MapClaims{
		{"sub": "alice", "aud": "corral", "rooms": []string{"game:*"}},
		{"sub": "bob", "aud": []string{"x", "corral"}, "exp": far, "rooms": []string{"*"}, "publish": []string{}},
		{"sub": "carol", "aud": "corral", "nbf": 1, "iat": 1, "publish": nil},
		{"sub": "", "aud": "corral"},
		{"sub": "dave", "aud": "other"},
		{"sub": "erin", "aud": "corral", "exp": 1},
	} {
		f.Add(sign(f, jwt.SigningMethodHS256, fuzzSecret, c))
	}
	f.Add(sign(f, jwt.SigningMethodHS256, []byte("other"), jwt.MapClaims{"sub": "mallory", "aud": "corral"}))
	f.Add(b64(`{"alg":"none","typ":"JWT"}`) + "." + b64(`{"sub":"mallory","aud":"corral"}`) + ".")
	f.Add(b64(`{"alg":"HS256"}`) + "." + b64(`{"sub":"mallory","aud":"corral"}`) + ".")
	f.Add("")
	f.Add("..")
	f.Add("a.b.c")

	f.Fuzz(func(t *testing.T, token string) {
		id, err := a.Authenticate(context.Background(), token)
		if err != nil {
			if id != nil {
				t.Fatalf("identity %v returned with error %v", id, err)
			}
			if !strings.HasPrefix(err.Error(), "auth: unauthenticated: ") {
				t.Fatalf("refusal %q does not wrap ErrUnauthenticated", err)
			}
			return
		}
		if id.GetUserId() == "" {
			t.Fatal("accepted a token without sub")
		}
		if len(token) > 8<<10 {
			t.Fatalf("accepted a token of %d bytes", len(token))
		}
		// Check the signature independently of the jwt library.
		parts := strings.Split(token, ".")
		if len(parts) != 3 {
			t.Fatalf("accepted a token of %d parts", len(parts))
		}
		sig, err := base64.RawURLEncoding.DecodeString(parts[2])
		if err != nil {
			t.Fatalf("accepted a token whose signature does not decode: %v", err)
		}
		mac := hmac.New(sha256.New, fuzzSecret)
		mac.Write([]byte(parts[0] + "." + parts[1]))
		if !hmac.Equal(sig, mac.Sum(nil)) {
			t.Fatal("accepted a token not signed with the key")
		}
	})
}
