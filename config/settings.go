package config

import (
	"time"

	"github.com/corral-rt/corral/roomclass"
)

// Settings is every setting of every command. Each field's tags make its
// key (flags, environment, file, docs):
//
//	key       the name: the flag --key, the file key, CORRAL_KEY
//	cmd       the commands that have it (serve, edge, core); empty: all
//	flag      "true": a command-line flag of those commands (operational);
//	          otherwise a file key and environment variable only
//	group     where --help and `corral config keys` list it
//	default   its text form's default; coredefault: corral core's, when
//	          different
//	unit      what a number counts (bytes, per second, …); durations
//	          and the typed values say it themselves
//	enum      every value the key takes ("closed,allow-known"); any
//	          other is refused where it is set (flag, environment, file)
//	secret    "true": redacted from /debug/pprof/cmdline
//	help      one line for --help, `corral config keys` and docs/CONFIG.md
//
// A struct field without a key groups more settings. The per-package
// configurations embed these structs (core.Config embeds Core, edge.Config
// Edge, hooks.Config Hooks, …): a setting is declared here once.
type Settings struct {
	// Config is the config file; a flag and CORRAL_CONFIG, not a key of
	// the file itself.
	Config string `key:"config" flag:"true" group:"general" help:"YAML file of settings: the keys of corral config keys, room classes (rooms), version; flags and the environment win over it; SIGHUP reloads its room classes (docs/CONFIG.md)"`

	Node     Node
	Auth     Auth
	Core     Core
	API      API
	Presence Presence
	Edge     Edge
	Hooks    Hooks
	Policy   HookPolicy
	Log      Log
}

// Node is the process's listeners and stores (server.Options).
type Node struct {
	Addr         string `key:"addr" flag:"true" group:"listeners" default:"127.0.0.1:8080" coredefault:"127.0.0.1:8090" help:"listen address host:port: the WebSocket endpoint (serve, edge) or the RoomService API (core)"`
	InternalAddr string `key:"internal-addr" cmd:"serve,edge" flag:"true" group:"listeners" help:"private host:port of the admin endpoints (POST /admin/drain, /admin/reload) and /metrics, which then leave the public one; serve also serves the internal RoomService API there; keep it private"`
	CoreURL      string `key:"core" cmd:"edge" flag:"true" group:"listeners" default:"http://127.0.0.1:8090" help:"base URL of the core (h2c), or several cores' URLs separated by commas (cores sharing one Redis: links are spread over them and a failed core's sessions move to the others)"`
	DebugAddr    string `key:"debug-addr" flag:"true" group:"observability" help:"serve Go's profiles (/debug/pprof/) on this private host:port; empty: off"`
	Backlog      int    `key:"backlog" group:"listeners" unit:"connections" help:"accept queue length of the listeners (0: the kernel's cap, net.core.somaxconn; raise that sysctl for reconnect storms)"`

	ReadHeaderTimeout time.Duration `key:"read-header-timeout" group:"listeners" default:"5s" help:"how long a client may take to send its HTTP request headers (slowloris)"`
	ShutdownTimeout   time.Duration `key:"shutdown-timeout" group:"listeners" default:"15s" help:"how long a shutdown waits for clients to leave"`

	RedisURL            string        `key:"redis" cmd:"serve,core" flag:"true" group:"store" secret:"true" help:"Redis URL for durable history and resumable sessions shared by every core using it: redis://[:password@]host:port[/db], rediss://... (TLS), redis+sentinel://[:password@]sentinel:26379,sentinel2:26379/mastername[?db=N&sentinel_password=P], or a Redis 7 Cluster as redis://node:6379?addr=node2:6379&addr=node3:6379; empty: in memory, one process"`
	RedisFile           string        `key:"redis-file" cmd:"serve,core" flag:"true" group:"store" help:"file holding the redis URL (with a password), instead of the flag"`
	RedisPrefix         string        `key:"redis-prefix" cmd:"serve,core" flag:"true" group:"store" default:"corral" help:"prefix of every Redis key"`
	RedisTimeout        time.Duration `key:"redis-timeout" cmd:"serve,core" group:"store" default:"3s" help:"bound of every Redis command a store makes: past it a publish, join or resume fails with retry-later (4103) instead of waiting for a stalled or partitioned Redis"`
	RedisReplicas       int           `key:"redis-replicas" cmd:"serve,core" group:"store" unit:"replicas" help:"acknowledge a publish only once this many Redis replicas have it (WAIT), so that a failover loses no acknowledged message; 0: asynchronous replication. Not on Redis Cluster"`
	RedisReplicaTimeout time.Duration `key:"redis-replica-timeout" cmd:"serve,core" group:"store" default:"1s" help:"with redis-replicas: how long a publish waits for the replicas before it is refused with a retry code (it may have been stored: retry with the same id)"`
	OutboxURL           string        `key:"outbox" cmd:"serve,core" flag:"true" group:"store" secret:"true" help:"PostgreSQL URL (postgres://user:password@host:port/db) of the application's database whose corral_outbox table this core publishes, each committed row once in commit order per room (docs/OUTBOX.md); empty: no outbox"`
	HistoryMaxLen       int           `key:"history" cmd:"serve,core" group:"store" unit:"messages" help:"messages kept per room of the default class (0: 1000 in memory, 10000 in Redis); a class sets its own history.size"`
	HistoryTTL          time.Duration `key:"history-ttl" cmd:"serve,core" group:"store" default:"24h" help:"the default class's history is forgotten this long after its last message (in memory: or after its last member left, whichever is later); it then starts over under a new epoch"`
	HistoryMaxBytes     Limit         `key:"history-max-bytes" cmd:"serve,core" group:"store" default:"268435456" unit:"bytes" help:"bound of the in-memory history of every room together (without Redis); past it whole rooms nobody is in go first, least recently used first (they start over under a new epoch), then the oldest half of the largest rooms' history; unlimited: no bound"`
	HistoryMaxKeys      Limit         `key:"history-max-keys" cmd:"serve,core" group:"store" default:"1048576" unit:"keys" help:"idempotency keys (publish ids) and sender sequences the in-memory history remembers within their 2-minute window, every room together (without Redis); past it a publish with a new id is refused with retry-later (4103; API: resource_exhausted) until keys expire, a retry of a remembered id is still answered; unlimited: no bound"`
	EventsMaxLen        int           `key:"events" cmd:"serve,core" group:"store" unit:"events" help:"events kept in the event log for RoomService.Events (0: 10000 in memory, 100000 in Redis; -1: no event log)"`
	PresenceDeadAfter   time.Duration `key:"presence-dead-after" cmd:"serve,core" group:"store" default:"20s" help:"with Redis: a core silent this long is dead and another core removes its members from presence (within this plus 3s)"`

	APIMaxRequestBytes int `key:"api-max-request-bytes" cmd:"serve,core" group:"limits" default:"4194304" unit:"bytes" help:"bytes of one internal API request message"`
	APIMaxEventStreams int `key:"api-max-event-streams" cmd:"serve,core" group:"limits" default:"16" unit:"streams" help:"RoomService.Events streams open at once per API key"`
}

// Auth is how clients, edges and internal callers are authenticated.
type Auth struct {
	InsecureDev   bool   `key:"insecure-dev" flag:"true" group:"auth" help:"local development: accept connections without a verified token (the token, if any, is the user id) and from any origin, and internal API calls without a key; never in production"`
	JWTSecret     string `key:"jwt-secret" cmd:"serve,edge" flag:"true" group:"auth" secret:"true" help:"HS256 secret that signs connection tokens, at least 32 bytes; prefer jwt-secret-file or the environment: flags show in ps"`
	JWTSecretFile string `key:"jwt-secret-file" cmd:"serve,edge" flag:"true" group:"auth" help:"file holding jwt-secret, instead of the flag"`
	JWTPublicKeys string `key:"jwt-public-keys" cmd:"serve,edge" flag:"true" group:"auth" help:"PEM file of RS256/EdDSA public keys that sign connection tokens"`
	JWTIssuer     string `key:"jwt-issuer" cmd:"serve,edge" flag:"true" group:"auth" help:"required token issuer (iss)"`
	JWTAudience   string `key:"jwt-audience" cmd:"serve,edge" flag:"true" group:"auth" help:"required token audience (aud)"`
	RequireExp    bool   `key:"require-exp" cmd:"serve,edge" flag:"true" group:"auth" default:"true" help:"refuse tokens without an exp claim (close 4401); false by default with insecure-dev"`
	APIKeys       string `key:"api-keys" flag:"true" group:"auth" secret:"true" help:"comma-separated bearer keys the internal listeners accept (each at least 16 characters): the API over HTTP (core, serve's internal-addr), admin and debug endpoints; an edge without them accepts its api-key"`
	APIKeysFile   string `key:"api-keys-file" flag:"true" group:"auth" help:"file of more API keys, one per line (# comments)"`
	APIInsecure   bool   `key:"api-insecure" cmd:"serve,core" group:"auth" help:"local development: the internal API accepts calls without an API key; never in production"`
	APIKey        string `key:"api-key" cmd:"edge" flag:"true" group:"auth" secret:"true" help:"bearer key the edge presents to the core (one of the core's api-keys)"`
	APIKeyFile    string `key:"api-key-file" cmd:"edge" flag:"true" group:"auth" help:"file holding api-key, instead of the flag"`
}

// Core is the settings of the room service (core.Config embeds it).
type Core struct {
	SessionTTL      time.Duration `key:"session-ttl" cmd:"serve,core" group:"rooms" default:"2m" help:"how long a dropped session stays resumable; must exceed the worst server delay plus a client's longest backoff"`
	SignalTick      time.Duration `key:"signal-tick" cmd:"serve,core" group:"rooms" default:"33ms" help:"the default class's signal-tick: how often a room sends the signals (cursors, typing) that changed"`
	MaxPayload      int           `key:"max-payload" cmd:"serve,core" group:"rooms" default:"65536" unit:"bytes" help:"the default class's max-payload: largest message or signal payload (past it: error 4413)"`
	MaxRoomsPerConn Limit         `key:"max-rooms-per-conn" cmd:"serve,core" flag:"true" group:"limits" default:"128" unit:"rooms" help:"rooms one connection may be in (past it: error 4408)"`
	ConnQueueFrames Limit         `key:"conn-backlog-frames" cmd:"serve,edge" group:"limits" default:"1024" unit:"frames" help:"client frames of one connection waiting for the core (past it: close 4105, the backlog dropped)"`
	ConnQueueBytes  Limit         `key:"conn-backlog-bytes" cmd:"serve,edge" group:"limits" default:"25165824" unit:"bytes" help:"bytes of client frames of one connection waiting for the core (past it: close 4105); the default holds what one sender may send at once at the default limits (publish-burst and signal-burst frames of max-frame): raise it with them"`
}

// API is the internal API's bounds (core.APIConfig embeds it).
type API struct {
	MaxBroadcastRooms  int   `key:"api-max-broadcast-rooms" cmd:"serve,core" group:"limits" default:"10000" unit:"rooms" help:"rooms of one RoomService.Broadcast"`
	MaxMembers         int   `key:"api-max-members" cmd:"serve,core" group:"limits" default:"10000" unit:"members" help:"members and presence entries one RoomService.Members lists"`
	MaxBatch           int   `key:"api-max-batch" cmd:"serve,core" group:"limits" default:"1000" unit:"publishes" help:"publishes of one RoomService.Batch"`
	OverloadQueueBytes Limit `key:"api-overload-queue" cmd:"serve,core" group:"limits" default:"67108864" unit:"bytes" help:"bytes waiting toward the clients (the core's link queues plus the edges' send queues) past which RoomService.Publish and Broadcast answer resource_exhausted with a retry hint instead of queueing more; unlimited: never refuse"`
}

// Presence tunes presence (core.PresenceConfig embeds it).
type Presence struct {
	Grace          time.Duration `key:"presence-grace" cmd:"serve,core" group:"rooms" default:"15s" help:"the default class's presence.grace: a dropped connection stays in its rooms' presence this long, so that a resume shows no leave and join"`
	Tick           time.Duration `key:"presence-tick" cmd:"serve,core" group:"rooms" default:"500ms" help:"how often a room sends its batched presence changes"`
	MaxDiffMembers int           `key:"presence-max-diff" cmd:"serve,core" group:"rooms" default:"1000" unit:"members" help:"the default class's presence.max-diff: rooms with more members than this send presence counts only; clients page the list with PresenceQuery"`
}

// Edge is the WebSocket edge's settings (edge.Config embeds it).
type Edge struct {
	ReadLimit       int64         `key:"max-frame" cmd:"serve,edge" group:"limits" default:"65536" unit:"bytes" help:"largest client frame (past it: close 4413)"`
	ReplayBytes     int           `key:"replay-max-bytes" cmd:"serve,edge" group:"limits" unit:"bytes" help:"replays queued for one connection, apart from its send queue; past it the connection is closed as a slow consumer (0: a history page of the largest frames, 1000 x (max-frame + 1 KiB))"`
	HelloTimeout    time.Duration `key:"hello-timeout" cmd:"serve,edge" group:"limits" default:"10s" help:"how long a new connection may take to send and authenticate its hello (past it: close 4405)"`
	DrainWindow     time.Duration `key:"drain-window" cmd:"serve,edge" group:"listeners" default:"10s" help:"a drain (SIGTERM, POST /admin/drain) tells each client to come back after a delay spread over this window"`
	StreamHeartbeat time.Duration `key:"stream-heartbeat" cmd:"serve,edge" group:"limits" default:"15s" help:"an HTTP stream (SSE, HTTP streaming: docs/TRANSPORTS.md) silent this long gets a heartbeat, under the idle timeouts of proxies (often 30 s)"`
	MaxPostBytes    int64         `key:"max-post-bytes" cmd:"serve,edge" group:"limits" unit:"bytes" help:"largest POST body to an HTTP stream, each frame in it also under max-frame (past it: 413; 0: 4 x max-frame)"`
	CoalesceWindow  time.Duration `key:"coalesce-window" cmd:"serve,edge" group:"limits" help:"ignored, kept so that existing configurations still load: no frame waits for a timer"`

	HandshakeRate   Rate  `key:"admit-rate" cmd:"serve,edge" flag:"true" group:"limits" default:"10000" unit:"per second" help:"new connections admitted per second (token bucket; past it: 503 with a jittered Retry-After)"`
	HandshakeBurst  int   `key:"admit-burst" cmd:"serve,edge" group:"limits" default:"10000" unit:"connections" help:"burst of the new-connection bucket"`
	ResumeRate      Rate  `key:"resume-rate" cmd:"serve,edge" group:"limits" default:"10000" unit:"per second" help:"resuming connections (URL ?resume=1) admitted per second"`
	ResumeBurst     int   `key:"resume-burst" cmd:"serve,edge" group:"limits" default:"10000" unit:"connections" help:"burst of the resume bucket"`
	MessageRate     Rate  `key:"publish-rate" cmd:"serve,edge" group:"limits" default:"50" unit:"per second" help:"publishes per connection (token bucket; past it an error frame with retry-after)"`
	MessageBurst    int   `key:"publish-burst" cmd:"serve,edge" group:"limits" default:"100" unit:"publishes" help:"burst of the per-connection publish bucket"`
	SignalRate      Rate  `key:"signal-rate" cmd:"serve,edge" group:"limits" default:"100" unit:"per second" help:"signals per connection (token bucket, apart from publishes)"`
	SignalBurst     int   `key:"signal-burst" cmd:"serve,edge" group:"limits" default:"200" unit:"signals" help:"burst of the per-connection signal bucket"`
	ControlRate     Rate  `key:"control-rate" cmd:"serve,edge" group:"limits" default:"20" unit:"per second" help:"joins and leaves per connection"`
	ControlBurst    int   `key:"control-burst" cmd:"serve,edge" group:"limits" default:"200" unit:"frames" help:"burst of the per-connection join/leave bucket"`
	PresenceRate    Rate  `key:"presence-rate" cmd:"serve,edge" group:"limits" default:"10" unit:"per second" help:"presence updates (setPresence) per connection"`
	PresenceBurst   int   `key:"presence-burst" cmd:"serve,edge" group:"limits" default:"20" unit:"updates" help:"burst of the per-connection presence-update bucket"`
	QueryRate       Rate  `key:"query-rate" cmd:"serve,edge" group:"limits" default:"10" unit:"per second" help:"presence queries (presenceQuery) per connection"`
	QueryBurst      int   `key:"query-burst" cmd:"serve,edge" group:"limits" default:"50" unit:"queries" help:"burst of the per-connection presence-query bucket"`
	AckRate         Rate  `key:"ack-rate" cmd:"serve,edge" group:"limits" default:"50" unit:"per second" help:"acks per connection"`
	AckBurst        int   `key:"ack-burst" cmd:"serve,edge" group:"limits" default:"200" unit:"acks" help:"burst of the per-connection ack bucket"`
	MiscRate        Rate  `key:"misc-rate" cmd:"serve,edge" group:"limits" default:"5" unit:"per second" help:"other frames (pings, a repeated hello, unknown frame kinds) per connection"`
	MiscBurst       int   `key:"misc-burst" cmd:"serve,edge" group:"limits" default:"20" unit:"frames" help:"burst of the per-connection bucket of other frames"`
	CallRate        Rate  `key:"call-rate" cmd:"serve,edge" group:"limits" default:"10" unit:"per second" help:"calls per connection"`
	CallBurst       int   `key:"call-burst" cmd:"serve,edge" group:"limits" default:"20" unit:"calls" help:"burst of the per-connection call bucket"`
	RateStrikes     Limit `key:"rate-strikes" cmd:"serve,edge" group:"limits" default:"100" unit:"refusals" help:"refusals by the rate limits within 10s that close a connection with 4101 (unlimited: never)"`
	MaxConnsPerUser Limit `key:"max-conns-per-user" cmd:"serve,edge" flag:"true" group:"limits" default:"1000" unit:"connections" help:"connections of one user on this edge (past it: close 4408)"`
	MaxPending      Limit `key:"max-pending" cmd:"serve,edge" group:"limits" default:"10000" unit:"connections" help:"connections upgraded but not yet authenticated (past it: 503 with Retry-After)"`

	OriginPatterns []string `key:"origins" cmd:"serve,edge" flag:"true" group:"auth" help:"comma-separated browser origin host patterns allowed besides the server's own host, e.g. app.example.com,*.example.com"`

	HookHeaders []string `key:"hooks-headers" cmd:"serve,edge" group:"hooks" help:"comma-separated request headers the Connect hook is shown"`
	HookCookies []string `key:"hooks-cookies" cmd:"serve,edge" group:"hooks" help:"comma-separated cookies the Connect hook is shown"`
}

// Hooks is the application's backend (hooks.Config embeds it).
type Hooks struct {
	URL            string        `key:"hooks-url" flag:"true" group:"hooks" help:"the application's HooksService (docs/HOOKS.md), URL http:// (h2c) or https://; empty: no hooks"`
	Key            string        `key:"hooks-key" group:"hooks" secret:"true" help:"bearer key sent to the hooks backend"`
	KeyFile        string        `key:"hooks-key-file" flag:"true" group:"hooks" help:"file holding hooks-key"`
	Timeout        time.Duration `key:"hooks-timeout" group:"hooks" default:"2s" help:"bound of one hook call (past it: the hook's failure policy applies; closed: the client gets 4103, retry later)"`
	MaxInFlight    int           `key:"hooks-max-in-flight" group:"hooks" default:"256" unit:"calls" help:"calls in flight per hook (past it: 4103 at once)"`
	ResponseBudget int64         `key:"hooks-response-budget" group:"hooks" default:"67108864" unit:"bytes" help:"bytes of backend responses being read, every hook's calls together; a call whose response would pass it fails as overloaded (each response is also bounded on its own, 4 MiB)"`
	JoinWindow     time.Duration `key:"hooks-join-window" cmd:"serve,core" group:"hooks" default:"2ms" help:"how long a join waits to share its backend call with others"`
	JoinHerdWindow Window        `key:"hooks-join-herd-window" cmd:"serve,core" group:"hooks" default:"250ms" help:"in a herd of joins (200 pairs due within this), a batch waits to fill 200 pairs, at most this long; off: every batch waits hooks-join-window"`
	JoinMaxBatch   int           `key:"hooks-join-max-batch" cmd:"serve,core" group:"hooks" default:"1000" unit:"pairs" help:"pairs per Join call at most"`
	JoinCacheTTL   time.Duration `key:"hooks-join-cache-ttl" cmd:"serve,core" group:"hooks" help:"the default class's hooks.join-cache-ttl: keep each (user, room) admission of the Join hook this long (refusals are never kept); 0: no cache"`
}

// HookPolicy is which events go to the backend and what happens when it
// cannot answer (hooks.Policy embeds it as it is; the failure policies
// are the room classes' values, roomclass.Failure).
type HookPolicy struct {
	Connect       bool              `key:"hooks-connect" cmd:"serve,edge" group:"hooks" help:"the hooks backend authenticates hellos (Connect) instead of the token check; enough without jwt-secret; failure policy closed only: a hello it cannot answer is closed with 4103, retry later"`
	Refresh       bool              `key:"hooks-refresh" cmd:"serve,edge" group:"hooks" help:"the hooks backend answers refreshes (Refresh)"`
	Call          bool              `key:"hooks-call" cmd:"serve,edge" group:"hooks" help:"client call frames go to the hooks backend (Call); a call it cannot answer gets 4103 with retryAfterMs"`
	JoinPolicy    roomclass.Failure `enum:"closed,allow-known" key:"hooks-policy-join" cmd:"serve,core" group:"hooks" default:"closed" help:"the default class's hooks.join-policy: when the backend cannot answer a join: closed (refuse, 4103) or allow-known (resumed rooms pass)"`
	PublishPolicy roomclass.Failure `enum:"closed,open" key:"hooks-policy-publish" cmd:"serve,core" group:"hooks" default:"closed" help:"the default class's hooks.publish-policy: when the backend cannot answer a publish: closed (refuse, 4103, retry with the same id) or open (the message goes through unchecked, counted in corral_hook_unchecked_total)"`
	RefreshPolicy roomclass.Failure `enum:"closed,allow-known" key:"hooks-policy-refresh" cmd:"serve,edge" group:"hooks" default:"closed" help:"when the backend cannot answer a refresh: closed (close with 4103, reconnect later) or allow-known (error 4103 for the refresh; the connection is kept until its token's expiry plus hooks-refresh-grace, then closed with 4104)"`
	RefreshGrace  time.Duration     `key:"hooks-refresh-grace" cmd:"serve,edge" group:"hooks" default:"1m" help:"how long past its token's expiry hooks-policy-refresh allow-known keeps a connection whose refresh the backend could not answer"`
}

// Log is the process's log.
type Log struct {
	Format string `key:"log-format" flag:"true" group:"observability" default:"text" help:"log format: text or json"`
	Level  string `key:"log-level" flag:"true" group:"observability" default:"info" help:"log level: debug, info, warn, error"`
}
