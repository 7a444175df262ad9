package redisguard

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-rt/corral/internal/mono"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"
)

// Options configure a [Guard]. Zero fields mean defaults.
type Options struct {
	// Timeout bounds one Redis command made by a store; a blocking
	// command (XREAD BLOCK, WAIT) gets its own block time on top. Past it
	// the call fails with an error wrapping [ErrTimeout]. Default 3s.
	Timeout time.Duration
	// ProbeEvery is how often Redis is PINGed for [Guard.Ready] while no
	// store call failed; a failed call probes at once. Default 1s.
	ProbeEvery time.Duration
	// LogEvery is the least time between two "unreachable" log lines:
	// outages that start sooner after a logged one are counted into the
	// next line instead. Default 1m.
	LogEvery time.Duration
	// Logger receives the outage lines. Nil: slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics. Nil: not registered.
	Registerer prometheus.Registerer
}

// ErrTimeout is wrapped by the error of a command that got no reply within
// the store timeout while the caller's own context was still live. It does
// not wrap [context.DeadlineExceeded]: the caller's deadline did not pass,
// the store failed, and the caller should be told "retry later".
var ErrTimeout = errors.New("redisguard: no reply from Redis within the store timeout")

// timeoutError is a command's ErrTimeout with the bound it exceeded. Its
// Timeout method lets callers tell it apart without importing this
// package, as with net.Error.
type timeoutError struct{ after time.Duration }

func (e *timeoutError) Error() string { return fmt.Sprintf("%v (%v)", ErrTimeout, e.after) }
func (e *timeoutError) Unwrap() error { return ErrTimeout }
func (e *timeoutError) Timeout() bool { return true }

// Error kinds, the values of the kind label.
const (
	kindTimeout    = "timeout"
	kindConnection = "connection"
	kindOther      = "other"
)

// Guard bounds and watches the Redis calls of every store made with
// [Guard.Wrap]. All methods are safe for concurrent use.
type Guard struct {
	timeout    time.Duration
	probeEvery time.Duration
	logEvery   time.Duration
	log        *slog.Logger

	errs       *prometheus.CounterVec
	reconnects prometheus.Counter
	outages    prometheus.Counter
	reachable  prometheus.Gauge
	failovers  prometheus.Counter

	ready atomic.Bool
	lost  atomic.Int64 // connections closed and not yet replaced
	// freeDialAt is when a connection was last opened with none lost
	// (mono.Now; 0: none pending): rueidis may dial the replacement before
	// the lost connection's failed read reaches lose, and a loss soon
	// after such a dial is that dial's reconnect.
	freeDialAt atomic.Int64
	closing    atomic.Bool
	wake       chan struct{} // a failed call asks for a probe now

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{} // closed when the probe loop ended (or never ran)
	started  atomic.Bool

	mu sync.Mutex // guards the following fields
	// downSince is when the current outage began; zero: Redis is up.
	downSince time.Time
	// lastLog is when an outage start was last logged; logged says
	// whether the current outage's start was.
	lastLog    time.Time
	logged     bool
	suppressed int // outages started and not logged since lastLog
	// masters are the ids of every Redis master the probe saw, true once
	// it was seen gone (counted as a failover).
	masters map[string]bool
}

// New returns a Guard. Start its probe with [Guard.Watch]; until the first
// probe answered, [Guard.Ready] is false.
func New(opts Options) *Guard {
	if opts.Timeout <= 0 {
		opts.Timeout = 3 * time.Second
	}
	if opts.ProbeEvery <= 0 {
		opts.ProbeEvery = time.Second
	}
	if opts.LogEvery <= 0 {
		opts.LogEvery = time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	g := &Guard{
		timeout:    opts.Timeout,
		probeEvery: opts.ProbeEvery,
		logEvery:   opts.LogEvery,
		log:        opts.Logger,
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_store_errors_total",
			Help: "Failed Redis commands of the stores, by store (history, sessions, presence, grants, events) and kind (timeout: no reply within --redis-timeout; connection: the connection failed or could not be made; other: an error reply).",
		}, []string{"store", "kind"}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "corral_store_reconnects_total",
			Help: "Connections to Redis opened to replace one that was closed (a reconnect after an error, a timeout or a restart of Redis).",
		}),
		outages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "corral_store_outages_total",
			Help: "Times Redis stopped answering the readiness probe (each is logged, rate-limited, as \"redis unreachable\").",
		}),
		reachable: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "corral_store_reachable",
			Help: "1 while Redis answers the readiness probe, 0 while it does not (/readyz answers 503 then).",
		}),
		failovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "corral_store_failovers_total",
			Help: "Redis masters the readiness probe saw stop being masters: a failover (Sentinel or Cluster), or a restart of a standalone Redis (each is logged as \"redis master changed\").",
		}),
		masters: make(map[string]bool),
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(g.errs, g.reconnects, g.outages, g.reachable, g.failovers)
	}
	return g
}

// Timeout is the bound of one store command.
func (g *Guard) Timeout() time.Duration { return g.timeout }

// Configure prepares the options of the client the Guard will watch: its
// connections are opened by [Guard.Dial], and opening one (connect and
// handshake) is bounded by the store timeout unless opt sets a bound,
// since store calls queue behind a connection being opened.
func (g *Guard) Configure(opt *rueidis.ClientOption) {
	opt.DialCtxFn = g.Dial
	if opt.Dialer.Timeout <= 0 {
		opt.Dialer.Timeout = g.timeout
	}
}

// Dial opens a connection to Redis for rueidis (ClientOption.DialCtxFn;
// see [Guard.Configure]). It counts a connection opened after one was
// closed as a reconnect.
func (g *Guard) Dial(ctx context.Context, addr string, d *net.Dialer, tc *tls.Config) (net.Conn, error) {
	var c net.Conn
	var err error
	if tc != nil {
		c, err = (&tls.Dialer{NetDialer: d, Config: tc}).DialContext(ctx, "tcp", addr)
	} else {
		c, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	for {
		n := g.lost.Load()
		if n <= 0 {
			g.freeDialAt.Store(mono.Now())
			break
		}
		if g.lost.CompareAndSwap(n, n-1) {
			g.reconnects.Inc()
			break
		}
	}
	return &conn{Conn: c, g: g}, nil
}

// replacedWithin is how soon before a loss a dial counts as its
// replacement.
const replacedWithin = 2 * time.Second

// conn notes its loss: its first failed read or write (which rueidis sees
// before it dials a replacement) or its closing, unless the Guard is
// closing too.
type conn struct {
	net.Conn
	g    *Guard
	once sync.Once
}

func (c *conn) lose() {
	c.once.Do(func() {
		if c.g.closing.Load() {
			return
		}
		if t := c.g.freeDialAt.Load(); t != 0 && mono.Now()-t < int64(replacedWithin) && c.g.freeDialAt.CompareAndSwap(t, 0) {
			c.g.reconnects.Inc() // its replacement was dialled first
			return
		}
		c.g.lost.Add(1)
	})
}

func (c *conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		c.lose()
	}
	return n, err
}

func (c *conn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err != nil {
		c.lose()
	}
	return n, err
}

func (c *conn) Close() error {
	c.lose()
	return c.Conn.Close()
}

// Watch starts probing Redis through client (PING every ProbeEvery, or at
// once after a failed store call) until Close. Call it once.
func (g *Guard) Watch(client rueidis.Client) {
	if !g.started.CompareAndSwap(false, true) {
		return
	}
	go g.probeLoop(client)
}

func (g *Guard) probeLoop(client rueidis.Client) {
	defer close(g.done)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
		case <-g.wake:
			t.Stop()
		}
		ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
		err := client.Do(ctx, client.B().Ping().Build()).Error()
		var ids []string
		if err == nil {
			ids, _ = masters(ctx, client) // a failure here is the next PING's
		}
		cancel()
		g.observe(err, time.Now())
		g.observeMasters(ids)
		t.Reset(g.probeEvery)
	}
}

// observe records a probe's result: a change of state is logged (an
// outage's start rate-limited) and reflected in Ready and the metrics.
func (g *Guard) observe(err error, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err == nil {
		g.ready.Store(true)
		g.reachable.Set(1)
		if !g.downSince.IsZero() {
			if g.logged {
				g.log.Warn("redis reachable again", "outage", now.Sub(g.downSince).Round(time.Millisecond))
			}
			g.downSince = time.Time{}
		}
		return
	}
	g.ready.Store(false)
	g.reachable.Set(0)
	if !g.downSince.IsZero() {
		return // the same outage
	}
	g.downSince = now
	g.outages.Inc()
	g.logged = g.lastLog.IsZero() || now.Sub(g.lastLog) >= g.logEvery
	if !g.logged {
		g.suppressed++
		return
	}
	// The error names the address; the log is for the operator.
	g.log.Error("redis unreachable: publishes, joins and resumes fail with retry-later until it answers",
		"err", err, "timeout", g.timeout, "outages_not_logged", g.suppressed)
	g.lastLog, g.suppressed = now, 0
}

// observeMasters counts and logs the masters gone since the last probe.
func (g *Guard) observeMasters(ids []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gone := g.sawMasters(ids); gone > 0 {
		g.failovers.Add(float64(gone))
		g.log.Warn("redis master changed (a failover, or a restart): writes it had not replicated are lost; rooms move to a new epoch at their next append (members reset) unless redis-replicas is set",
			"masters_gone", gone)
	}
}

// Ready reports whether Redis answered the last probe. It makes no call.
func (g *Guard) Ready() bool { return g.ready.Load() }

// Close stops the probe; the connections closed from then on are not
// counted as lost. Safe to call twice.
func (g *Guard) Close() {
	g.stopOnce.Do(func() {
		g.closing.Store(true)
		close(g.stop)
		if g.started.Load() {
			<-g.done
		}
	})
}

// failed counts a failed command of store and, for a failure that may
// mean Redis is gone, asks for a probe.
func (g *Guard) failed(store, kind string) {
	g.errs.WithLabelValues(store, kind).Inc()
	if kind == kindOther {
		return
	}
	select {
	case g.wake <- struct{}{}:
	default:
	}
}
