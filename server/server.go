package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connecthttp"
	"connectrpc.com/connect/v2/connectinprocess"
	"connectrpc.com/grpcreflect/v2"
	"github.com/corral-rt/corral/apiclient"
	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/config"
	"github.com/corral-rt/corral/console"
	"github.com/corral-rt/corral/controlbus"
	"github.com/corral-rt/corral/core"
	"github.com/corral-rt/corral/edge"
	"github.com/corral-rt/corral/events"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	"github.com/corral-rt/corral/gen/corral/link/v1/linkv1connect"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
	"github.com/corral-rt/corral/grants"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/hooks"
	"github.com/corral-rt/corral/internal/reasons"
	"github.com/corral-rt/corral/internal/redisguard"
	"github.com/corral-rt/corral/internal/redisurl"
	"github.com/corral-rt/corral/outbox"
	"github.com/corral-rt/corral/presence"
	"github.com/corral-rt/corral/roomclass"
	"github.com/corral-rt/corral/sessions"
	"github.com/corral-rt/corral/state"
	"github.com/corral-rt/corral/tracing"
	"github.com/corral-rt/corral/web"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/rueidis"
)

// Mode is which parts of corral a Node runs.
type Mode int

const (
	// Serve runs edge and core in one process, linked in-process.
	Serve Mode = iota
	// EdgeOnly runs an edge linked to a core at Options.CoreURL.
	EdgeOnly
	// CoreOnly runs a core for edges and internal services.
	CoreOnly
)

// Options configure a Node.
type Options struct {
	Mode Mode
	// Node is the settings of package config (docs/CONFIG.md, Keys):
	//   - Addr is where the node listens: the WebSocket endpoint for
	//     Serve and EdgeOnly, RoomService for CoreOnly. Port 0 picks a
	//     free port.
	//   - InternalAddr is the internal listener of Serve and EdgeOnly: it
	//     serves RoomService (Serve), the admin endpoints (POST
	//     /admin/drain) and /metrics, which then leave the public port. A
	//     core's Addr is internal already. Empty: none; the admin
	//     endpoints are not served (drain with SIGTERM) and /metrics is on
	//     Addr. Keep it private; it needs APIKeys unless APIInsecure (see
	//     mountAdmin for the rule).
	//   - DebugAddr serves Go's profiles (/debug/pprof/) behind the API
	//     key like every admin endpoint. Empty: not served.
	//   - CoreURL is the core's base URL for EdgeOnly, or several cores'
	//     URLs separated by commas (see edge.Config.Cores).
	//   - RedisURL makes history and sessions durable in Redis, shared by
	//     every core that uses the same Redis. Empty: in memory.
	//     RedisPrefix prefixes every key (default "corral"); RedisTimeout
	//     bounds every command a store makes (a blocking read gets its
	//     block time on top; default 3s; see internal/redisguard).
	//     RedisReplicas, when > 0, acknowledges a publish only once that
	//     many replicas have it (WAIT), within RedisReplicaTimeout
	//     (default 1s; see history.ErrNotReplicated). RedisFile is read
	//     by the command, not here.
	//   - HistoryMaxLen (default 1000 in memory, 10000 in Redis),
	//     HistoryTTL (default 24h) and HistoryMaxBytes (the in-memory
	//     history of every room together; default 256 MiB; see
	//     history.MemoryOptions.MaxBytes) and HistoryMaxKeys (its
	//     dedupe keys and sender marks, every room together; default
	//     1,048,576; see history.MemoryOptions.MaxKeys); config.Unlimited:
	//     no bound.
	//   - Backlog is the listeners' accept queue (0: the kernel's cap,
	//     net.core.somaxconn; see listenTCP).
	//   - EventsMaxLen is how many events the event log keeps for
	//     RoomService.Events. Default 10000 in memory, 100000 in Redis;
	//     negative: no event log. On Redis Cluster a message's event is
	//     written after its append, not atomically with it.
	//   - APIMaxRequestBytes bounds one request message of the internal
	//     API over HTTP; past it the call fails with resource_exhausted.
	//     Default 4 MiB. APIMaxEventStreams bounds the RoomService.Events
	//     streams open at once per API key (default 16).
	//   - PresenceDeadAfter: with Redis, a core that stops heartbeating
	//     (PresenceHeartbeat) this long has its members removed by
	//     another core. Default 20s.
	//   - OutboxURL (postgres://...), for a core: the application's
	//     database whose corral_outbox this node delivers
	//     (docs/OUTBOX.md). Empty: none.
	//   - ReadHeaderTimeout bounds reading a request's headers (the
	//     WebSocket upgrade included; slowloris). Default 5s.
	//   - ShutdownTimeout is the command's, not the Node's.
	config.Node
	// DebugCmdline is the command line /debug/pprof/cmdline shows, with
	// secrets redacted (RedactArgs). Nil: the program name alone, never
	// os.Args, whose flags may hold secrets.
	DebugCmdline []string
	// APIKeys are the bearer keys every internal listener accepts:
	// RoomService over HTTP (Link included), /admin/* and /debug/*.
	// Required when there is one (CoreOnly, InternalAddr, DebugAddr)
	// unless APIInsecure is set.
	APIKeys []string
	// APIInsecure serves the internal listeners without keys: local
	// development only; Start logs a warning naming every open endpoint.
	// Keys, if given, are still checked.
	APIInsecure bool
	// CoreAPIKey is the key an EdgeOnly node presents to its core.
	CoreAPIKey string
	// Auth verifies connection tokens (edges). Required for Serve and EdgeOnly.
	Auth auth.Authenticator
	// Core and Edge tune the parts; their Logger and Registerer are set by
	// the Node. Core.Classes, when set, also gives each room's history
	// its size and lifetime (history.Limits).
	Core core.Config
	Edge edge.Config
	// Hooks configures the application's backend (docs/HOOKS.md): an
	// empty URL turns hooks off. One client serves the node's core (Join,
	// Publish) and edge (Connect, Refresh, Call); Logger and Registerer
	// are set by Start.
	Hooks hooks.Config
	// IdleTimeout closes a kept-alive HTTP connection with no request in
	// flight after this long. Default 60s.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers. Default 64 KiB.
	MaxHeaderBytes int
	// PresenceHeartbeat is how often a core on Redis heartbeats
	// (presence.RedisOptions). Default 3s.
	PresenceHeartbeat time.Duration
	// Logger receives structured logs. Nil: slog.Default().
	Logger *slog.Logger
	// Reload re-reads the config file into a room class table, for
	// Node.Reload (SIGHUP, POST /admin/reload); nil: no config file.
	Reload func() (*roomclass.Table, error)
}

// Node is a running corral process part.
type Node struct {
	opts   Options
	redis  rueidis.Client
	guard  *redisguard.Guard            // bounds and watches redis; nil without it
	stores []interface{ Close() error } // made by the node; closed before redis
	core   *core.Core
	hooks  *hooks.Client // nil: no hooks
	// stopOutbox stops the outbox relay and waits for it; nil without one.
	stopOutbox func()
	rpc        *connect.Server // RoomService with the API key check
	// closing ends the API's server streams when the node closes.
	closing    context.Context
	endStreams context.CancelFunc
	edge       *edge.Edge
	servers    []*http.Server
	addrs      []string
	drained    chan struct{}
	reload     *reloader
	drainOnce  sync.Once
	closeMu    sync.Mutex
	closed     bool
	serveErr   chan error
}

// Start builds and starts a node; it listens before returning. A Serve
// node also waits (up to linkWait) for its edge's in-process links to the
// core, so that a client that connects as soon as Start returns is served
// rather than told to retry (4002).
func Start(opts Options) (*Node, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerBuildInfo(reg)
	n := &Node{opts: opts, serveErr: make(chan error, 2), drained: make(chan struct{})}
	n.closing, n.endStreams = context.WithCancel(context.Background())
	n.reload = newReloader(reg)
	if opts.Core.Classes != nil {
		t := opts.Core.Classes.Table()
		n.reload.inForce(t)
		opts.Logger.Info("room classes in force", "version", t.Version, "hash", t.Hash, "classes", len(t.Classes()))
	}
	// Every listener but a serve or edge node's public one is internal:
	// it needs keys unless the node is insecure.
	internalAddr := opts.InternalAddr
	if opts.Mode == CoreOnly {
		internalAddr = ""
	}
	for what, addr := range map[string]string{"the internal listener (--internal-addr)": internalAddr, "the debug listener (--debug-addr)": opts.DebugAddr} {
		if addr != "" {
			if err := needKeys(what, opts); err != nil {
				return nil, err
			}
		}
	}
	var refused *prometheus.CounterVec
	door := adminDoor{}
	if len(opts.APIKeys) > 0 {
		refused = newKeyRefused()
		reg.MustRegister(refused)
		check, err := newKeyCheck(opts.APIKeys)
		if err != nil {
			return nil, err
		}
		door = adminDoor{check: check, refused: reasons.Counters("server", refused, keyRefusalNames[:])}
	}

	if opts.Hooks.URL != "" {
		hc := opts.Hooks
		hc.Logger = opts.Logger.With("part", "hooks")
		hc.Registerer = reg
		h, err := hooks.New(hc)
		if err != nil {
			return nil, err
		}
		n.hooks = h
	}
	if opts.Core.Classes != nil && (opts.Mode == Serve || opts.Mode == CoreOnly) {
		if err := checkClassHooks(opts.Core.Classes.Table(), n.hooks != nil); err != nil {
			return nil, err
		}
	}

	var rpc *connect.Server
	if opts.Mode == Serve || opts.Mode == CoreOnly {
		cc := opts.Core
		cc.Hooks = n.hooks
		cc.NodeQuery = n.answerNode // another core's node asks for a reload (configapi.go)
		cc.Logger = opts.Logger.With("part", "core")
		cc.Registerer = reg
		if opts.RedisURL != "" {
			ro, err := redisurl.Options(opts.RedisURL)
			if err != nil {
				return nil, fmt.Errorf("server: --redis: %w", err)
			}
			// Every store's commands get the store timeout, its failures
			// are counted, and a probe keeps /readyz current.
			n.guard = redisguard.New(redisguard.Options{Timeout: opts.RedisTimeout, Logger: cc.Logger, Registerer: reg})
			n.guard.Configure(&ro)
			n.redis, err = rueidis.NewClient(ro)
			if err != nil {
				n.guard.Close()
				return nil, fmt.Errorf("server: connect to Redis: %w", err)
			}
			if opts.RedisReplicas > 0 && n.redis.Mode() == rueidis.ClientModeCluster {
				n.redis.Close()
				n.guard.Close()
				return nil, errors.New("server: redis-replicas is not supported on Redis Cluster")
			}
			n.guard.Watch(n.redis)
			var ev *events.Redis
			if opts.EventsMaxLen >= 0 {
				ev = events.NewRedis(n.guard.Wrap(n.redis, "events"), events.RedisOptions{Prefix: opts.RedisPrefix, MaxLen: opts.EventsMaxLen})
			}
			logger := cc.Logger
			bumps := prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "corral_store_epoch_bumps_total",
				Help: "Rooms moved to a new history epoch by corral, by reason (loss: Redis lost acknowledged messages, as after a failover to a lagging replica; failover: the first append to a room after a failover, without --redis-replicas).",
			}, []string{"reason"})
			waitTimeouts := prometheus.NewCounter(prometheus.CounterOpts{
				Name: "corral_store_replica_wait_timeouts_total",
				Help: "Appends that fewer replicas than --redis-replicas acknowledged within --redis-replica-timeout (the publish was refused with a retry code, but may be stored).",
			})
			reg.MustRegister(bumps, waitTimeouts)
			// Both reasons exist from the start (at 0), so that an alert on
			// their rate sees a series before the first failover.
			bumps.WithLabelValues("loss")
			bumps.WithLabelValues("failover")
			h := history.NewRedis(n.guard.Wrap(n.redis, "history"), history.RedisOptions{
				Prefix: opts.RedisPrefix, MaxLen: opts.HistoryMaxLen, TTL: opts.HistoryTTL, Events: ev,
				Limits: classLimits(cc.Classes),
				OnEventError: func(room string, err error) {
					logger.Error("a message's event did not reach the event log", "room", room, "err", err)
				},
				Replicas: opts.RedisReplicas, ReplicaTimeout: opts.RedisReplicaTimeout,
				OnReplicaTimeout: func(string) { waitTimeouts.Inc() },
				OnLoss: func(room string) {
					bumps.WithLabelValues("loss").Inc()
					logger.Warn("redis lost acknowledged messages of a room (failover to a lagging replica?): new epoch, members reset", "room", room)
				},
				OnReplicated: func(room string) {
					bumps.WithLabelValues("failover").Inc()
					logger.Warn("a room's history came through a Redis failover (it may lack acknowledged messages): new epoch, members reset", "room", room)
				},
			})
			ss := sessions.NewRedis(n.guard.Wrap(n.redis, "sessions"), sessions.Options{TTL: cc.SessionTTL, Prefix: opts.RedisPrefix})
			g := grants.NewRedis(n.guard.Wrap(n.redis, "grants"), grants.RedisOptions{Prefix: opts.RedisPrefix})
			cb := controlbus.NewRedis(n.guard.Wrap(n.redis, "control"), controlbus.RedisOptions{Prefix: opts.RedisPrefix})
			st := state.NewRedis(n.guard.Wrap(n.redis, "state"), state.RedisOptions{Prefix: opts.RedisPrefix, Limits: stateLimits(cc.Classes),
				// A room's changes ride its message channel: one pub/sub
				// subscription per room on each core.
				Channel: h.Channel})
			cc.History, cc.Sessions, cc.Grants, cc.Control, cc.State = h, ss, g, cb, st
			n.stores = append(n.stores, ss, h, g, cb, st)
			if cc.Presence.NewStore == nil {
				rc := n.guard.Wrap(n.redis, "presence")
				cc.Presence.NewStore = func(po presence.Options) (presence.Store, error) {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					return presence.NewRedis(ctx, rc, presence.RedisOptions{
						Options: po, Prefix: opts.RedisPrefix,
						Heartbeat: opts.PresenceHeartbeat, DeadAfter: opts.PresenceDeadAfter,
					})
				}
			}
		}
		if cc.History == nil {
			var ev *events.Memory
			if opts.EventsMaxLen >= 0 {
				ev = events.NewMemory(events.MemoryOptions{MaxLen: opts.EventsMaxLen})
			}
			h := history.NewMemory(history.MemoryOptions{MaxLen: opts.HistoryMaxLen, TTL: opts.HistoryTTL, MaxBytes: int64(opts.HistoryMaxBytes), MaxKeys: int(opts.HistoryMaxKeys), Events: ev, Limits: classLimits(cc.Classes)})
			registerMemoryHistory(reg, h)
			cc.History = h
			n.stores = append(n.stores, h)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := core.Start(ctx, cc)
		cancel()
		if err != nil {
			n.closeParts(context.Background())
			return nil, err
		}
		n.core = c
		if opts.OutboxURL != "" {
			r, err := outbox.New(outbox.Config{
				URL: opts.OutboxURL, Migrate: true,
				Logger: opts.Logger.With("part", "outbox"), Registerer: reg,
			}, c.API())
			if err != nil {
				n.closeParts(context.Background())
				return nil, fmt.Errorf("server: --outbox: %w", err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = r.Run(ctx)
			}()
			n.stopOutbox = func() { cancel(); <-done }
		}
		// Over HTTP every call presents a key, Link included; the
		// in-process edge of Serve reaches the core through a dispatcher
		// of its own, without one.
		ics := []connect.ServerInterceptor{tracing.ServerInterceptor(), endOnClose(n.closing)}
		exposed := opts.Mode == CoreOnly || opts.InternalAddr != ""
		if len(opts.APIKeys) > 0 || (exposed && !opts.APIInsecure) {
			ic, err := RequireAPIKey(opts.APIKeys, refused)
			if err != nil {
				n.closeParts(context.Background())
				if len(opts.APIKeys) == 0 {
					err = fmt.Errorf("%w: the internal API needs API keys (--api-keys), or api-insecure (--insecure-dev) for local development", err)
				}
				return nil, err
			}
			ics = append(ics, ic)
		}
		apiRefused := newAPIRefused()
		reg.MustRegister(apiRefused)
		ics = append(ics, limitStreams(cmp.Or(opts.APIMaxEventStreams, 16), apiRefused))
		n.rpc = connect.NewServer(ics...)
		corralv1connect.RegisterRoomServiceHandler(n.rpc, roomService{n.core.API(), n})
		linkv1connect.RegisterLinkServiceHandler(n.rpc, n.core)
		// gRPC server reflection, so that grpcurl and `buf curl` find the
		// API with no schema but the key: behind the same interceptors,
		// so it answers only a caller with a key, on internal listeners
		// only (it describes every type compiled into the binary).
		grpcreflect.Register(n.rpc)
		rpc = n.rpc
		if opts.Mode == Serve {
			rpc = connect.NewServer(tracing.ServerInterceptor())
			corralv1connect.RegisterRoomServiceHandler(rpc, roomService{n.core.API(), n})
			linkv1connect.RegisterLinkServiceHandler(rpc, n.core)
		}
	}
	if opts.Mode == Serve || opts.Mode == EdgeOnly {
		if opts.Auth == nil {
			n.closeParts(context.Background())
			return nil, errors.New("server: Options.Auth is required for an edge")
		}
		var client *connect.Client
		if opts.Mode == Serve {
			client = connect.NewClient(connectinprocess.New(rpc, connectinprocess.WithCopyFunc(shareLinkFrames)),
				tracing.ClientInterceptor())
		}
		ec := opts.Edge
		if client != nil {
			ec.Core = linkv1connect.NewLinkServiceClient(client)
		} else {
			ics := []connect.ClientInterceptor{tracing.ClientInterceptor()}
			if opts.CoreAPIKey != "" {
				ics = append(ics, apiclient.Bearer(opts.CoreAPIKey))
			}
			hc := apiclient.H2CClient() // the edge-core hop: h2c on a trusted network or loopback
			for _, u := range strings.Split(opts.CoreURL, ",") {
				if u = strings.TrimSpace(u); u == "" {
					continue
				}
				c := connect.NewClient(connecthttp.NewTransport(hc, u, connecthttp.WithCompressors()), ics...)
				ec.Cores = append(ec.Cores, linkv1connect.NewLinkServiceClient(c))
			}
			if len(ec.Cores) == 0 {
				return nil, errors.New("server: Options.CoreURL is required for an edge")
			}
		}
		ec.Auth = opts.Auth
		ec.Hooks = n.hooks
		ec.Logger = opts.Logger.With("part", "edge")
		ec.Registerer = reg
		e, err := edge.New(ec)
		if err != nil {
			n.closeParts(context.Background())
			return nil, err
		}
		n.edge = e
		if opts.Mode == Serve {
			n.awaitLinks(e)
		}
	}

	guard := n.guard
	probes := func(mux *http.ServeMux) {
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
		mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
			if n.edge != nil && !n.edge.Ready() {
				http.Error(w, "not ready", http.StatusServiceUnavailable)
				return
			}
			// A core without its Redis can neither order nor resume
			// anything. The guard's probe answers, not a PING per request;
			// it logs the outage (with the address, never in the answer).
			if guard != nil && !guard.Ready() {
				http.Error(w, "not ready: redis unavailable", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ready")
		})
	}
	// The listeners, the first one at Options.Addr.
	doorOpen := door.check == nil
	first := &listener{role: public, addr: opts.Addr, mux: http.NewServeMux()}
	ls := []*listener{first}
	if opts.Mode == CoreOnly {
		first.role = internal
	} else if internalAddr != "" {
		ls = append(ls, &listener{role: internal, addr: internalAddr, mux: http.NewServeMux()})
	}
	if opts.DebugAddr != "" {
		ls = append(ls, &listener{role: debug, addr: opts.DebugAddr, mux: http.NewServeMux()})
	}
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	for _, l := range ls {
		if l.role == debug {
			l.open = n.openEndpoints(debug, n.mountAdmin(l.mux, debug, door), false, doorOpen)
			continue
		}
		probes(l.mux)
		// /metrics is on the internal listener when there is one.
		if l.role == internal || len(ls) == 1 || ls[1].role != internal {
			l.mux.Handle("GET /metrics", metrics)
		}
		admin := n.mountAdmin(l.mux, l.role, door)
		rpcHere := l.role == internal && n.rpc != nil
		if rpcHere {
			l.h2c = true
			connecthttp.Mount(l.mux, n.rpc, connecthttp.WithCompressors(),
				connecthttp.WithReadMaxBytes(cmp.Or(opts.APIMaxRequestBytes, 4<<20)))
			// The admin console: static files calling the API beside it,
			// each call behind the key (never on the public listener).
			l.mux.Handle(console.Path, console.Handler())
		}
		if l.role == public && n.edge != nil {
			l.mux.Handle(wsPath, noBody(n.edge))
			l.mux.Handle("/rt/", n.edge.StreamHandler()) // docs/TRANSPORTS.md
			l.mux.Handle("/", web.Handler())             // the demo page
		}
		l.open = n.openEndpoints(l.role, admin, rpcHere, doorOpen)
	}
	for _, l := range ls {
		var ws http.Handler // upgrades that skip net/http (upgrade.go)
		if l.role == public && n.edge != nil && !l.h2c {
			ws = n.edge
		}
		if err := n.listen(l.addr, l.mux, l.h2c, ws); err != nil {
			_ = n.Close(context.Background())
			return nil, err
		}
	}
	n.warnInsecure(ls, n.addrs)
	return n, nil
}

// linkWait bounds how long Start waits for a Serve node's in-process
// links; past it the node starts anyway, unready (/readyz says so).
const linkWait = 5 * time.Second

// awaitLinks waits until e's links to the in-process core are up, or
// linkWait has passed.
func (n *Node) awaitLinks(e *edge.Edge) {
	start := time.Now()
	for !e.Ready() {
		if time.Since(start) > linkWait {
			n.opts.Logger.Warn("the edge's links to the in-process core are not up; starting unready", "waited", linkWait)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// listen serves h on addr. With ws, the edge, a connection whose first
// request is a GET of wsPath goes to ws directly (wsListener), the others to
// net/http, which serves h.
func (n *Node) listen(addr string, h http.Handler, h2c bool, ws http.Handler) error {
	// With the edge, no TCP keep-alive on accept: the WebSockets do
	// without it, and the listener gives it back to the connections it
	// hands to net/http (listenTCP, wsListener.handOff).
	ln, err := listenTCP(addr, n.opts.Backlog, ws == nil)
	if err != nil {
		return fmt.Errorf("server: listen %s: %w", addr, err)
	}
	readHeader := cmp.Or(n.opts.ReadHeaderTimeout, 5*time.Second)
	if ws != nil {
		ln = newWSListener(ln, ws, wsPath, readHeader, n.opts.Logger)
	}
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(h2c)
	srv := &http.Server{
		Handler:           h,
		Protocols:         p,
		ReadHeaderTimeout: readHeader,
		IdleTimeout:       cmp.Or(n.opts.IdleTimeout, 60*time.Second),
		MaxHeaderBytes:    cmp.Or(n.opts.MaxHeaderBytes, 64<<10),
		ErrorLog:          slog.NewLogLogger(n.opts.Logger.Handler(), slog.LevelWarn),
	}
	n.servers = append(n.servers, srv)
	n.addrs = append(n.addrs, ln.Addr().String())
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.serveErr <- err
		}
	}()
	return nil
}

// Addr is the address the node listens on (Options.Addr, resolved).
func (n *Node) Addr() string { return n.addrs[0] }

// InternalAddr is the internal listener of Serve (RoomService, /admin/*,
// /metrics) or EdgeOnly (/admin/*, /metrics), or "".
func (n *Node) InternalAddr() string {
	if n.opts.Mode != CoreOnly && n.opts.InternalAddr != "" {
		return n.addrs[1]
	}
	return ""
}

// DebugAddr is where the profiles are served (Options.DebugAddr), or "".
func (n *Node) DebugAddr() string {
	if n.opts.DebugAddr != "" {
		return n.addrs[len(n.addrs)-1]
	}
	return ""
}

// APIServer is the RoomService dispatcher behind the internal API listener,
// with its API key check; nil for EdgeOnly. Pass it to connectinprocess.New
// to call the internal API in-process (tests, embedding).
func (n *Node) APIServer() *connect.Server { return n.rpc }

// Err reports a listener that failed after Start.
func (n *Node) Err() <-chan error { return n.serveErr }

// Close shuts the node down: the edge tells its clients to resume and waits
// for them (bounded by ctx), then the listeners and the core stop. Safe to
// call twice.
func (n *Node) Close(ctx context.Context) error {
	n.closeMu.Lock()
	if n.closed {
		n.closeMu.Unlock()
		return nil
	}
	n.closed = true
	n.closeMu.Unlock()
	var errs []error
	n.endStreams()
	if n.edge != nil {
		errs = append(errs, n.edge.Close(ctx))
	}
	// The outbox before the core it publishes through: a row published
	// and not yet deleted is published again by the next relay, a
	// duplicate by its key.
	if n.stopOutbox != nil {
		n.stopOutbox()
	}
	// The core before the listeners: closing it ends the edges' Link
	// streams, which a graceful HTTP shutdown would otherwise wait for.
	if n.core != nil {
		errs = append(errs, n.core.Close())
	}
	if n.hooks != nil {
		n.hooks.Close()
	}
	// What is left on the listeners (unary API calls, health checks) gets a
	// short grace: clients were drained and the core is closed already.
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for _, s := range n.servers {
		if err := s.Shutdown(sctx); err != nil {
			s.Close()
		}
	}
	n.closeStores()
	return errors.Join(errs...)
}

func (n *Node) closeParts(ctx context.Context) {
	n.endStreams()
	if n.edge != nil {
		_ = n.edge.Close(ctx)
	}
	if n.stopOutbox != nil {
		n.stopOutbox()
	}
	if n.core != nil {
		_ = n.core.Close()
	}
	if n.hooks != nil {
		n.hooks.Close()
	}
	n.closeStores()
}

// closeStores closes the stores the node made, then their Redis client.
func (n *Node) closeStores() {
	for _, st := range n.stores {
		_ = st.Close()
	}
	n.stores = nil
	if n.guard != nil {
		n.guard.Close()
	}
	if n.redis != nil {
		n.redis.Close()
		n.redis = nil
	}
}

// shareLinkFrames hands Link batches across the in-process transport without
// a deep copy: both sides treat frames as immutable once sent. Every field
// of LinkRequest and LinkResponse must be handed over here. Everything
// else is copied as usual.
func shareLinkFrames(dst, src any) error {
	switch d := dst.(type) {
	case *linkv1.LinkRequest:
		if s, ok := src.(*linkv1.LinkRequest); ok {
			d.Frames, d.QueuedBytes = s.Frames, s.QueuedBytes
			return nil
		}
	case *linkv1.LinkResponse:
		if s, ok := src.(*linkv1.LinkResponse); ok {
			d.Frames = s.Frames
			return nil
		}
	}
	return connectinprocess.ProtoCopy(dst, src)
}

// registerMemoryHistory exports what the in-memory history holds and
// what it shed to stay under its byte bound.
func registerMemoryHistory(reg prometheus.Registerer, h *history.Memory) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "corral_history_memory_bytes", Help: "Bytes of the in-memory history's retained messages, all rooms (bounded by HistoryMaxBytes, 256 MiB by default).",
		}, func() float64 { return float64(h.Stats().Bytes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "corral_history_memory_shed_total", Help: "What the in-memory history shed to stay under its byte bound: whole rooms nobody held (rooms), then the oldest messages of held rooms (messages).", ConstLabels: prometheus.Labels{"what": "rooms"},
		}, func() float64 { return float64(h.Stats().ShedRooms) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "corral_history_memory_shed_total", Help: "What the in-memory history shed to stay under its byte bound: whole rooms nobody held (rooms), then the oldest messages of held rooms (messages).", ConstLabels: prometheus.Labels{"what": "messages"},
		}, func() float64 { return float64(h.Stats().ShedMessages) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "corral_history_memory_keys", Help: "Dedupe keys and sender marks the in-memory history remembers within their window, all rooms (bounded by HistoryMaxKeys, 1,048,576 by default).",
		}, func() float64 { return float64(h.Stats().Keys) }),
	)
	for r, name := range history.MemoryRefusalNames {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "corral_history_memory_refused_total", Help: "Appends the in-memory history refused to stay within a bound, by reason (dedupe_keys: a new dedupe key past HistoryMaxKeys).", ConstLabels: prometheus.Labels{"reason": name},
		}, func() float64 { return float64(h.Stats().Refused[r]) }))
	}
}
