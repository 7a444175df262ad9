// Command corral runs the corral real-time rooms server.
//
//	corral serve   edge and core in one process, in memory (the default)
//	corral edge    a WebSocket edge linked to a core over h2c
//	corral core    the room service alone
//	corral check-config FILE   check a config file
//	corral version             version, commit and Go version of this build
//
// Every flag has an environment variable and a key in the config file
// (--config, docs/CONFIG.md); `corral help` and
// `corral <command> -h` list them. This file holds flags and wiring only;
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
	"strings"
	"syscall"
	"time"

	"github.com/corral-rt/corral/auth"
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
  corral version         this build's version, commit and Go version (also --version)
  corral help            this text

Try it:
  corral serve --insecure-dev
  # then, with any WebSocket client (websocat, wscat, a browser console):
  #   connect to ws://127.0.0.1:8080/ws and send
  #   {"hello":{}}
  #   {"join":{"room":"lobby"}}
  #   {"publish":{"room":"lobby","id":"1","payload":{"text":"hi"}}}

Run "corral <command> -h" for the flags of a command. Every flag can also be
set by the environment variable shown in brackets, or by the key of the same
name in the config file (--config FILE; docs/CONFIG.md). A flag beats its
environment variable, which beats the file.
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
	opts, f, err := configure(mode, args, stderr)
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
	logger.Info("corral listening", "mode", args[0], "addr", node.Addr(), "internal", node.InternalAddr(), "insecure_dev", f.insecureDev)
	var runErr error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case runErr = <-node.Err():
		logger.Error("listener failed", "err", runErr)
	case <-node.Drained():
		logger.Info("drained through /admin/drain; shutting down")
	}
	shutdown, cancel := context.WithTimeout(context.Background(), f.shutdownTimeout)
	defer cancel()
	if err := node.Close(shutdown); err != nil && runErr == nil {
		logger.Warn("shutdown incomplete", "err", err)
	}
	if err := endTracing(shutdown); err != nil {
		logger.Warn("tracing: spans not flushed", "err", err)
	}
	return runErr
}

// secretFlags are the flags whose values /debug/pprof/cmdline redacts;
// each has a file form (name + "-file", or CORRAL_..._FILE).
var secretFlags = map[string]bool{"jwt-secret": true, "api-keys": true, "api-key": true, "redis": true, "hooks-key": true, "outbox": true}

// configure parses the command line of a command (args[0]) into the
// server's options.
func configure(mode server.Mode, args []string, stderr io.Writer) (server.Options, *flags, error) {
	fs := flag.NewFlagSet("corral "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := defineFlags(fs, mode)
	if err := parseWithEnv(fs, args[1:]); err != nil {
		return server.Options{}, nil, err
	}
	if f.configFile != "" {
		file, err := readConfig(f.configFile)
		if err != nil {
			return server.Options{}, nil, err
		}
		if err := applyFile(fs, file); err != nil {
			return server.Options{}, nil, err
		}
		f.file = file
	}
	logger, err := newLogger(f.logFormat, f.logLevel, stderr)
	if err != nil {
		return server.Options{}, nil, err
	}
	if err := readSecretFiles(f); err != nil {
		return server.Options{}, nil, err
	}
	if !isSet(fs, "require-exp") {
		f.requireExp = !f.insecureDev
	}
	opts := server.Options{
		Mode:          mode,
		Addr:          f.addr,
		InternalAddr:  f.internalAddr,
		DebugAddr:     f.debugAddr,
		CoreURL:       f.coreURL,
		RedisURL:      f.redisURL,
		OutboxURL:     f.outboxURL,
		RedisPrefix:   f.redisPrefix,
		HistoryMaxLen: f.historyMaxLen,
		HistoryTTL:    f.historyTTL,
		Backlog:       f.backlog,
		EventsMaxLen:  f.eventsMaxLen,
		APIInsecure:   f.apiInsecure || f.insecureDev,
		CoreAPIKey:    f.apiKey,
		Logger:        logger,
		DebugCmdline:  server.RedactArgs(append([]string{os.Args[0]}, args...), func(name string) bool { return secretFlags[name] }),
	}
	if opts.APIKeys, err = apiKeys(f); err != nil {
		return server.Options{}, nil, err
	}
	if mode == server.EdgeOnly && len(opts.APIKeys) == 0 && f.apiKey != "" && (f.internalAddr != "" || f.debugAddr != "") {
		// Without keys of its own, an edge's internal and debug listeners
		// accept the key it presents to its cores: one secret per edge
		// (the chart's), and whoever may call a core's API may drain an
		// edge.
		opts.APIKeys = []string{f.apiKey}
	}
	opts.Core.SessionTTL = f.sessionTTL
	for name, n := range map[string]int{"--api-max-request-bytes": f.apiMaxRequestBytes, "--api-max-event-streams": f.apiMaxEventStreams,
		"--api-max-broadcast-rooms": f.apiMaxBroadcastRooms, "--api-max-members": f.apiMaxMembers, "--api-max-batch": f.apiMaxBatch} {
		if n < 0 {
			return server.Options{}, nil, fmt.Errorf("%s must not be negative", name)
		}
	}
	opts.APIMaxRequestBytes, opts.APIMaxEventStreams = f.apiMaxRequestBytes, f.apiMaxEventStreams
	opts.Core.API.MaxBroadcastRooms, opts.Core.API.MaxMembers = f.apiMaxBroadcastRooms, f.apiMaxMembers
	opts.Core.API.MaxBatch = f.apiMaxBatch
	opts.Core.API.OverloadQueueBytes = f.apiOverloadQueue
	opts.Core.Presence.Grace = f.presenceGrace
	opts.Core.Presence.Tick = f.presenceTick
	opts.Core.Presence.MaxDiffMembers = f.presenceMaxDiff
	opts.PresenceDeadAfter = f.presenceDeadAfter
	opts.RedisReplicas, opts.RedisReplicaTimeout = f.redisReplicas, f.redisReplicaTimeout
	opts.RedisTimeout = f.redisTimeout
	opts.Core.SignalTick = f.signalTick
	table, err := classTable(f, f.file)
	if err != nil {
		return server.Options{}, nil, err
	}
	opts.Core.Classes = roomclass.NewLive(table)
	if f.file != nil {
		opts.Reload = reloader(mode, args, f.file, logger)
	}
	opts.Edge.OriginPatterns = splitList(f.origins)
	opts.Edge.AnyOrigin = f.insecureDev
	opts.Edge.HandshakeRate, opts.Edge.HandshakeBurst = f.admitRate, f.admitBurst
	opts.Edge.ResumeRate, opts.Edge.ResumeBurst = f.resumeRate, f.resumeBurst
	opts.Edge.DrainWindow = f.drainWindow
	switch {
	case mode == server.CoreOnly: // no edge
	case f.coalesceWindow < 0:
		return server.Options{}, nil, errors.New("--coalesce-window must not be negative (0 disables coalescing)")
	case f.coalesceWindow == 0:
		opts.Edge.CoalesceWindow = -1 // edge.Config: negative writes every frame at once
	default:
		opts.Edge.CoalesceWindow = f.coalesceWindow
	}
	opts.Edge.MessageRate, opts.Edge.MessageBurst = f.publishRate, f.publishBurst
	opts.Edge.SignalRate, opts.Edge.SignalBurst = f.signalRate, f.signalBurst
	opts.Edge.ControlRate, opts.Edge.ControlBurst = f.controlRate, f.controlBurst
	opts.Edge.PresenceRate, opts.Edge.PresenceBurst = f.presenceRate, f.presenceBurst
	opts.Edge.QueryRate, opts.Edge.QueryBurst = f.queryRate, f.queryBurst
	opts.Edge.AckRate, opts.Edge.AckBurst = f.ackRate, f.ackBurst
	opts.Edge.MiscRate, opts.Edge.MiscBurst = f.miscRate, f.miscBurst
	opts.Core.ConnQueueFrames, opts.Core.ConnQueueBytes = f.connBacklogFrames, f.connBacklogBytes
	opts.Edge.RateStrikes, opts.Edge.MaxConnsPerUser = f.rateStrikes, f.maxConnsPerUser
	opts.Edge.MaxPending, opts.Edge.ReadLimit = f.maxPending, f.maxFrame
	opts.Edge.HelloTimeout = f.helloTimeout
	opts.Core.MaxPayload, opts.Core.MaxRoomsPerConn = f.maxPayload, f.maxRooms
	opts.ReadHeaderTimeout = f.readHeaderTimeout
	if opts.Hooks, err = hooksConfig(f); err != nil {
		return server.Options{}, nil, err
	}
	opts.Edge.HookHeaders, opts.Edge.HookCookies = splitList(f.hooksHeaders), splitList(f.hooksCookies)
	opts.Edge.CallRate, opts.Edge.CallBurst = f.callRate, f.callBurst
	if mode != server.CoreOnly {
		a, err := authenticator(f, logger)
		if err != nil {
			return server.Options{}, nil, err
		}
		opts.Auth = a
	}
	return opts, f, nil
}

// readSecretFiles fills each secret flag from its file form.
func readSecretFiles(f *flags) error {
	for _, s := range []struct {
		name  string
		value *string
		file  string
	}{
		{"jwt-secret", &f.jwtSecret, f.jwtSecretFile},
		{"api-key", &f.apiKey, f.apiKeyFile},
		{"hooks-key", &f.hooksKey, f.hooksKeyFile},
		{"redis", &f.redisURL, f.redisFile},
	} {
		if s.file == "" {
			continue
		}
		if *s.value != "" {
			return fmt.Errorf("--%s and --%s-file are both set: keep one", s.name, s.name)
		}
		v, err := server.ReadSecretFile(s.file)
		if err != nil {
			return fmt.Errorf("--%s-file: %w", s.name, err)
		}
		*s.value = v
	}
	return nil
}

// isSet reports whether a flag was given, on the command line or in the
// environment.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}

type flags struct {
	configFile                  string
	file                        *roomclass.File // read from configFile; nil without
	addr, internalAddr, coreURL string
	debugAddr                   string
	redisURL, redisPrefix       string
	outboxURL                   string
	historyMaxLen, eventsMaxLen int
	backlog                     int
	insecureDev, apiInsecure    bool
	apiKeys, apiKeysFile        string
	apiMaxRequestBytes          int
	apiMaxEventStreams          int
	apiMaxBroadcastRooms        int
	apiMaxMembers               int
	apiMaxBatch                 int
	apiOverloadQueue            int
	apiKey, apiKeyFile          string
	jwtSecret, jwtKeys          string
	jwtSecretFile, redisFile    string
	requireExp                  bool
	jwtIssuer, jwtAudience      string
	origins                     string
	sessionTTL, shutdownTimeout time.Duration
	drainWindow, signalTick     time.Duration
	coalesceWindow              time.Duration
	historyTTL                  time.Duration
	signalTickRooms             string
	presenceGrace, presenceTick time.Duration
	presenceDeadAfter           time.Duration
	redisReplicas               int
	redisReplicaTimeout         time.Duration
	redisTimeout                time.Duration
	presenceMaxDiff             int
	admitRate, resumeRate       float64
	admitBurst, resumeBurst     int
	logFormat, logLevel         string

	// Abuse limits (docs/SECURITY.md).
	publishRate, signalRate, controlRate           float64
	publishBurst, signalBurst, controlBurst        int
	presenceRate, queryRate, ackRate, miscRate     float64
	presenceBurst, queryBurst, ackBurst, miscBurst int
	connBacklogFrames, connBacklogBytes            int
	rateStrikes, maxConnsPerUser                   int
	maxPending, maxPayload, maxRooms               int
	maxFrame                                       int64
	helloTimeout, readHeaderTimeout                time.Duration
	readOnlyRooms                                  string
	callRate                                       float64
	callBurst                                      int

	// The application's backend (docs/HOOKS.md).
	hooksURL, hooksKey, hooksKeyFile    string
	hooksConnect, hooksRefresh          bool
	hooksCall                           bool
	hooksJoin, hooksPublish             string
	hooksHeaders, hooksCookies          string
	hooksTimeout, hooksJoinWindow       time.Duration
	hooksJoinCacheTTL                   time.Duration
	hooksJoinHerdWindow                 time.Duration
	hooksJoinMaxBatch, hooksMaxInFlight int
	hooksPolicyJoin, hooksPolicyPublish string
	hooksPolicyRefresh                  string
	hooksRefreshGrace                   time.Duration
}

// hooksConfig turns the --hooks-* flags into the hooks' configuration: the
// one place flags choose which events go to the backend (room classes
// replace the patterns later).
func hooksConfig(f *flags) (hooks.Config, error) {
	if f.hooksURL == "" {
		if f.hooksConnect || f.hooksRefresh || f.hooksCall || f.hooksJoin != "" || f.hooksPublish != "" {
			return hooks.Config{}, errors.New("--hooks-connect, --hooks-refresh, --hooks-call, --hooks-join and --hooks-publish need --hooks-url")
		}
		return hooks.Config{}, nil
	}
	pol := hooks.Policy{
		Connect: f.hooksConnect, Refresh: f.hooksRefresh, Call: f.hooksCall,
		Join: splitList(f.hooksJoin), Publish: splitList(f.hooksPublish),
	}
	if err := pol.Check(); err != nil {
		return hooks.Config{}, fmt.Errorf("--hooks-join/--hooks-publish: %w", err)
	}
	var err error
	if pol.JoinFailure, err = hooks.ParseFailure(hooks.HookJoin, f.hooksPolicyJoin); err != nil {
		return hooks.Config{}, fmt.Errorf("--hooks-policy-join: %w", err)
	}
	if pol.PublishFailure, err = hooks.ParseFailure(hooks.HookPublish, f.hooksPolicyPublish); err != nil {
		return hooks.Config{}, fmt.Errorf("--hooks-policy-publish: %w", err)
	}
	if pol.RefreshFailure, err = hooks.ParseFailure(hooks.HookRefresh, f.hooksPolicyRefresh); err != nil {
		return hooks.Config{}, fmt.Errorf("--hooks-policy-refresh: %w", err)
	}
	if f.hooksRefreshGrace < 0 {
		return hooks.Config{}, errors.New("--hooks-refresh-grace: must not be negative")
	}
	pol.RefreshGrace = f.hooksRefreshGrace
	herdWindow := f.hooksJoinHerdWindow
	if herdWindow == 0 {
		herdWindow = -1 // the flag's 0 is off; the Config's 0 is the default
	}
	return hooks.Config{
		URL: f.hooksURL, Key: f.hooksKey, Policy: pol,
		Timeout: f.hooksTimeout, MaxInFlight: f.hooksMaxInFlight,
		JoinWindow: f.hooksJoinWindow, JoinMaxBatch: f.hooksJoinMaxBatch, JoinCacheTTL: f.hooksJoinCacheTTL,
		JoinHerdWindow: herdWindow,
	}, nil
}

func defineFlags(fs *flag.FlagSet, mode server.Mode) *flags {
	f := new(flags)
	fs.StringVar(&f.configFile, "config", "", "YAML `file` of settings: a key per flag (flag name), room classes (rooms), version; the command line and the environment win over it; SIGHUP reloads its room classes (docs/CONFIG.md) [CORRAL_CONFIG]")
	defAddr := "127.0.0.1:8080"
	if mode == server.CoreOnly {
		defAddr = "127.0.0.1:8090"
	}
	fs.StringVar(&f.addr, "addr", defAddr, "listen address `host:port` [CORRAL_ADDR]")
	if mode == server.Serve {
		fs.StringVar(&f.internalAddr, "internal-addr", "", "also serve the internal RoomService API (Connect, gRPC, gRPC-Web) on this `host:port`; keep it private [CORRAL_INTERNAL_ADDR]")
	}
	if mode == server.EdgeOnly {
		fs.StringVar(&f.internalAddr, "internal-addr", "", "serve /metrics and POST /admin/drain on this private `host:port` (then /metrics leaves the public one); its admin endpoints take a key of --api-keys, or the edge's --api-key [CORRAL_INTERNAL_ADDR]")
	}
	if mode == server.EdgeOnly {
		fs.StringVar(&f.coreURL, "core", "http://127.0.0.1:8090", "base `URL` of the core (h2c), or several cores' URLs separated by commas (cores sharing one Redis: links are spread over them and a failed core's sessions move to the others) [CORRAL_CORE]")
	}
	if mode == server.CoreOnly {
		fs.BoolVar(&f.insecureDev, "insecure-dev", false, "local development: the internal API accepts calls without an API key (same as --api-insecure); never in production [CORRAL_INSECURE_DEV]")
	}
	if mode == server.EdgeOnly {
		fs.StringVar(&f.apiKeys, "api-keys", "", "comma-separated bearer `keys` the edge's --internal-addr and --debug-addr accept (each at least 16 characters); empty: its --api-key [CORRAL_API_KEYS]")
		fs.StringVar(&f.apiKeysFile, "api-keys-file", "", "`file` of more API keys, one per line (# comments) [CORRAL_API_KEYS_FILE]")
	}
	if mode != server.EdgeOnly {
		fs.StringVar(&f.apiKeys, "api-keys", "", "comma-separated bearer `keys` the internal API accepts (each at least 16 characters); required for the API over HTTP (corral core, serve --internal-addr) [CORRAL_API_KEYS]")
		fs.StringVar(&f.apiKeysFile, "api-keys-file", "", "`file` of more API keys, one per line (# comments) [CORRAL_API_KEYS_FILE]")
		fs.BoolVar(&f.apiInsecure, "api-insecure", false, "local development: the internal API accepts calls without an API key; never in production [CORRAL_API_INSECURE]")
		fs.IntVar(&f.apiMaxRequestBytes, "api-max-request-bytes", 0, "`bytes` of one internal API request message (0: 4 MiB) [CORRAL_API_MAX_REQUEST_BYTES]")
		fs.IntVar(&f.apiMaxEventStreams, "api-max-event-streams", 0, "`N` RoomService.Events streams open at once per API key (0: 16) [CORRAL_API_MAX_EVENT_STREAMS]")
		fs.IntVar(&f.apiMaxBroadcastRooms, "api-max-broadcast-rooms", 0, "`N` rooms of one RoomService.Broadcast (0: 10000) [CORRAL_API_MAX_BROADCAST_ROOMS]")
		fs.IntVar(&f.apiMaxMembers, "api-max-members", 0, "`N` members and presence entries one RoomService.Members lists (0: 10000) [CORRAL_API_MAX_MEMBERS]")
		fs.IntVar(&f.apiMaxBatch, "api-max-batch", 0, "`N` publishes of one RoomService.Batch (0: 1000) [CORRAL_API_MAX_BATCH]")
		fs.IntVar(&f.apiOverloadQueue, "api-overload-queue", 0, "`bytes` waiting toward the clients (the core's link queues plus the edges' send queues) past which RoomService.Publish and Broadcast answer resource_exhausted with a retry hint instead of queueing more (0: 64 MiB; negative: never refuse) [CORRAL_API_OVERLOAD_QUEUE]")
		fs.IntVar(&f.eventsMaxLen, "events", 0, "`N` events kept in the event log for RoomService.Events (0: 10000 in memory, 100000 in Redis; -1: no event log) [CORRAL_EVENTS]")
	}
	if mode == server.EdgeOnly {
		fs.StringVar(&f.apiKey, "api-key", "", "bearer `key` the edge presents to the core (one of the core's --api-keys) [CORRAL_API_KEY]")
		fs.StringVar(&f.apiKeyFile, "api-key-file", "", "`file` holding --api-key, instead of the flag [CORRAL_API_KEY_FILE]")
	}
	if mode != server.CoreOnly {
		fs.BoolVar(&f.insecureDev, "insecure-dev", false, "local development: accept connections without a verified token (the token, if any, is the user id) and from any origin; never in production [CORRAL_INSECURE_DEV]")
		fs.StringVar(&f.jwtSecret, "jwt-secret", "", "HS256 `secret` that signs connection tokens, at least 32 bytes; prefer --jwt-secret-file or the environment: flags show in ps [CORRAL_JWT_SECRET]")
		fs.StringVar(&f.jwtSecretFile, "jwt-secret-file", "", "`file` holding --jwt-secret, instead of the flag [CORRAL_JWT_SECRET_FILE]")
		fs.BoolVar(&f.requireExp, "require-exp", true, "refuse tokens without an exp claim (close 4401); default true, false with --insecure-dev [CORRAL_REQUIRE_EXP]")
		fs.StringVar(&f.jwtKeys, "jwt-public-keys", "", "PEM `file` of RS256/EdDSA public keys that sign connection tokens [CORRAL_JWT_PUBLIC_KEYS]")
		fs.StringVar(&f.jwtIssuer, "jwt-issuer", "", "required token issuer (iss) [CORRAL_JWT_ISSUER]")
		fs.StringVar(&f.jwtAudience, "jwt-audience", "", "required token audience (aud) [CORRAL_JWT_AUDIENCE]")
		fs.StringVar(&f.origins, "origins", "", "comma-separated browser origin host patterns allowed besides the server's own host, e.g. app.example.com,*.example.com [CORRAL_ORIGINS]")
	}
	if mode != server.EdgeOnly {
		fs.StringVar(&f.redisURL, "redis", "", "Redis `URL` for durable history and resumable sessions shared by every core using it: redis://[:password@]host:port[/db] (one Redis), rediss://... (the same over TLS), redis+sentinel://[:password@]sentinel:26379,sentinel2:26379/mastername[?db=N&sentinel_password=P] (a Sentinel-monitored master), or a Redis 7 Cluster as redis://node:6379?addr=node2:6379&addr=node3:6379 (any node, more seeds as addr); empty: in memory, one process [CORRAL_REDIS]")
		fs.StringVar(&f.outboxURL, "outbox", "", "PostgreSQL `URL` (postgres://user:password@host:port/db) of the application's database whose corral_outbox table this core publishes, each committed row once in commit order per room (docs/OUTBOX.md); several cores may share one; empty: no outbox [CORRAL_OUTBOX]")
		fs.StringVar(&f.redisFile, "redis-file", "", "`file` holding --redis (a URL with a password), instead of the flag [CORRAL_REDIS_FILE]")
		fs.IntVar(&f.redisReplicas, "redis-replicas", 0, "acknowledge a publish only once `N` Redis replicas have it (WAIT), so that a failover loses no acknowledged message; 0: asynchronous replication (a failover may lose the newest messages; members get reset). Not on Redis Cluster [CORRAL_REDIS_REPLICAS]")
		fs.DurationVar(&f.redisReplicaTimeout, "redis-replica-timeout", time.Second, "with --redis-replicas: how long a publish waits for the replicas before it is refused with a retry code (it may have been stored: retry with the same id) [CORRAL_REDIS_REPLICA_TIMEOUT]")
		fs.StringVar(&f.redisPrefix, "redis-prefix", "corral", "prefix of every Redis key [CORRAL_REDIS_PREFIX]")
		fs.DurationVar(&f.redisTimeout, "redis-timeout", 3*time.Second, "bound of every Redis command a store makes: past it a publish, join or resume fails with retry-later (4103) instead of waiting for a stalled or partitioned Redis [CORRAL_REDIS_TIMEOUT]")
		fs.IntVar(&f.historyMaxLen, "history", 0, "messages kept per room `N` (0: 1000 in memory, 10000 in Redis) [CORRAL_HISTORY]")
		fs.DurationVar(&f.historyTTL, "history-ttl", 24*time.Hour, "a room's history is forgotten this long after its last message (in memory: or after its last member left, whichever is later); it then starts over under a new epoch [CORRAL_HISTORY_TTL]")
		fs.DurationVar(&f.signalTick, "signal-tick", 33*time.Millisecond, "how often a room sends the signals (cursors, typing) that changed [CORRAL_SIGNAL_TICK]")
		fs.StringVar(&f.signalTickRooms, "signal-tick-rooms", "", "per-room overrides of --signal-tick: comma-separated pattern=duration, first match wins, e.g. 'canvas:*=16ms,typing:*=100ms'; stands for room classes, not with the config file's rooms (docs/CONFIG.md) [CORRAL_SIGNAL_TICK_ROOMS]")
		fs.DurationVar(&f.presenceGrace, "presence-grace", 15*time.Second, "a dropped connection stays in its rooms' presence this long, so that a resume shows no leave and join; a clean leave is immediate [CORRAL_PRESENCE_GRACE]")
		fs.DurationVar(&f.presenceTick, "presence-tick", 500*time.Millisecond, "how often a room sends its batched presence changes [CORRAL_PRESENCE_TICK]")
		fs.IntVar(&f.presenceMaxDiff, "presence-max-diff", 1000, "rooms with more members than this send presence counts only; clients page the list with PresenceQuery [CORRAL_PRESENCE_MAX_DIFF]")
		fs.DurationVar(&f.presenceDeadAfter, "presence-dead-after", 20*time.Second, "with Redis: a core silent this long is dead and another core removes its members from presence (within this plus 3s) [CORRAL_PRESENCE_DEAD_AFTER]")
		fs.DurationVar(&f.sessionTTL, "session-ttl", 2*time.Minute, "how long a dropped session stays resumable; must exceed the worst server delay plus a client's longest backoff [CORRAL_SESSION_TTL]")
	}
	fs.IntVar(&f.backlog, "backlog", 0, "accept queue `length` of the listeners (0: the kernel's cap, net.core.somaxconn; raise that sysctl for reconnect storms) [CORRAL_BACKLOG]")
	if mode != server.CoreOnly {
		fs.Float64Var(&f.admitRate, "admit-rate", 10000, "new connections admitted per second (token bucket; past it: 503 with a jittered Retry-After; negative: unlimited) [CORRAL_ADMIT_RATE]")
		fs.IntVar(&f.admitBurst, "admit-burst", 10000, "burst of the new-connection bucket [CORRAL_ADMIT_BURST]")
		fs.Float64Var(&f.resumeRate, "resume-rate", 10000, "resuming connections (URL ?resume=1) admitted per second [CORRAL_RESUME_RATE]")
		fs.IntVar(&f.resumeBurst, "resume-burst", 10000, "burst of the resume bucket [CORRAL_RESUME_BURST]")
		fs.DurationVar(&f.drainWindow, "drain-window", 10*time.Second, "a drain (SIGTERM, POST /admin/drain) tells each client to come back after a delay spread over this window [CORRAL_DRAIN_WINDOW]")
		fs.DurationVar(&f.coalesceWindow, "coalesce-window", 10*time.Millisecond, "ignored, kept so that existing flags and configurations still load: no frame waits for a timer, each socket's writer sends what is queued at once, and frames queued while its previous write is under way go together in the next [CORRAL_COALESCE_WINDOW]")
	}
	if mode != server.CoreOnly {
		fs.Float64Var(&f.publishRate, "publish-rate", 50, "publishes per second per connection (token bucket; past it an error frame with retry-after; negative: unlimited) [CORRAL_PUBLISH_RATE]")
		fs.IntVar(&f.publishBurst, "publish-burst", 100, "burst of the per-connection publish bucket [CORRAL_PUBLISH_BURST]")
		fs.Float64Var(&f.signalRate, "signal-rate", 100, "signals per second per connection (token bucket, apart from publishes; negative: unlimited) [CORRAL_SIGNAL_RATE]")
		fs.IntVar(&f.signalBurst, "signal-burst", 200, "burst of the per-connection signal bucket [CORRAL_SIGNAL_BURST]")
		fs.Float64Var(&f.controlRate, "control-rate", 20, "joins and leaves per second per connection (negative: unlimited) [CORRAL_CONTROL_RATE]")
		fs.IntVar(&f.controlBurst, "control-burst", 200, "burst of the per-connection join/leave bucket [CORRAL_CONTROL_BURST]")
		fs.Float64Var(&f.presenceRate, "presence-rate", 10, "presence updates (setPresence) per second per connection (negative: unlimited) [CORRAL_PRESENCE_RATE]")
		fs.IntVar(&f.presenceBurst, "presence-burst", 20, "burst of the per-connection presence-update bucket [CORRAL_PRESENCE_BURST]")
		fs.Float64Var(&f.queryRate, "query-rate", 10, "presence queries (presenceQuery) per second per connection (negative: unlimited) [CORRAL_QUERY_RATE]")
		fs.IntVar(&f.queryBurst, "query-burst", 50, "burst of the per-connection presence-query bucket [CORRAL_QUERY_BURST]")
		fs.Float64Var(&f.ackRate, "ack-rate", 50, "acks per second per connection (negative: unlimited) [CORRAL_ACK_RATE]")
		fs.IntVar(&f.ackBurst, "ack-burst", 200, "burst of the per-connection ack bucket [CORRAL_ACK_BURST]")
		fs.Float64Var(&f.miscRate, "misc-rate", 5, "other frames (pings, a repeated hello, unknown frame kinds) per second per connection (negative: unlimited) [CORRAL_MISC_RATE]")
		fs.IntVar(&f.miscBurst, "misc-burst", 20, "burst of the per-connection bucket of other frames [CORRAL_MISC_BURST]")
		fs.IntVar(&f.connBacklogFrames, "conn-backlog-frames", 1024, "client frames of one connection waiting for the core (past it: close 4105, the backlog dropped; negative: unlimited) [CORRAL_CONN_BACKLOG_FRAMES]")
		fs.IntVar(&f.connBacklogBytes, "conn-backlog-bytes", 8<<20, "`bytes` of client frames of one connection waiting for the core (past it: close 4105; negative: unlimited) [CORRAL_CONN_BACKLOG_BYTES]")
		fs.IntVar(&f.rateStrikes, "rate-strikes", 100, "refusals by the rate limits within 10s that close a connection with 4101 (negative: never) [CORRAL_RATE_STRIKES]")
		fs.IntVar(&f.maxConnsPerUser, "max-conns-per-user", 1000, "connections of one user on this edge (past it: close 4408; negative: unlimited) [CORRAL_MAX_CONNS_PER_USER]")
		fs.IntVar(&f.maxPending, "max-pending", 10000, "connections upgraded but not yet authenticated (past it: 503 with Retry-After; negative: unlimited) [CORRAL_MAX_PENDING]")
		fs.Int64Var(&f.maxFrame, "max-frame", 64<<10, "largest client frame in `bytes` (past it: close 4413) [CORRAL_MAX_FRAME]")
		fs.DurationVar(&f.helloTimeout, "hello-timeout", 10*time.Second, "how long a new connection may take to send and authenticate its hello (past it: close 4405) [CORRAL_HELLO_TIMEOUT]")
	}
	if mode != server.EdgeOnly {
		fs.IntVar(&f.maxPayload, "max-payload", 64<<10, "largest message or signal payload in `bytes` (past it: error 4413) [CORRAL_MAX_PAYLOAD]")
		fs.IntVar(&f.maxRooms, "max-rooms-per-conn", 128, "rooms one connection may be in (past it: error 4408; negative: unlimited) [CORRAL_MAX_ROOMS_PER_CONN]")
		fs.StringVar(&f.readOnlyRooms, "read-only-rooms", "", "comma-separated room patterns where clients may not publish or signal (only internal services do), e.g. 'news:*,announcements'; stands for room classes, not with the config file's rooms (docs/CONFIG.md) [CORRAL_READ_ONLY_ROOMS]")
	}
	fs.StringVar(&f.hooksURL, "hooks-url", "", "the application's HooksService (docs/HOOKS.md), `URL` http:// (h2c) or https://; empty: no hooks [CORRAL_HOOKS_URL]")
	fs.StringVar(&f.hooksKey, "hooks-key", "", "bearer key sent to the hooks backend [CORRAL_HOOKS_KEY]")
	fs.StringVar(&f.hooksKeyFile, "hooks-key-file", "", "`file` holding --hooks-key, instead of the flag [CORRAL_HOOKS_KEY_FILE]")
	fs.DurationVar(&f.hooksTimeout, "hooks-timeout", 2*time.Second, "bound of one hook call (past it: the hook's failure policy applies; closed: the client gets 4103, retry later) [CORRAL_HOOKS_TIMEOUT]")
	fs.IntVar(&f.hooksMaxInFlight, "hooks-max-in-flight", 256, "calls in flight per hook (past it: 4103 at once) [CORRAL_HOOKS_MAX_IN_FLIGHT]")
	if mode != server.CoreOnly {
		fs.BoolVar(&f.hooksConnect, "hooks-connect", false, "the hooks backend authenticates hellos (Connect) instead of the token check; enough without --jwt-secret (other tokens, such as a refresh without --hooks-refresh, are then refused); failure policy closed only: a hello it cannot answer is closed with 4103, retry later [CORRAL_HOOKS_CONNECT]")
		fs.BoolVar(&f.hooksRefresh, "hooks-refresh", false, "the hooks backend answers refreshes (Refresh) [CORRAL_HOOKS_REFRESH]")
		fs.StringVar(&f.hooksPolicyRefresh, "hooks-policy-refresh", "closed", "when the backend cannot answer a refresh: closed (close the connection with 4103, reconnect later) or allow-known (error 4103 for the refresh, the connection is kept until its token's expiry plus --hooks-refresh-grace, then closed with 4104) [CORRAL_HOOKS_POLICY_REFRESH]")
		fs.DurationVar(&f.hooksRefreshGrace, "hooks-refresh-grace", time.Minute, "how long past its token's expiry --hooks-policy-refresh allow-known keeps a connection whose refresh the backend could not answer [CORRAL_HOOKS_REFRESH_GRACE]")
		fs.BoolVar(&f.hooksCall, "hooks-call", false, "client call frames go to the hooks backend (Call); failure policy closed only: a call it cannot answer gets 4103 with retryAfterMs [CORRAL_HOOKS_CALL]")
		fs.StringVar(&f.hooksHeaders, "hooks-headers", "", "comma-separated request headers the Connect hook is shown [CORRAL_HOOKS_HEADERS]")
		fs.StringVar(&f.hooksCookies, "hooks-cookies", "", "comma-separated cookies the Connect hook is shown [CORRAL_HOOKS_COOKIES]")
		fs.Float64Var(&f.callRate, "call-rate", 10, "calls per second per connection (negative: unlimited) [CORRAL_CALL_RATE]")
		fs.IntVar(&f.callBurst, "call-burst", 20, "burst of the per-connection call bucket [CORRAL_CALL_BURST]")
	}
	if mode != server.EdgeOnly {
		fs.StringVar(&f.hooksJoin, "hooks-join", "", "comma-separated room patterns whose joins the hooks backend decides (Join, batched) [CORRAL_HOOKS_JOIN]")
		fs.StringVar(&f.hooksPublish, "hooks-publish", "", "comma-separated room patterns whose publishes the hooks backend checks (Publish) [CORRAL_HOOKS_PUBLISH]")
		fs.StringVar(&f.hooksPolicyJoin, "hooks-policy-join", "closed", "when the backend cannot answer a join: closed (refuse, 4103) or allow-known (resumed rooms pass); the default class's hooks.join-policy [CORRAL_HOOKS_POLICY_JOIN]")
		fs.StringVar(&f.hooksPolicyPublish, "hooks-policy-publish", "closed", "when the backend cannot answer a publish: closed (refuse, 4103, retry with the same id) or open (the message goes through unchecked, counted in corral_hook_unchecked_total); the default class's hooks.publish-policy [CORRAL_HOOKS_POLICY_PUBLISH]")
		fs.DurationVar(&f.hooksJoinWindow, "hooks-join-window", 2*time.Millisecond, "how long a join waits to share its backend call with others [CORRAL_HOOKS_JOIN_WINDOW]")
		fs.DurationVar(&f.hooksJoinHerdWindow, "hooks-join-herd-window", 250*time.Millisecond, "in a herd of joins (200 pairs due within this), a batch waits to fill 200 pairs, at most this long; 0: off [CORRAL_HOOKS_JOIN_HERD_WINDOW]")
		fs.IntVar(&f.hooksJoinMaxBatch, "hooks-join-max-batch", 1000, "pairs per Join call at most [CORRAL_HOOKS_JOIN_MAX_BATCH]")
		fs.DurationVar(&f.hooksJoinCacheTTL, "hooks-join-cache-ttl", 0, "keep each (user, room) admission of the Join hook this long (refusals are never kept); 0: no cache; the default class's hooks.join-cache-ttl [CORRAL_HOOKS_JOIN_CACHE_TTL]")
	}
	fs.DurationVar(&f.readHeaderTimeout, "read-header-timeout", 5*time.Second, "how long a client may take to send its HTTP request headers (slowloris) [CORRAL_READ_HEADER_TIMEOUT]")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 15*time.Second, "how long a shutdown waits for clients to leave [CORRAL_SHUTDOWN_TIMEOUT]")
	fs.StringVar(&f.debugAddr, "debug-addr", "", "serve Go's profiles (/debug/pprof/) on this private `host:port`; empty: off [CORRAL_DEBUG_ADDR]")
	fs.StringVar(&f.logFormat, "log-format", "text", "log format: text or json [CORRAL_LOG_FORMAT]")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error [CORRAL_LOG_LEVEL]")
	return f
}

// parseWithEnv parses args; flags not given on the command line take their
// CORRAL_* environment variable when it is set.
func parseWithEnv(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	var err error
	fs.VisitAll(func(fl *flag.Flag) {
		if set[fl.Name] || err != nil {
			return
		}
		env := "CORRAL_" + strings.ToUpper(strings.ReplaceAll(fl.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			// fs.Set, not fl.Value.Set: the flag then counts as set.
			if e := fs.Set(fl.Name, v); e != nil {
				err = fmt.Errorf("%s: %w", env, e)
			}
		}
	})
	return err
}

func authenticator(f *flags, logger *slog.Logger) (auth.Authenticator, error) {
	if f.jwtSecret == "" && f.jwtKeys == "" {
		if f.hooksConnect && !f.insecureDev {
			// The backend authenticates hellos; a token that does not go to
			// it (a refresh without --hooks-refresh) is refused.
			return auth.None{}, nil
		}
		if !f.insecureDev {
			return nil, errors.New("no way to verify connection tokens: set --jwt-secret or --jwt-public-keys, let the hooks backend do it (--hooks-url with --hooks-connect), or run with --insecure-dev for local development")
		}
		if f.hooksConnect {
			logger.Warn("--insecure-dev: the hooks backend authenticates hellos, but any origin is accepted and a refresh's token (without --hooks-refresh) is the user id")
			return auth.Dev{}, nil
		}
		logger.Warn("--insecure-dev: connections are not authenticated and any origin is accepted")
		return auth.Dev{}, nil
	}
	cfg := auth.JWTConfig{Issuer: f.jwtIssuer, Audience: f.jwtAudience, Leeway: 5 * time.Second, RequireExpiry: f.requireExp}
	if f.jwtSecret != "" {
		cfg.HMACSecret = []byte(f.jwtSecret)
	}
	if f.jwtKeys != "" {
		pem, err := os.ReadFile(f.jwtKeys)
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
func apiKeys(f *flags) ([]string, error) {
	keys := server.ParseAPIKeys(f.apiKeys)
	if f.apiKeysFile != "" {
		more, err := server.ReadAPIKeyFile(f.apiKeysFile)
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

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
