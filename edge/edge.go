package edge

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/mono"
	"github.com/corral-rt/corral/protocol"
	"github.com/prometheus/client_golang/prometheus"
)

// Edge serves WebSocket clients and links them to the core. It is an
// http.Handler for the WebSocket endpoint. All methods are safe for
// concurrent use.
type Edge struct {
	cfg     Config
	metrics *metrics
	admit   *admission
	links   []*link
	nextID  atomic.Uint64
	// id names this edge to its cores (RoomService.Info), on every link.
	id     string
	poller *poller // nil: connections never park
	// settle returns the heap to the OS after a connect burst (settle.go).
	settle *settler
	// senders write the connections' queued frames (sender.go), a
	// connection to each by its id.
	senders []*sender

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // link and sweeper goroutines, calls (hooks.go)

	// rules are the rate limits' buckets, full: every connection's
	// limiter reads its rates and bursts here (limits.go). Read-only.
	rules *[numBuckets]bucket

	mu     sync.Mutex // guards the following fields
	conns  map[*conn]struct{}
	closed bool
	// pending counts connections upgraded but not yet authenticated, and
	// users the connections of each user (limits.go).
	pending int
	users   map[string]int
	// streams are the open HTTP carriers by stream id (stream.go); nil:
	// an id reserved by a stream being opened.
	streams map[string]*conn
	// spent holds the message buckets of users' ended connections, so
	// that a reconnect goes on with the tokens its user had (limits.go).
	spent  map[string]bucket
	connWG sync.WaitGroup // one per open connection
}

// New starts an Edge: it opens its links to the core in the background.
func New(cfg Config) (*Edge, error) {
	if (cfg.Core == nil && len(cfg.Cores) == 0) || cfg.Auth == nil {
		return nil, errors.New("edge: Config.Core and Config.Auth are required")
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	m := newMetrics(cfg.Registerer)
	e := &Edge{
		cfg:     cfg,
		metrics: m,
		admit:   newAdmission(cfg),
		id:      newEdgeID(),
		ctx:     ctx,
		cancel:  cancel,
		conns:   make(map[*conn]struct{}),
		users:   make(map[string]int),
		spent:   make(map[string]bucket),
		rules:   bucketRules(&cfg),
		poller:  newPoller(),
		settle:  newSettler(),
		// One sender per core: a pass writes its sockets on one core.
		senders: newSenders(runtime.GOMAXPROCS(0), m.flushPass),
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "corral_edge_parked_connections",
			Help: "Idle connections whose reader is parked (no goroutine; Linux).",
		}, func() float64 { return float64(e.poller.parkedConns()) }))
		cfg.Registerer.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "corral_edge_queued_frames",
			Help: "Frames waiting in the connections' send queues, or taken by a writer and not yet written (counted when scraped). 0: everything the edge was given has reached the sockets.",
		}, e.queuedFrames))
		cfg.Registerer.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "corral_edge_queued_bytes",
			Help: "Bytes waiting in the connections' send queues, replays aside: what the edge reports to its cores, which push back on internal API publishes while it is high.",
		}, e.queuedBytes))
	}
	// Link i starts on core i mod len(Cores): each core gets Links streams.
	for i := range cfg.Links * len(cfg.Cores) {
		l := newLink(e, i)
		e.links = append(e.links, l)
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			l.run(ctx)
		}()
	}
	for _, s := range e.senders {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			s.run(ctx)
		}()
	}
	e.wg.Add(1)
	go e.sweep()
	return e, nil
}

// Ready reports whether the edge accepts connections and every link to the
// core is up.
func (e *Edge) Ready() bool {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return false
	}
	for _, l := range e.links {
		if !l.isUp() {
			return false
		}
	}
	return true
}

// ServeHTTP upgrades a request to a WebSocket connection and returns; the
// connection is served on a goroutine of its own until it closes or
// parks, or, when w has Then (thenRunner: the server's WebSocket
// listener), on the caller's goroutine once it has let the request go.
//
// Returning lets the caller (net/http, or the server's WebSocket
// listener, which reads upgrades without net/http) release what it holds
// for the request (its connection state, buffers, the request and its
// headers, and, through net/http, the deep stack of its serving
// goroutine): an idle WebSocket then costs only the connection's own
// state (and, where it cannot park, a reader goroutine). w must implement
// http.Hijacker; the reader Hijack returns is read only for what it has
// buffered, within this call.
func (e *Edge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		http.Error(w, "corral edge is shutting down", http.StatusServiceUnavailable)
		return
	}
	e.connWG.Add(1)
	e.mu.Unlock()
	served := false
	defer func() {
		if !served {
			e.connWG.Done()
		}
	}()

	kind, wait := e.admit.admit(r)
	if wait > 0 {
		e.metrics.admissions.WithLabelValues(kind, "deferred").Inc()
		refuse(w, wait)
		return
	}
	e.metrics.admissions.WithLabelValues(kind, "accepted").Inc()
	if !e.pendingAdd() {
		e.refusePending(w)
		return
	}
	// The pending handshake ends once: at the authenticated hello, or
	// when the connection ends before one.
	var pendingOnce sync.Once
	release := func() { pendingOnce.Do(e.pendingDone) }
	defer func() {
		if !served {
			release()
		}
	}()

	u, err := upgrade(w, r, e.cfg.OriginPatterns, e.cfg.AnyOrigin)
	if err != nil {
		// upgrade has answered (handshake.go).
		return
	}
	e.metrics.accepted.Inc()
	e.settle.accepted(mono.Now())
	enc, ok := protocol.EncodingOf(u.subprotocol)
	if !ok {
		// No subprotocol offered: JSON, so any WebSocket tool can talk.
		enc = protocol.JSON
	}
	c := newConn(e, u, enc, r.RemoteAddr)
	c.hook = e.captureHook(r)
	c.handshakeDone = release
	if !e.track(c) {
		c.writeClose(uint16(corralv1.Code_CODE_GOING_AWAY), "shutting down")
		u.nc.Close()
		return
	}
	served = true
	// finish releases, untracks and marks connWG done.
	if t, ok := w.(thenRunner); ok {
		// The listener's goroutine, its stack already grown by the
		// head's parse, runs the connection once it has let go of what
		// it holds for the request: no goroutine to start and grow
		// again per upgrade (docs/benchmarks/
		// 2026-12-07-0220-issue34-herd-allocs.md).
		t.Then(c.serve)
		return
	}
	go c.serve()
}

// thenRunner is a ResponseWriter whose goroutine runs f once the handler
// has returned and the request's buffers are let go: corral's WebSocket
// listener (server.upgradeResponse). Through net/http, a connection's
// reader is a goroutine of its own (net/http's stack is deep, and its
// connection state is held until the handler returns).
type thenRunner interface {
	Then(f func())
}

func (e *Edge) track(c *conn) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.conns[c] = struct{}{}
	e.metrics.conns.Inc()
	return true
}

func (e *Edge) untrack(c *conn) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.conns, c)
	e.metrics.conns.Dec()
	if e.closed {
		e.metrics.draining.Set(float64(len(e.conns)))
	}
}

// queuedFrames counts the frames waiting in every connection's queue, and
// 1 for a writer holding frames it has not written yet. For the
// corral_edge_queued_frames gauge: it walks the connections when scraped,
// so the fan-out path pays nothing for it.
func (e *Edge) queuedFrames() float64 {
	e.mu.Lock()
	conns := make([]*conn, 0, len(e.conns))
	for c := range e.conns {
		conns = append(conns, c)
	}
	e.mu.Unlock()
	n := 0
	for _, c := range conns {
		c.mu.Lock()
		n += len(c.queue)
		if c.stalled && !c.ended {
			n++
		}
		c.mu.Unlock()
	}
	return float64(n)
}

// queuedBytes sums the links' counts of their connections' queued bytes
// (link.queued), for the corral_edge_queued_bytes gauge.
func (e *Edge) queuedBytes() float64 {
	var n int64
	for _, l := range e.links {
		n += l.queued.Load()
	}
	return float64(n)
}

// sweep closes connections that have been silent for two heartbeats. One
// goroutine for all connections costs less than a timer each.
func (e *Edge) sweep() {
	defer e.wg.Done()
	t := time.NewTicker(min(e.cfg.Heartbeat/2, e.cfg.WriteTimeout/4, time.Second))
	defer t.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
		}
		now := mono.Now()
		deadline := now - int64(2*e.cfg.Heartbeat)
		writeDeadline := now - int64(e.cfg.WriteTimeout)
		e.mu.Lock()
		var stale, stuck, streams []*conn
		for c := range e.conns {
			if c.stream != nil {
				streams = append(streams, c)
			}
			if c.lastRead.Load() < deadline {
				stale = append(stale, c)
			}
			if ws := c.writeStart.Load(); ws != 0 && ws < writeDeadline {
				stuck = append(stuck, c)
			}
		}
		e.mu.Unlock()
		for _, c := range stuck {
			// A write past its deadline: the client is not reading. Its
			// socket is full, so no close frame can reach it; cut it. It
			// resumes and loses nothing.
			e.metrics.cutSlow(slowWriteTimeout)
			c.cutOff()
		}
		e.beatStreams(streams, now)
		for _, c := range stale {
			c.closeWith(corralv1.Code_CODE_HEARTBEAT_TIMEOUT, "no frame within two heartbeats", 0, false)
		}
		for _, l := range e.links {
			l.giveUpOrphans()
		}
		if d := e.settle.settle(mono.Now()); d > 0 {
			e.metrics.settles.Inc()
			e.metrics.settleSeconds.Add(d.Seconds())
		}
	}
}

// Drain takes the edge out of service gracefully: it turns unready, stops
// accepting connections, and tells every client to reconnect (and resume)
// after a delay spread uniformly over window (0: Config.DrainWindow), so
// that the clients come back, here after a restart or elsewhere, as a
// gentle ramp rather than a herd. It waits until the clients have gone or
// ctx ends; then it closes what remains. Sessions stay resumable.
func (e *Edge) Drain(ctx context.Context, window time.Duration) error {
	if window <= 0 {
		window = e.cfg.DrainWindow
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	conns := make([]*conn, 0, len(e.conns))
	for c := range e.conns {
		conns = append(conns, c)
	}
	e.mu.Unlock()
	e.metrics.draining.Set(float64(len(conns)))
	for _, c := range conns {
		delay := uint32(rand.Int64N(window.Milliseconds() + 1))
		c.closeWith(corralv1.Code_CODE_GOING_AWAY, "server draining: reconnect and resume", delay, true)
	}
	done := make(chan struct{})
	go func() {
		e.connWG.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		e.mu.Lock()
		conns := make([]*conn, 0, len(e.conns))
		for c := range e.conns {
			conns = append(conns, c)
		}
		e.mu.Unlock()
		for _, c := range conns {
			c.cutOff()
		}
	}
	e.metrics.draining.Set(0)
	return err
}

// Close drains the edge (see Drain) and stops its links. Safe to call
// twice.
func (e *Edge) Close(ctx context.Context) error {
	err := e.Drain(ctx, 0)
	e.cancel()
	e.wg.Wait()
	e.poller.close()
	return err
}

// linkFor picks the link for a connection id.
func (e *Edge) linkFor(id uint64) *link {
	return e.links[id%uint64(len(e.links))]
}
