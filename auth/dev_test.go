package auth_test

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/corral-rt/corral/auth"
)

func TestDevAuthenticate(t *testing.T) {
	tests := map[string]struct {
		token   string
		user    string // "" when refused; a regexp when anon
		anon    bool
		errPart string
	}{
		"empty token is anonymous": {token: "", anon: true},
		"plain user id":            {token: "alice", user: "alice"},
		"user id with punctuation": {token: "alice@example.com", user: "alice@example.com"},
		"user id with one dot":     {token: "alice.smith", user: "alice.smith"},
		"user id with space":       {token: "Alice Smith", user: "Alice Smith"},
		"unicode user id":          {token: "zoë-山田", user: "zoë-山田"},
		"64 bytes":                 {token: strings.Repeat("a", 64), user: strings.Repeat("a", 64)},
		"65 bytes":                 {token: strings.Repeat("a", 65), errPart: "longer than 64 bytes"},
		"control character":        {token: "alice\n", errPart: "not printable"},
		"NUL":                      {token: "al\x00ice", errPart: "not printable"},
		"invalid UTF-8":            {token: "al\xffice", errPart: "not printable"},
		"JWT-looking token": {
			token:   "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2ln",
			errPart: "run without --insecure-dev, or pass a plain user id",
		},
		"short three-part token": {token: "a.b.c", errPart: "looks like a JWT"},
	}
	anonRE := regexp.MustCompile(`^anon-[0-9a-f]{8}$`)
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			id, err := auth.Dev{}.Authenticate(context.Background(), tt.token)
			if tt.errPart != "" {
				if err == nil {
					t.Fatalf("Dev accepted %q as %v", tt.token, id)
				}
				if !errors.Is(err, auth.ErrUnauthenticated) {
					t.Errorf("error %q does not wrap ErrUnauthenticated", err)
				}
				if !strings.Contains(err.Error(), tt.errPart) {
					t.Errorf("error %q does not say %q", err, tt.errPart)
				}
				if len(tt.token) >= 8 && strings.Contains(err.Error(), tt.token) {
					t.Errorf("error %q echoes the token", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			if tt.anon {
				if !anonRE.MatchString(id.GetUserId()) {
					t.Errorf("anonymous user id %q, want anon-<8 hex>", id.GetUserId())
				}
			} else if id.GetUserId() != tt.user {
				t.Errorf("user id %q, want %q", id.GetUserId(), tt.user)
			}
			if !slices.Equal(id.GetJoin(), []string{"*"}) || !slices.Equal(id.GetPublish(), []string{"*"}) {
				t.Errorf("grants join %q publish %q, want [*] and [*]", id.GetJoin(), id.GetPublish())
			}
			if id.GetExpiresUnix() != 0 {
				t.Errorf("expires_unix %d, want 0", id.GetExpiresUnix())
			}
		})
	}
}

func TestDevAnonymousIDsDiffer(t *testing.T) {
	seen := map[string]bool{}
	for range 20 {
		id, err := auth.Dev{}.Authenticate(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		seen[id.GetUserId()] = true
	}
	if len(seen) < 19 { // 32 random bits: a repeat in 20 draws is ~5e-8 likely
		t.Errorf("only %d distinct anonymous ids in 20", len(seen))
	}
}
