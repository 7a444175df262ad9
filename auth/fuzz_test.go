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

func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{
		{"game:*", "game:1"},
		{"*", ""},
		{"org:*:chat", "org:acme:chat"},
		{"*a*a*a*b", "aaaaaaaaaaaaaaaa"},
		{"ab*ba", "aba"},
		{"a*bc*bc", "abcbc"},
		{"", ""},
		{"**", "*"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, room string) {
		got := auth.Match([]string{pattern}, room)
		if !auth.Match([]string{"*"}, room) {
			t.Fatalf("* does not match %q", room)
		}
		if !auth.Match([]string{room}, room) {
			t.Fatalf("%q does not match itself", room)
		}
		if !auth.Match([]string{pattern}, pattern) {
			t.Fatalf("%q does not match itself", pattern)
		}
		if len(pattern)*len(room) <= 1<<16 {
			if want := matchDP(pattern, room); got != want {
				t.Fatalf("Match(%q, %q) = %v, reference says %v", pattern, room, got, want)
			}
		}
	})
}

// matchDP is an obviously correct, quadratic reference matcher: ok[j]
// reports whether the pattern so far matches room[:j].
func matchDP(pattern, room string) bool {
	ok := make([]bool, len(room)+1)
	ok[0] = true
	for i := 0; i < len(pattern); i++ {
		next := make([]bool, len(room)+1)
		if pattern[i] == '*' {
			seen := false
			for j := range ok {
				seen = seen || ok[j]
				next[j] = seen
			}
		} else {
			for j := 1; j <= len(room); j++ {
				next[j] = ok[j-1] && room[j-1] == pattern[i]
			}
		}
		ok = next
	}
	return ok[len(room)]
}
