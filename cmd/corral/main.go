// Command corral runs the corral real-time rooms server.
//
//	corral serve   edge and core in one process, in memory (the default)
//	corral edge    a WebSocket edge linked to a core over h2c
//	corral core    the room service alone
//
// Every flag has an environment variable; `corral help` and
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
	"github.com/corral-rt/corral/core"
	"github.com/corral-rt/corral/server"
	"github.com/corral-rt/corral/tracing"
)

const usage = `corral — a real-time rooms server.

Usage:
  corral serve [flags]   edge + core in one process, in memory (start here)
  corral edge  [flags]   WebSocket edge; needs --core URL of a running core (or several: a,b,c)
  corral core  [flags]   room service for edges and internal services
  corral help            this text

Try it:
  corral serve --insecure-dev
  # then, with any WebSocket client (websocat, wscat, a browser console):
  #   connect to ws://127.0.0.1:8080/ws and send
  #   {"hello":{}}
  #   {"join":{"room":"lobby"}}
  #   {"publish":{"room":"lobby","id":"1","payload":{"text":"hi"}}}

Run "corral <command> -h" for the flags of a command. Every flag can also be
set by the environment variable shown in brackets.
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
	// Off unless OTEL_EXPORTER_OTLP_ENDPOINT is set: see docs/TRACING.md.
	endTracing, err := tracing.Setup(ctx, "corral-"+args[0])
	if err != nil {
		return err
	}
	if tracing.Enabled() {
		logger.Info("tracing on: OTLP exporter from OTEL_* settings")
	}
	node, err := server.Start(opts)
	if err != nil {
		return err
	}
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
var secretFlags = map[string]bool{"jwt-secret": true, "api-keys": true, "api-key": true, "redis": true}

// configure parses the command line of a command (args[0]) into the
// server's options.
func configure(mode server.Mode, args []string, stderr io.Writer) (server.Options, *flags, error) {
	fs := flag.NewFlagSet("corral "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := defineFlags(fs, mode)
	if err := parseWithEnv(fs, args[1:]); err != nil {
		return server.Options{}, nil, err
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
	opts.Core.SessionTTL = f.sessionTTL
	for name, n := range map[string]int{"--api-max-request-bytes": f.apiMaxRequestBytes, "--api-max-event-streams": f.apiMaxEventStreams,
		"--api-max-broadcast-rooms": f.apiMaxBroadcastRooms, "--api-max-members": f.apiMaxMembers} {
		if n < 0 {
			return server.Options{}, nil, fmt.Errorf("%s must not be negative", name)
		}
	}
	opts.APIMaxRequestBytes, opts.APIMaxEventStreams = f.apiMaxRequestBytes, f.apiMaxEventStreams
	opts.Core.API.MaxBroadcastRooms, opts.Core.API.MaxMembers = f.apiMaxBroadcastRooms, f.apiMaxMembers
	opts.Core.API.OverloadQueueBytes = f.apiOverloadQueue
	opts.Core.Presence.Grace = f.presenceGrace
	opts.Core.Presence.Tick = f.presenceTick
	opts.Core.Presence.MaxDiffMembers = f.presenceMaxDiff
	opts.PresenceDeadAfter = f.presenceDeadAfter
	opts.RedisReplicas, opts.RedisReplicaTimeout = f.redisReplicas, f.redisReplicaTimeout
	opts.RedisTimeout = f.redisTimeout
	opts.Core.SignalTick = f.signalTick
	for _, item := range splitList(f.signalTickRooms) {
		pattern, d, ok := strings.Cut(item, "=")
		tick, err := time.ParseDuration(d)
		if !ok || pattern == "" || err != nil || tick <= 0 {
			return server.Options{}, nil, fmt.Errorf("--signal-tick-rooms: %q: want pattern=duration, e.g. canvas:*=16ms", item)
		}
		opts.Core.SignalTicks = append(opts.Core.SignalTicks, core.RoomTick{Pattern: pattern, Tick: tick})
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
	opts.Core.ReadOnlyRooms = splitList(f.readOnlyRooms)
	opts.ReadHeaderTimeout = f.readHeaderTimeout
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
	addr, internalAddr, coreURL string
	debugAddr                   string
	redisURL, redisPrefix       string
	historyMaxLen, eventsMaxLen int
	backlog                     int
	insecureDev, apiInsecure    bool
	apiKeys, apiKeysFile        string
	apiMaxRequestBytes          int
	apiMaxEventStreams          int
	apiMaxBroadcastRooms        int
	apiMaxMembers               int
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
}

func defineFlags(fs *flag.FlagSet, mode server.Mode) *flags {
	f := new(flags)
	defAddr := "127.0.0.1:8080"
	if mode == server.CoreOnly {
		defAddr = "127.0.0.1:8090"
	}
	fs.StringVar(&f.addr, "addr", defAddr, "listen address `host:port` [CORRAL_ADDR]")
	if mode == server.Serve {
		fs.StringVar(&f.internalAddr, "internal-addr", "", "also serve the internal RoomService API (Connect, gRPC, gRPC-Web) on this `host:port`; keep it private [CORRAL_INTERNAL_ADDR]")
	}
	if mode == server.EdgeOnly {
		fs.StringVar(&f.coreURL, "core", "http://127.0.0.1:8090", "base `URL` of the core (h2c), or several cores' URLs separated by commas (cores sharing one Redis: links are spread over them and a failed core's sessions move to the others) [CORRAL_CORE]")
	}
	if mode == server.CoreOnly {
		fs.BoolVar(&f.insecureDev, "insecure-dev", false, "local development: the internal API accepts calls without an API key (same as --api-insecure); never in production [CORRAL_INSECURE_DEV]")
	}
	if mode != server.EdgeOnly {
		fs.StringVar(&f.apiKeys, "api-keys", "", "comma-separated bearer `keys` the internal API accepts (each at least 16 characters); required for the API over HTTP (corral core, serve --internal-addr) [CORRAL_API_KEYS]")
		fs.StringVar(&f.apiKeysFile, "api-keys-file", "", "`file` of more API keys, one per line (# comments) [CORRAL_API_KEYS_FILE]")
		fs.BoolVar(&f.apiInsecure, "api-insecure", false, "local development: the internal API accepts calls without an API key; never in production [CORRAL_API_INSECURE]")
		fs.IntVar(&f.apiMaxRequestBytes, "api-max-request-bytes", 0, "`bytes` of one internal API request message (0: 4 MiB) [CORRAL_API_MAX_REQUEST_BYTES]")
		fs.IntVar(&f.apiMaxEventStreams, "api-max-event-streams", 0, "`N` RoomService.Events streams open at once per API key (0: 16) [CORRAL_API_MAX_EVENT_STREAMS]")
		fs.IntVar(&f.apiMaxBroadcastRooms, "api-max-broadcast-rooms", 0, "`N` rooms of one RoomService.Broadcast (0: 10000) [CORRAL_API_MAX_BROADCAST_ROOMS]")
		fs.IntVar(&f.apiMaxMembers, "api-max-members", 0, "`N` members and presence entries one RoomService.Members lists (0: 10000) [CORRAL_API_MAX_MEMBERS]")
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
		fs.StringVar(&f.redisURL, "redis", "", "Redis `URL` (redis://host:port/db, or any node of a Redis 7 Cluster) for durable history and resumable sessions shared by every core using it; empty: in memory, one process [CORRAL_REDIS]")
		fs.StringVar(&f.redisFile, "redis-file", "", "`file` holding --redis (a URL with a password), instead of the flag [CORRAL_REDIS_FILE]")
		fs.IntVar(&f.redisReplicas, "redis-replicas", 0, "acknowledge a publish only once `N` Redis replicas have it (WAIT), so that a failover loses no acknowledged message; 0: asynchronous replication (a failover may lose the newest messages; members get reset). Not on Redis Cluster [CORRAL_REDIS_REPLICAS]")
		fs.DurationVar(&f.redisReplicaTimeout, "redis-replica-timeout", time.Second, "with --redis-replicas: how long a publish waits for the replicas before it is refused with a retry code (it may have been stored: retry with the same id) [CORRAL_REDIS_REPLICA_TIMEOUT]")
		fs.StringVar(&f.redisPrefix, "redis-prefix", "corral", "prefix of every Redis key [CORRAL_REDIS_PREFIX]")
		fs.DurationVar(&f.redisTimeout, "redis-timeout", 3*time.Second, "bound of every Redis command a store makes: past it a publish, join or resume fails with retry-later (4103) instead of waiting for a stalled or partitioned Redis [CORRAL_REDIS_TIMEOUT]")
		fs.IntVar(&f.historyMaxLen, "history", 0, "messages kept per room `N` (0: 1000 in memory, 10000 in Redis) [CORRAL_HISTORY]")
		fs.DurationVar(&f.historyTTL, "history-ttl", 24*time.Hour, "a room's history is forgotten this long after its last message (in memory: or after its last member left, whichever is later); it then starts over under a new epoch [CORRAL_HISTORY_TTL]")
		fs.DurationVar(&f.signalTick, "signal-tick", 33*time.Millisecond, "how often a room sends the signals (cursors, typing) that changed [CORRAL_SIGNAL_TICK]")
		fs.StringVar(&f.signalTickRooms, "signal-tick-rooms", "", "per-room overrides of --signal-tick: comma-separated pattern=duration, first match wins, e.g. 'canvas:*=16ms,typing:*=100ms' [CORRAL_SIGNAL_TICK_ROOMS]")
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
		fs.DurationVar(&f.coalesceWindow, "coalesce-window", 5*time.Millisecond, "a socket written within this window gets its next frames queued and written together once the window has passed; an idle socket's frame is written at once; 0: every frame written as soon as it can be [CORRAL_COALESCE_WINDOW]")
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
		fs.StringVar(&f.readOnlyRooms, "read-only-rooms", "", "comma-separated room patterns where clients may not publish or signal (only internal services do), e.g. 'news:*,announcements' [CORRAL_READ_ONLY_ROOMS]")
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
		if !f.insecureDev {
			return nil, errors.New("no way to verify connection tokens: set --jwt-secret or --jwt-public-keys, or run with --insecure-dev for local development")
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
