package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/config"
	"github.com/corral-rt/corral/roomclass"
	"github.com/corral-rt/corral/server"
	"github.com/golang-jwt/jwt/v5"
)

const secret = "a jwt secret of at least 32 bytes!"

func secretFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustConfigure(t *testing.T, mode server.Mode, args ...string) server.Options {
	t.Helper()
	opts, _, err := configure(mode, args, io.Discard)
	if err != nil {
		t.Fatalf("configure %q: %v", args, err)
	}
	return opts
}

func sign(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestShortJWTSecretRefused: a --jwt-secret under 32 bytes stops the start.
func TestShortJWTSecretRefused(t *testing.T) {
	for _, s := range []string{"x", secret[:31]} {
		_, _, err := configure(server.Serve, []string{"serve", "--jwt-secret", s}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "at least 32") {
			t.Fatalf("--jwt-secret of %d bytes: %v, want a refusal", len(s), err)
		}
		if strings.Contains(err.Error(), s) {
			t.Fatalf("the error %q shows the secret", err)
		}
	}
}

// TestRequireExp: tokens without exp are refused (4401, as every
// ErrUnauthenticated) unless --insecure-dev or --require-exp=false.
func TestRequireExp(t *testing.T) {
	ctx := context.Background()
	noExp := sign(t, jwt.MapClaims{"sub": "alice"})
	withExp := sign(t, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()})
	for name, tc := range map[string]struct {
		args      []string
		noExpOK   bool
		withExpOK bool
	}{
		"default":           {[]string{"serve", "--jwt-secret", secret}, false, true},
		"insecure-dev":      {[]string{"serve", "--insecure-dev", "--jwt-secret", secret}, true, true},
		"require-exp=false": {[]string{"serve", "--require-exp=false", "--jwt-secret", secret}, true, true},
		"dev, but required": {[]string{"serve", "--insecure-dev", "--require-exp", "--jwt-secret", secret}, false, true},
	} {
		t.Run(name, func(t *testing.T) {
			a := mustConfigure(t, server.Serve, tc.args...).Auth
			_, err := a.Authenticate(ctx, noExp)
			if (err == nil) != tc.noExpOK || (err != nil && !errors.Is(err, auth.ErrUnauthenticated)) {
				t.Errorf("token without exp: %v, want ok=%v", err, tc.noExpOK)
			}
			if _, err := a.Authenticate(ctx, withExp); (err == nil) != tc.withExpOK {
				t.Errorf("token with exp: %v", err)
			}
		})
	}
}

// TestSecretFiles: every secret flag has a file form, as a flag and as
// CORRAL_..._FILE; a file and the flag together are refused.
func TestSecretFiles(t *testing.T) {
	ctx := context.Background()
	tok := sign(t, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()})

	opts := mustConfigure(t, server.Serve, "serve", "--jwt-secret-file", secretFile(t, secret+"\n"))
	if _, err := opts.Auth.Authenticate(ctx, tok); err != nil {
		t.Fatalf("--jwt-secret-file: %v", err)
	}
	t.Run("env", func(t *testing.T) {
		t.Setenv("CORRAL_JWT_SECRET_FILE", secretFile(t, secret))
		t.Setenv("CORRAL_REDIS_FILE", secretFile(t, "redis://:pw-pw-pw@127.0.0.1:1/0\n"))
		opts := mustConfigure(t, server.Serve, "serve")
		if _, err := opts.Auth.Authenticate(ctx, tok); err != nil {
			t.Fatalf("CORRAL_JWT_SECRET_FILE: %v", err)
		}
		if opts.RedisURL != "redis://:pw-pw-pw@127.0.0.1:1/0" {
			t.Fatalf("CORRAL_REDIS_FILE gave %q", opts.RedisURL)
		}
	})
	t.Run("edge api key", func(t *testing.T) {
		t.Setenv("CORRAL_API_KEY_FILE", secretFile(t, "an-api-key-of-some-length\n"))
		opts := mustConfigure(t, server.EdgeOnly, "edge", "--jwt-secret-file", secretFile(t, secret))
		if opts.CoreAPIKey != "an-api-key-of-some-length" {
			t.Fatalf("CORRAL_API_KEY_FILE gave %q", opts.CoreAPIKey)
		}
	})
	if _, _, err := configure(server.Serve, []string{"serve", "--jwt-secret", secret, "--jwt-secret-file", secretFile(t, secret)}, io.Discard); err == nil {
		t.Fatal("--jwt-secret with --jwt-secret-file accepted")
	}
}

// TestDebugCmdlineRedacted: the command line the debug listener shows has
// no secret flag's value, in any form.
func TestDebugCmdlineRedacted(t *testing.T) {
	opts := mustConfigure(t, server.Serve, "serve", "--jwt-secret", secret,
		"--api-keys=key-one-key-one-key,key-two-key-two-key", "--redis", "redis://:hunter2hunter2@127.0.0.1:1/0", "--max-rooms-per-conn", "7")
	line := strings.Join(opts.DebugCmdline, " ")
	for _, s := range []string{secret, "key-one", "key-two", "hunter2"} {
		if strings.Contains(line, s) {
			t.Fatalf("DebugCmdline %q shows %q", line, s)
		}
	}
	if !strings.Contains(line, "127.0.0.1:1") || !strings.Contains(line, "--max-rooms-per-conn 7") {
		t.Fatalf("DebugCmdline %q lost what is not secret", line)
	}
}

// TestHooksKeys: the hooks-* keys become the hooks' configuration (the
// key from its file form), and hook keys without hooks-url, or a bad
// policy, are refused.
func TestHooksKeys(t *testing.T) {
	for k, v := range map[string]string{
		"CONNECT": "true", "CALL": "true", "POLICY_JOIN": "allow-known", "POLICY_PUBLISH": "open",
		"POLICY_REFRESH": "allow-known", "REFRESH_GRACE": "30s", "JOIN_CACHE_TTL": "10s", "COOKIES": "sid",
		"JOIN_HERD_WINDOW": "off", "RESPONSE_BUDGET": "1048576",
	} {
		t.Setenv("CORRAL_HOOKS_"+k, v)
	}
	opts := mustConfigure(t, server.Serve, "serve", "--jwt-secret", secret,
		"--hooks-url", "http://127.0.0.1:9000", "--hooks-key-file", secretFile(t, "hook-key\n"))
	h := opts.Hooks
	if h.URL != "http://127.0.0.1:9000" || h.Key != "hook-key" || !h.Policy.Connect || !h.Policy.Call || h.Policy.Refresh {
		t.Fatalf("hooks config %+v", h)
	}
	if h.JoinHerdWindow != config.Off || h.ResponseBudget != 1<<20 {
		t.Fatalf("herd window %v, response budget %d", h.JoinHerdWindow, h.ResponseBudget)
	}
	if h.Policy.JoinPolicy != roomclass.AllowKnown || len(opts.Edge.HookCookies) != 1 {
		t.Fatalf("policy %v, cookies %v", h.Policy.JoinPolicy, opts.Edge.HookCookies)
	}
	if h.Policy.PublishPolicy != roomclass.Open || h.Policy.RefreshPolicy != roomclass.AllowKnown || h.Policy.RefreshGrace != 30*time.Second {
		t.Fatalf("policy %+v", h.Policy)
	}
	// The default class takes the join and publish policies and the TTL.
	def := opts.Core.Classes.Table().Default().Hooks
	if def.JoinPolicy != roomclass.AllowKnown || def.PublishPolicy != roomclass.Open || def.JoinCacheTTL != 10*time.Second {
		t.Fatalf("default class hooks %+v", def)
	}
	for name, env := range map[string][2]string{
		"no url":             {"CORRAL_HOOKS_URL", ""},
		"bad policy":         {"CORRAL_HOOKS_POLICY_JOIN", "open"},
		"bad publish policy": {"CORRAL_HOOKS_POLICY_PUBLISH", "allow-known"},
		"bad refresh policy": {"CORRAL_HOOKS_POLICY_REFRESH", "open"},
		"negative grace":     {"CORRAL_HOOKS_REFRESH_GRACE", "-1s"},
		"herd window 0":      {"CORRAL_HOOKS_JOIN_HERD_WINDOW", "0"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("CORRAL_HOOKS_URL", "http://x")
			t.Setenv(env[0], env[1])
			if _, _, err := configure(server.Serve, []string{"serve", "--jwt-secret", secret}, io.Discard); err == nil {
				t.Errorf("%s: accepted", name)
			}
		})
	}
}

// TestHooksConnectAuthenticates: hooks-url with hooks-connect is enough
// to start an edge without a JWT key or --insecure-dev (the backend
// authenticates hellos); a token that reaches the edge's own check (a
// refresh without hooks-refresh) is refused. Without hooks-connect the
// start is still refused.
func TestHooksConnectAuthenticates(t *testing.T) {
	t.Setenv("CORRAL_HOOKS_CONNECT", "true")
	opts := mustConfigure(t, server.Serve, "serve", "--hooks-url", "http://127.0.0.1:9000")
	if _, err := opts.Auth.Authenticate(context.Background(), "alice"); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("the edge's authenticator took a token: %v", err)
	}
	t.Setenv("CORRAL_HOOKS_CONNECT", "false")
	_, _, err := configure(server.Serve, []string{"serve", "--hooks-url", "http://127.0.0.1:9000"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "no way to verify") {
		t.Fatalf("hooks without hooks-connect and no JWT key: %v, want a refusal", err)
	}
}

// TestCoalesceWindowStillLoads: coalesce-window is ignored by the edge
// but still loads from the environment and files; no value is turned
// into another.
func TestCoalesceWindowStillLoads(t *testing.T) {
	if got := mustConfigure(t, server.Serve, "serve", "--insecure-dev").Edge.CoalesceWindow; got != 0 {
		t.Fatalf("default CoalesceWindow %v, want 0", got)
	}
	t.Setenv("CORRAL_COALESCE_WINDOW", "3ms")
	if got := mustConfigure(t, server.EdgeOnly, "edge", "--insecure-dev").Edge.CoalesceWindow; got != 3*time.Millisecond {
		t.Fatalf("CoalesceWindow %v, want 3ms", got)
	}
}

// TestAPIOverloadQueue: api-overload-queue reaches core.APIConfig: its
// default explicitly, a size, or unlimited; 0 is refused.
func TestAPIOverloadQueue(t *testing.T) {
	for name, tc := range map[string]struct {
		env  string
		want config.Limit
	}{
		"default":   {"", 64 << 20},
		"bytes":     {"1048576", 1 << 20},
		"unlimited": {"unlimited", config.Unlimited},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("CORRAL_API_OVERLOAD_QUEUE", tc.env)
			}
			if got := mustConfigure(t, server.CoreOnly, "core", "--insecure-dev").Core.API.OverloadQueueBytes; got != tc.want {
				t.Fatalf("OverloadQueueBytes %d, want %d", got, tc.want)
			}
		})
	}
	t.Setenv("CORRAL_API_OVERLOAD_QUEUE", "0")
	if _, _, err := configure(server.CoreOnly, []string{"core", "--insecure-dev"}, io.Discard); err == nil || !strings.Contains(err.Error(), "unlimited") {
		t.Fatalf("0: %v, want a refusal saying unlimited", err)
	}
}
