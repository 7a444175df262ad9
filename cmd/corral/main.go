// Command corral runs the corral real-time rooms server.
//
//	corral serve   edge and core in one process, in memory (the default)
//	corral edge    a WebSocket edge linked to a core over h2c
//	corral core    the room service alone
//	corral check-config FILE   check a config file
//	corral config keys [COMMAND]  every setting: key, variable, default
//	corral version             version, commit and Go version of this build
//
// Every setting is declared once, in package config: its flag (for the
// operational ones), environment variable, config file key (--config,
// docs/CONFIG.md), default and help. This file holds wiring only;
// behaviour lives in package server and below.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/config"
	"github.com/corral-rt/corral/hooks"
	"github.com/corral-rt/corral/internal/buildinfo"
	"github.com/corral-rt/corral/roomclass"
	"github.com/corral-rt/corral/server"
	"github.com/corral-rt/corral/tracing"
)

const usage = `corral — a real-time rooms server.

Usage:
  corral serve [flags]   edge + core in one process, in memory (start here)
  corral edge  [flags]   WebSocket edge; needs --core URL of a running core (or several: a,b,c)
  corral core  [flags]   room service for edges and internal services
  corral check-config FILE
                         check a config file (--config): every error with its line
  corral config keys [COMMAND]
                         every setting: key, environment variable, default, unit
  corral version         this build's version, commit and Go version (also --version)
  corral help            this text

Try it:
  corral serve --insecure-dev
  # then, with any WebSocket client (websocat, wscat, a browser console):
  #   connect to ws://127.0.0.1:8080/ws and send
  #   {"hello":{}}
  #   {"join":{"room":"lobby"}}
  #   {"publish":{"room":"lobby","id":"1","payload":{"text":"hi"}}}

Run "corral <command> -h" for the flags of a command: the operational ones,
grouped. Every setting (flags included) is a key of the config file
(--config FILE; docs/CONFIG.md) and a CORRAL_* environment variable;
"corral config keys" lists them all. A flag beats its environment variable,
which beats the file.
`

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "corral:", err)
		os.Exit(1)
	}
}

func run(args []string, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stderr, usage)
		return nil
	}
	var mode server.Mode
	switch args[0] {
	case "version", "--version", "-version":
		_, err := fmt.Fprintln(os.Stdout, buildinfo.Get())
		return err
	case "check-config":
		return checkConfig(args[1:], os.Stdout, stderr)
	case "config":
		return configCommand(args[1:], os.Stdout)
	case "serve":
		mode = server.Serve
	case "edge":
		mode = server.EdgeOnly
	case "core":
		mode = server.CoreOnly
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
	opts, l, err := configure(mode, args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	logger := opts.Logger

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Off unless the OTEL_* variables ask for it: see docs/TRACING.md.
	endTracing, err := tracing.Setup(ctx, "corral-"+args[0], logger)
	if err != nil {
		return err
	}
	node, err := server.Start(opts)
	if err != nil {
		return err
	}
	// SIGHUP re-reads the config file (server.Node.Reload logs the
	// outcome); without one there is nothing to reload.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			if _, err := node.Reload(); errors.Is(err, server.ErrNoConfig) {
				logger.Warn("SIGHUP: no config file to reload (start with --config)")
			}
		}
	}()
	logger.Info("corral listening", "mode", args[0], "addr", node.Addr(), "internal", node.InternalAddr(), "insecure_dev", l.Auth.InsecureDev)
	var runErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case runErr = <-node.Err():
		logger.Error("listener failed", "err", runErr)
	case <-node.Drained():
		logger.Info("drained through /admin/drain; shutting down")
	}
	shutdown, cancel := context.WithTimeout(context.Background(), l.Node.ShutdownTimeout)
	defer cancel()
	if err := node.Close(shutdown); err != nil && runErr == nil {
		logger.Warn("shutdown incomplete", "err", err)
	}
	if err := endTracing(shutdown); err != nil {
		logger.Warn("tracing: spans not flushed", "err", err)
	}
	return runErr
}

// configure reads the settings of a command (args[0]: flags, the
// environment, the config file; package config) into the server's
// options.
func configure(mode server.Mode, args []string, stderr io.Writer) (server.Options, *config.Loaded, error) {
	l, err := config.Load(commandName(mode), args[1:], os.LookupEnv, stderr)
	if err != nil {
		return server.Options{}, nil, err
	}
	s := &l.Settings
	logger, err := newLogger(s.Log.Format, s.Log.Level, stderr)
	if err != nil {
		return server.Options{}, nil, err
	}
	if err := readSecretFiles(s); err != nil {
		return server.Options{}, nil, err
	}
	if !l.IsSet("require-exp") {
		s.Auth.RequireExp = !s.Auth.InsecureDev
	}
	opts := server.Options{
		Mode:        mode,
		Node:        s.Node,
		APIInsecure: s.Auth.APIInsecure || s.Auth.InsecureDev,
		CoreAPIKey:  s.Auth.APIKey,
		Logger:      logger,
		DebugCmdline: server.RedactArgs(append([]string{os.Args[0]}, args...), func(name string) bool {
			k := config.Lookup(name)
			return k != nil && k.Secret
		}),
	}
	if opts.APIKeys, err = apiKeys(s); err != nil {
		return server.Options{}, nil, err
	}
	if mode == server.EdgeOnly && len(opts.APIKeys) == 0 && s.Auth.APIKey != "" && (s.Node.InternalAddr != "" || s.Node.DebugAddr != "") {
		// Without keys of its own, an edge's internal and debug listeners
		// accept the key it presents to its cores: one secret per edge
		// (the chart's), and whoever may call a core's API may drain an
		// edge.
		opts.APIKeys = []string{s.Auth.APIKey}
	}
	opts.Core.Core = s.Core
	opts.Core.API.API = s.API
	opts.Core.Presence.Presence = s.Presence
	table, err := classTable(l, l.File)
	if err != nil {
		return server.Options{}, nil, err
	}
	opts.Core.Classes = roomclass.NewLive(table)
	if l.File != nil {
		opts.Reload = reloader(mode, args, l.File, logger)
	}
	opts.Edge.Edge = s.Edge
	opts.Edge.AnyOrigin = s.Auth.InsecureDev
	if opts.Hooks, err = hooksConfig(s); err != nil {
		return server.Options{}, nil, err
	}
	if mode != server.CoreOnly {
		a, err := authenticator(s, logger)
		if err != nil {
			return server.Options{}, nil, err
		}
		opts.Auth = a
	}
	return opts, l, nil
}

// readSecretFiles fills each secret from its file form.
func readSecretFiles(s *config.Settings) error {
	for _, f := range []struct {
		name  string
		value *string
		file  string
	}{
		{"jwt-secret", &s.Auth.JWTSecret, s.Auth.JWTSecretFile},
		{"api-key", &s.Auth.APIKey, s.Auth.APIKeyFile},
		{"hooks-key", &s.Hooks.Key, s.Hooks.KeyFile},
		{"redis", &s.Node.RedisURL, s.Node.RedisFile},
	} {
		if f.file == "" {
			continue
		}
		if *f.value != "" {
			return fmt.Errorf("--%s and --%s-file are both set: keep one", f.name, f.name)
		}
		v, err := server.ReadSecretFile(f.file)
		if err != nil {
			return fmt.Errorf("--%s-file: %w", f.name, err)
		}
		*f.value = v
	}
	return nil
}

// hooksConfig is the hooks' configuration: the hooks-* keys as they are
// (their failure policies were checked as keys). Which rooms' joins and publishes go to the
// backend is the room classes' (hooks.join, hooks.publish).
func hooksConfig(s *config.Settings) (hooks.Config, error) {
	p := s.Policy
	if s.Hooks.URL == "" {
		if p.Connect || p.Refresh || p.Call {
			return hooks.Config{}, errors.New("hooks-connect, hooks-refresh and hooks-call need hooks-url")
		}
		return hooks.Config{}, nil
	}
	return hooks.Config{Hooks: s.Hooks, Policy: hooks.Policy{HookPolicy: p}}, nil
}

func authenticator(s *config.Settings, logger *slog.Logger) (auth.Authenticator, error) {
	a := &s.Auth
	if a.JWTSecret == "" && a.JWTPublicKeys == "" {
		if s.Policy.Connect && !a.InsecureDev {
			// The backend authenticates hellos; a token that does not go to
			// it (a refresh without hooks-refresh) is refused.
			return auth.None{}, nil
		}
		if !a.InsecureDev {
			return nil, errors.New("no way to verify connection tokens: set --jwt-secret or --jwt-public-keys, let the hooks backend do it (--hooks-url with the key hooks-connect), or run with --insecure-dev for local development")
		}
		if s.Policy.Connect {
			logger.Warn("--insecure-dev: the hooks backend authenticates hellos, but any origin is accepted and a refresh's token (without --hooks-refresh) is the user id")
			return auth.Dev{}, nil
		}
		logger.Warn("--insecure-dev: connections are not authenticated and any origin is accepted")
		return auth.Dev{}, nil
	}
	cfg := auth.JWTConfig{Issuer: a.JWTIssuer, Audience: a.JWTAudience, Leeway: 5 * time.Second, RequireExpiry: a.RequireExp}
	if a.JWTSecret != "" {
		cfg.HMACSecret = []byte(a.JWTSecret)
	}
	if a.JWTPublicKeys != "" {
		pem, err := os.ReadFile(a.JWTPublicKeys)
		if err != nil {
			return nil, err
		}
		cfg.RSAPublicKeys, cfg.Ed25519PublicKeys, err = auth.ParsePublicKeysPEM(pem)
		if err != nil {
			return nil, fmt.Errorf("--jwt-public-keys: %w", err)
		}
	}
	return auth.NewJWT(cfg)
}

// apiKeys gathers the internal API keys from --api-keys and --api-keys-file.
func apiKeys(s *config.Settings) ([]string, error) {
	keys := server.ParseAPIKeys(s.Auth.APIKeys)
	if s.Auth.APIKeysFile != "" {
		more, err := server.ReadAPIKeyFile(s.Auth.APIKeysFile)
		if err != nil {
			return nil, fmt.Errorf("--api-keys-file: %w", err)
		}
		keys = append(keys, more...)
	}
	return keys, nil
}

func newLogger(format, level string, w io.Writer) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	ho := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, ho)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, ho)), nil
	}
	return nil, fmt.Errorf("--log-format: want text or json, got %q", format)
}
