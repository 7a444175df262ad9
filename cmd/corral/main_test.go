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
	"github.com/corral-rt/corral/hooks"
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
		"--api-keys=key-one-key-one-key,key-two-key-two-key", "--redis", "redis://:hunter2hunter2@127.0.0.1:1/0", "--history", "7")
	line := strings.Join(opts.DebugCmdline, " ")
	for _, s := range []string{secret, "key-one", "key-two", "hunter2"} {
		if strings.Contains(line, s) {
			t.Fatalf("DebugCmdline %q shows %q", line, s)
		}
	}
	if !strings.Contains(line, "127.0.0.1:1") || !strings.Contains(line, "--history 7") {
		t.Fatalf("DebugCmdline %q lost what is not secret", line)
	}
}

// TestHooksFlags: the --hooks-* flags become the hooks' configuration
// (the key from its file form), and hook flags without --hooks-url, or a
// bad policy, are refused.
func TestHooksFlags(t *testing.T) {
	opts := mustConfigure(t, server.Serve, "serve", "--jwt-secret", secret,
		"--hooks-url", "http://127.0.0.1:9000", "--hooks-key-file", secretFile(t, "hook-key\n"),
		"--hooks-connect", "--hooks-call", "--hooks-join", "game:*,team:*", "--hooks-publish", "chat:*",
		"--hooks-policy-join", "allow-known", "--hooks-policy-publish", "open", "--hooks-policy-refresh", "allow-known",
		"--hooks-refresh-grace", "30s", "--hooks-join-cache-ttl", "10s", "--hooks-cookies", "sid")
	h := opts.Hooks
	if h.URL != "http://127.0.0.1:9000" || h.Key != "hook-key" || !h.Policy.Connect || !h.Policy.Call || h.Policy.Refresh {
		t.Fatalf("hooks config %+v", h)
	}
	if !h.Policy.For("team:x").Join || h.Policy.For("chat:1").Join || !h.Policy.For("chat:1").Publish {
		t.Fatalf("policy %+v", h.Policy)
	}
	if h.Policy.JoinFailure.String() != "allow-known" || len(opts.Edge.HookCookies) != 1 {
		t.Fatalf("policy %v, cookies %v", h.Policy.JoinFailure, opts.Edge.HookCookies)
	}
	if h.Policy.PublishFailure != hooks.Open || h.Policy.RefreshFailure != hooks.AllowKnown || h.Policy.RefreshGrace != 30*time.Second {
		t.Fatalf("policy %+v", h.Policy)
	}
	// The default class takes the join and publish policies and the TTL.
	def := opts.Core.Classes.Table().Default().Hooks
	if def.JoinPolicy != roomclass.AllowKnown || def.PublishPolicy != roomclass.Open || def.JoinCacheTTL != 10*time.Second {
		t.Fatalf("default class hooks %+v", def)
	}
	for name, args := range map[string][]string{
		"no url":             {"--hooks-connect"},
		"bad policy":         {"--hooks-url", "http://x", "--hooks-policy-join", "open"},
		"bad publish policy": {"--hooks-url", "http://x", "--hooks-policy-publish", "allow-known"},
		"bad refresh policy": {"--hooks-url", "http://x", "--hooks-policy-refresh", "open"},
		"negative grace":     {"--hooks-url", "http://x", "--hooks-refresh-grace", "-1s"},
	} {
		if _, _, err := configure(server.Serve, append([]string{"serve", "--jwt-secret", secret}, args...), io.Discard); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestHooksConnectAuthenticates: --hooks-url with --hooks-connect is enough
// to start an edge without a JWT key or --insecure-dev (the backend
// authenticates hellos); a token that reaches the edge's own check (a
// refresh without --hooks-refresh) is refused. Without --hooks-connect the
// start is still refused.
func TestHooksConnectAuthenticates(t *testing.T) {
	opts := mustConfigure(t, server.Serve, "serve", "--hooks-url", "http://127.0.0.1:9000", "--hooks-connect")
	if _, err := opts.Auth.Authenticate(context.Background(), "alice"); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("the edge's authenticator took a token: %v", err)
	}
	_, _, err := configure(server.Serve, []string{"serve", "--hooks-url", "http://127.0.0.1:9000", "--hooks-join", "team:*"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "no way to verify") {
		t.Fatalf("hooks without --hooks-connect and no JWT key: %v, want a refusal", err)
	}
}

// TestCoalesceWindow: --coalesce-window (or CORRAL_COALESCE_WINDOW) sets
// edge.Config.CoalesceWindow; 0 turns coalescing off (a negative window in
// edge.Config), a negative flag is refused.
func TestCoalesceWindow(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		env  string
		want time.Duration
	}{
		"default": {[]string{"serve", "--insecure-dev"}, "", 10 * time.Millisecond},
		"flag":    {[]string{"serve", "--insecure-dev", "--coalesce-window", "12ms"}, "", 12 * time.Millisecond},
		"env":     {[]string{"serve", "--insecure-dev"}, "3ms", 3 * time.Millisecond},
		"off":     {[]string{"serve", "--insecure-dev", "--coalesce-window", "0"}, "", -1},
		"edge":    {[]string{"edge", "--insecure-dev", "--coalesce-window", "2ms"}, "", 2 * time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("CORRAL_COALESCE_WINDOW", tc.env)
			}
			mode := server.Serve
			if tc.args[0] == "edge" {
				mode = server.EdgeOnly
			}
			if got := mustConfigure(t, mode, tc.args...).Edge.CoalesceWindow; got != tc.want {
				t.Fatalf("CoalesceWindow %v, want %v", got, tc.want)
			}
		})
	}
	_, _, err := configure(server.Serve, []string{"serve", "--insecure-dev", "--coalesce-window", "-1ms"}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "coalesce-window") {
		t.Fatalf("negative window: %v, want a refusal naming the flag", err)
	}
}

// TestAPIOverloadQueue: --api-overload-queue reaches core.APIConfig.
func TestAPIOverloadQueue(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want int
	}{
		"default (core's)": {[]string{"serve", "--insecure-dev"}, 0},
		"bytes":            {[]string{"serve", "--insecure-dev", "--api-overload-queue", "1048576"}, 1 << 20},
		"off":              {[]string{"core", "--insecure-dev", "--api-overload-queue", "-1"}, -1},
	} {
		t.Run(name, func(t *testing.T) {
			mode := server.Serve
			if tc.args[0] == "core" {
				mode = server.CoreOnly
			}
			if got := mustConfigure(t, mode, tc.args...).Core.API.OverloadQueueBytes; got != tc.want {
				t.Fatalf("OverloadQueueBytes %d, want %d", got, tc.want)
			}
		})
	}
}
