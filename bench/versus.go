package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/corral-rt/corral/internal/retry"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Versus measures one row of issue 19's table against corral or Centrifugo
// through a [Dialect], with the standard client for both: the busy room
// (client publishes), broadcast (server-API publishes), a rejoin storm
// (every client drops and comes back from its last position) and the idle
// memory per connection. Zero parameters take the workload's defaults.
type Versus struct {
	Server      string
	Workload    string
	Sockets     int
	Rooms       int
	Senders     int
	Rate        float64
	Duration    time.Duration
	Size        int
	Workers     int
	ConnectRate float64
	Settle      time.Duration
	Timeout     time.Duration
	// StormMode is how the storm's clients come back: "herd" (the
	// default; herd.go) or "bounded", the old mode: 512 rejoins in flight
	// at most, each retried from 50ms doubling to 2s, after a drop
	// without a close frame (a FIN, not a RST).
	StormMode      string
	RecoverTimeout time.Duration
	// After (storm, herd mode): publishing goes on at least this long
	// once the last client is back, the post-herd figures' window; 0:
	// publishing ends with Duration, when the herd may not be over yet.
	After time.Duration
}

// VersusStats is the row a versus run measured: what bench/scripts/versus.sh
// puts in its table.
type VersusStats struct {
	Server   string `json:"server"`
	Workload string `json:"workload"`
	// ServerCPUSeconds is the server's CPU time (user+system, from
	// /proc/<pid>/stat) over the measured window.
	ServerCPUSeconds float64 `json:"serverCpuSeconds"`
	WindowSeconds    float64 `json:"windowSeconds"`
	// P99Ms is the row's latency: delivery (busy-room, broadcast), drop to
	// recovered rejoin (storm), dial to joined (idle).
	P99Ms float64 `json:"p99Ms"`
	// PerConnBytes is the server's RSS growth per connection (idle).
	PerConnBytes uint64 `json:"perConnBytes,omitempty"`
	Joined       int    `json:"joined"`
	Deliveries   uint64 `json:"deliveries"`
	Gaps         uint64 `json:"gaps"`
	// NotRecovered counts storm rejoins the server could not recover.
	NotRecovered uint64 `json:"notRecovered,omitempty"`
	// Storm: the mode; recovery from the reset to the recovered join
	// (p50, p99, max; P99Ms repeats its p99); the clients back within
	// RecoverTimeout; the first reconnect attempts that failed, by kind;
	// publications a member read twice.
	StormMode     string         `json:"stormMode,omitempty"`
	RecoverP50Ms  float64        `json:"recoverP50Ms,omitempty"`
	RecoverMaxMs  float64        `json:"recoverMaxMs,omitempty"`
	Recovered     int            `json:"recovered,omitempty"`
	Cut           int            `json:"cut,omitempty"` // sockets the herd reset
	FirstFailures map[string]int `json:"firstFailures,omitempty"`
	Duplicated    uint64         `json:"duplicated"`
	// PostHerd (storm, herd mode) is delivery once every member is back:
	// the reads of the messages published after the last came back.
	PostHerd *PostHerdStats `json:"postHerd,omitempty"`
}

// versus workload defaults: sockets, rooms, senders, rate, duration.
var versusDefaults = map[string]Versus{
	"busy-room": {Sockets: 200, Rooms: 1, Senders: 20, Rate: 400, Duration: 20 * time.Second},
	"broadcast": {Sockets: 15000, Rooms: 100, Rate: 250, Duration: 20 * time.Second},
	"storm":     {Sockets: 10000, Rooms: 100, Rate: 100, Duration: 30 * time.Second},
	"idle":      {Sockets: 10000, Rooms: 100, Settle: 10 * time.Second},
}

func NewVersus() *Versus {
	return &Versus{Server: "corral", Workload: "busy-room", Size: 100, Workers: 32, ConnectRate: 2000, Timeout: 5 * time.Second,
		StormMode: "herd", RecoverTimeout: 60 * time.Second}
}

func (v *Versus) Name() string { return "versus" }

func (v *Versus) Describe() string {
	return `Issue 19: one row of the corral-vs-Centrifugo table, either server, the standard client.

--server corral|centrifugo picks the dialect: corral's protocol and internal
API, or Centrifugo's JSON protocol (/connection/websocket) and HTTP API
(--api http://host:port, --api-key for X-API-Key). --workload picks the row:

  busy-room  1 room x 200 members, 20 senders x 20 Hz client publishes
  broadcast  15,000 sockets over 100 rooms, 250 server-API publishes/s
  storm      10,000 sockets over 100 rooms, 100 publishes/s; at a third of
             --duration every socket is reset at once (TCP RST from the
             generator) and each client comes back on its own timer, W1's
             schedule min(300ms*2^(n-1), 5s)*(1+-0.5*rand) before attempt
             n, with no cap on dials in flight, rejoining from its last
             offset and epoch (--storm-mode herd); the window is the reset
             to the last client's recovered join (the reconnect phase),
             the p99 is reset to recovered join. --storm-mode bounded is
             the old storm: a drop without a close frame, 512 rejoins in
             flight at most, the window up to the end of publishing
  idle       10,000 sockets over 100 rooms; RSS growth per connection
             after --settle

Give --pid: the row's figure is the server's CPU-s from /proc. The
generator's own CPU differs per dialect (JSON decoding); it is reported
but is not the server's. bench/scripts/versus.sh runs the whole table.`
}

func (v *Versus) Flags(fs *flag.FlagSet) {
	fs.StringVar(&v.Server, "server", v.Server, "the server under load: corral or centrifugo")
	fs.StringVar(&v.Workload, "workload", v.Workload, "busy-room, broadcast, storm or idle")
	fs.IntVar(&v.Sockets, "sockets", 0, "WebSocket clients (0: the workload's default)")
	fs.IntVar(&v.Rooms, "rooms", 0, "rooms (0: the workload's default)")
	fs.IntVar(&v.Senders, "senders", 0, "busy-room: clients that publish (0: the default)")
	fs.Float64Var(&v.Rate, "rate", 0, "publishes per `second` (0: the workload's default)")
	fs.DurationVar(&v.Duration, "duration", 0, "publishing time (0: the workload's default)")
	fs.IntVar(&v.Size, "size", v.Size, "payload `bytes`")
	fs.IntVar(&v.Workers, "publishers", v.Workers, "server-API publishes in flight at most")
	fs.Float64Var(&v.ConnectRate, "connect-rate", v.ConnectRate, "new connections per `second` while setting up")
	fs.DurationVar(&v.Settle, "settle", 0, "idle: wait this long after the last connection before measuring (0: the default)")
	fs.DurationVar(&v.Timeout, "publish-timeout", v.Timeout, "deadline of one publish")
	fs.StringVar(&v.StormMode, "storm-mode", v.StormMode, "storm: herd (every socket reset, each client back on W1's own timer, no cap) or bounded (the old storm: 512 rejoins in flight at most)")
	fs.DurationVar(&v.RecoverTimeout, "recover-timeout", v.RecoverTimeout, "storm: how long the herd may take to come back")
	fs.DurationVar(&v.After, "after", v.After, "storm, herd mode: publish at least this long once the last client is back (the post-herd window; 0: only for --duration, which may end before the herd does)")
}

func (v *Versus) params() map[string]any {
	return map[string]any{
		"server": v.Server, "workload": v.Workload, "sockets": v.Sockets, "rooms": v.Rooms,
		"senders": v.Senders, "rate": v.Rate, "duration": v.Duration.String(), "size": v.Size,
		"publishers": v.Workers, "connect-rate": v.ConnectRate, "settle": v.Settle.String(),
		"storm-mode": v.StormMode, "recover-timeout": v.RecoverTimeout.String(),
		"after": v.After.String(),
	}
}

// withDefaults fills the zero parameters from the workload's defaults.
func (v *Versus) withDefaults() (Versus, error) {
	d, ok := versusDefaults[v.Workload]
	if !ok {
		return *v, fmt.Errorf("bench: --workload is busy-room, broadcast, storm or idle, not %q", v.Workload)
	}
	out := *v
	if out.Sockets == 0 {
		out.Sockets = d.Sockets
	}
	if out.Rooms == 0 {
		out.Rooms = d.Rooms
	}
	if out.Senders == 0 {
		out.Senders = d.Senders
	}
	if out.Rate == 0 {
		out.Rate = d.Rate
	}
	if out.Duration == 0 {
		out.Duration = d.Duration
	}
	if out.Settle == 0 {
		out.Settle = d.Settle
	}
	if out.Workload == "storm" && out.StormMode != "herd" && out.StormMode != "bounded" {
		return out, fmt.Errorf("bench: --storm-mode is herd or bounded, not %q", out.StormMode)
	}
	if out.Sockets <= 0 || out.Rooms <= 0 || out.ConnectRate <= 0 {
		return out, errors.New("bench: versus needs positive --sockets, --rooms and --connect-rate")
	}
	return out, nil
}

// vsMember is one client of a versus run.
type vsMember struct {
	idx  int
	room string
	// gen numbers the member's connections: a publication read by an
	// earlier (dropped) one is ignored.
	gen  atomic.Uint64
	sess Session
	pos  Position // the position of its last join
	last atomic.Uint64
	got  atomic.Uint64
	gaps atomic.Uint64
	// dups counts publications read again on one connection (an offset
	// at or below the last read).
	dups atomic.Uint64
	// gapFrom and gapTo are the first gap's missing offsets (gapFrom 0:
	// none), for the check's report.
	gapFrom, gapTo atomic.Uint64
}

// vsRun is the state of one versus run.
type vsRun struct {
	v       Versus
	d       Dialect
	r       *run
	rooms   func(int) string
	connLat histogram
	post    postHerd // the herd's: reads once it is over

	mu      sync.Mutex // guards the following fields
	members []*vsMember
	upto    map[string]uint64 // highest acknowledged offset per room
}

func (v *Versus) Run(ctx context.Context, o Options) (*Result, error) {
	o = o.withDefaults()
	cfg, err := v.withDefaults()
	if err != nil {
		return nil, err
	}
	d, err := ParseDialect(cfg.Server, o.Target)
	if err != nil {
		return nil, err
	}
	var reset *resetDialer // the herd resets every socket itself
	if cfg.Workload == "storm" && cfg.StormMode == "herd" {
		dt, ok := d.(dialThrougher)
		if !ok {
			return nil, fmt.Errorf("bench: --server %s cannot reset its sockets", cfg.Server)
		}
		reset = newResetDialer(sourceDial(o.sources(cfg.Sockets)))
		dt.dialThrough(reset.client())
	}
	needAPI := cfg.Workload == "broadcast" || cfg.Workload == "storm"
	restore, err := prepare(ctx, o, cfg.Sockets, needAPI)
	if err != nil {
		return nil, err
	}
	defer restore()
	setup := time.Duration(float64(cfg.Sockets)/cfg.ConnectRate*float64(time.Second)) + 30*time.Second
	horizon := 2*setup + cfg.Duration + cfg.Settle + cfg.After + o.Drain + 2*time.Minute
	ctx, cancel := context.WithTimeout(ctx, horizon)
	defer cancel()

	x := &vsRun{v: cfg, d: d, r: newRun("versus "+cfg.Workload, o, horizon),
		rooms: roomNamer(runID(), cfg.Rooms), upto: make(map[string]uint64)}
	x.r.startTicker(ctx)
	defer x.r.stopTicker()

	base, baseErr := x.r.cost.sample(ctx)
	x.r.setPhase("connecting")
	joined := x.connect(ctx, cfg.Sockets)
	if joined == 0 {
		return nil, fmt.Errorf("bench: no client could connect to %s: %v", o.Target.WS, x.r.errors())
	}
	stats := &VersusStats{Server: d.Name(), Workload: cfg.Workload, Joined: joined}
	var srv, gen *Cost
	var rejoin histogram
	switch cfg.Workload {
	case "busy-room", "broadcast":
		x.r.markWindow(ctx)
		x.r.setPhase("publishing")
		x.publish(ctx, time.Now().Add(100*time.Millisecond), cfg.Duration)
		srv, gen = x.r.endWindow(ctx)
		stats.P99Ms = ms(x.r.lat.quantile(0.99))
	case "storm":
		stats.StormMode = cfg.StormMode
		if reset != nil {
			var first herdFailures
			var window time.Duration
			stats.NotRecovered, stats.Recovered, stats.Cut, window, srv, gen = x.herd(ctx, reset, &rejoin, &first)
			stats.WindowSeconds = window.Seconds()
			stats.FirstFailures = first.counts()
		} else {
			stats.NotRecovered, srv, gen = x.storm(ctx, &rejoin)
			stats.Recovered = int(rejoin.n.Load())
		}
		stats.P99Ms = ms(rejoin.quantile(0.99))
		stats.RecoverP50Ms, stats.RecoverMaxMs = ms(rejoin.quantile(0.5)), ms(time.Duration(rejoin.max.Load())*time.Microsecond)
	case "idle":
		x.r.markWindow(ctx)
		x.r.setPhase("idle")
		retry.Sleep(ctx, cfg.Settle)
		srv, gen = x.r.endWindow(ctx)
		stats.P99Ms = ms(x.connLat.quantile(0.99))
		if srv != nil && baseErr == nil && srv.RSSEnd > base.rss {
			stats.PerConnBytes = (srv.RSSEnd - base.rss) / uint64(joined)
			srv.PerConn = stats.PerConnBytes
		}
	}
	if srv != nil {
		stats.ServerCPUSeconds = srv.CPUSeconds
		if x.r.winSrvOK && stats.WindowSeconds == 0 {
			stats.WindowSeconds = time.Since(x.r.winSrv.at).Seconds()
		}
	}
	x.r.setPhase("draining")
	x.drain(ctx, o.Drain)
	x.r.setPhase("closing")
	x.closeAll()
	x.r.stopTicker()

	res := &Result{
		Scenario: "versus", Started: x.r.start, Seconds: time.Since(x.r.start).Seconds(),
		Target: o.Target, Params: cfg.params(), Best: -1,
		Latency: x.r.lat.summary(), Histogram: x.r.lat.buckets(), Errors: x.r.errors(),
		Timeline: x.r.timeline(), Server: srv, Generator: gen, Versus: stats,
		Connect: &ConnectStats{Target: cfg.Sockets, Joined: joined, Failed: cfg.Sockets - joined, Latency: x.connLat.summary()},
	}
	if x.r.acks.n.Load() > 0 {
		a := x.r.acks.summary()
		res.Acks = &a
	}
	res.Delivery = x.check()
	stats.Deliveries, stats.Gaps, stats.Duplicated = res.Delivery.Received, res.Delivery.Lost, res.Delivery.Duplicated
	res.Headline = fmt.Sprintf("%s %s: %d sockets, server %.2f CPU-s over %.1f s, p99 %.1f ms, %d deliveries, %d missing",
		d.Name(), cfg.Workload, joined, stats.ServerCPUSeconds, stats.WindowSeconds, stats.P99Ms, stats.Deliveries, stats.Gaps)
	if cfg.Workload == "storm" {
		res.Headline += fmt.Sprintf(", %d duplicated; %s storm: %d of %d recovered (%d reset), p50 %.0f ms, p99 %.0f ms, max %.0f ms",
			stats.Duplicated, cfg.StormMode, stats.Recovered, joined, stats.Cut, stats.RecoverP50Ms, stats.P99Ms, stats.RecoverMaxMs)
		if cfg.StormMode == "herd" {
			stats.PostHerd = x.post.stats()
			res.Headline += fmt.Sprintf("; first attempts failed: %s; %s", fmtCounts(stats.FirstFailures), stats.PostHerd.headline())
		}
	}
	if stats.PerConnBytes > 0 {
		res.Headline += fmt.Sprintf(", %.1f KiB per connection", float64(stats.PerConnBytes)/1024)
	}
	if res.Delivery.Lost > 0 || res.Delivery.Duplicated > 0 {
		return res, fmt.Errorf("%w: %d missing, %d duplicated; first: %s", ErrViolation, res.Delivery.Lost, res.Delivery.Duplicated, res.Delivery.Violations[0])
	}
	return res, nil
}

// connect dials n members paced at ConnectRate and joins each to its room.
func (x *vsRun) connect(ctx context.Context, n int) int {
	var joined atomic.Int64
	setup := time.Duration(float64(n)/x.v.ConnectRate*float64(time.Second)) + 30*time.Second
	paceGo(ctx, time.Now(), steady(x.v.ConnectRate, setup), n, 512, func(k int, at time.Time) {
		m := &vsMember{idx: k, room: x.rooms(k)}
		x.r.sentOne(at)
		start := time.Now()
		if err := x.join(ctx, m, false); err != nil {
			return
		}
		x.connLat.observe(time.Since(start))
		x.mu.Lock()
		x.members = append(x.members, m)
		x.mu.Unlock()
		joined.Add(1)
	})
	return int(joined.Load())
}

// join connects m (again) and joins its room, from its last position when
// recover is set.
func (x *vsRun) join(ctx context.Context, m *vsMember, recover bool) error {
	g := m.gen.Add(1)
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	s, err := x.d.Dial(dctx, "bench-"+strconv.Itoa(m.idx), func(p Pub) { x.read(m, g, p) })
	if err != nil {
		x.r.fail("connect:"+dialErrorKind(err), 0)
		return err
	}
	from := Position{Offset: m.last.Load(), Epoch: m.pos.Epoch}
	pos, err := s.Join(dctx, m.room, from, recover)
	var joinErr error
	if errors.Is(err, errNotRecovered) {
		x.r.fail("rejoin:not-recovered", 0)
		joinErr = err
	} else if err != nil {
		x.r.fail("join:"+dialErrorKind(err), 0)
		s.Drop()
		return err
	}
	m.sess, m.pos = s, pos
	// A live join starts counting from the room's position: the first
	// publication read after it must follow it.
	if !recover {
		m.last.CompareAndSwap(0, pos.Offset)
	}
	x.r.conns.Add(1)
	go func() {
		<-s.Done()
		x.r.conns.Add(-1)
	}()
	return joinErr
}

// read records one publication read by m's connection number g.
func (x *vsRun) read(m *vsMember, g uint64, p Pub) {
	if m.gen.Load() != g {
		return
	}
	now := time.Now()
	if t, ok := sentTime(p.Payload); ok {
		x.r.delivered(t, now)
		x.post.observe(m.idx, m.room, p.Offset, t, now)
	}
	m.got.Add(1)
	last := m.last.Load()
	switch {
	case p.Offset == 0:
	case last != 0 && p.Offset <= last:
		m.dups.Add(1)
	case last != 0 && p.Offset > last+1:
		m.gaps.Add(p.Offset - last - 1)
		if m.gapFrom.CompareAndSwap(0, last+1) {
			m.gapTo.Store(p.Offset - 1)
		}
		m.last.Store(p.Offset)
	case p.Offset > last:
		m.last.Store(p.Offset)
	}
}

// publish publishes at Rate for d from start: from the senders' sockets
// (busy-room) or through the server API, round-robin over the rooms.
func (x *vsRun) publish(ctx context.Context, start time.Time, d time.Duration) {
	type job struct {
		k  int
		at time.Time
	}
	var wg sync.WaitGroup
	var queues []chan job
	if x.v.Workload == "busy-room" {
		x.mu.Lock()
		senders := x.members[:min(max(x.v.Senders, 1), len(x.members))]
		x.mu.Unlock()
		for _, m := range senders {
			q := make(chan job, 16)
			queues = append(queues, q)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range q {
					x.r.sentOne(j.at)
					cctx, cancel := context.WithTimeout(ctx, x.v.Timeout)
					err := m.sess.Publish(cctx, m.room, payload(nil, j.at, j.k, x.v.Size))
					cancel()
					if err != nil {
						x.r.fail("publish:"+dialErrorKind(err), j.at.UnixNano())
						continue
					}
					x.r.acked(nil, time.Since(j.at))
				}
			}()
		}
	} else {
		q := make(chan job, 4096)
		for range max(x.v.Workers, 1) {
			queues = append(queues, q)
		}
		for range max(x.v.Workers, 1) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range q {
					room := x.rooms(j.k)
					x.r.sentOne(j.at)
					cctx, cancel := context.WithTimeout(ctx, x.v.Timeout)
					pos, err := x.d.ServerPublish(cctx, room, payload(nil, j.at, j.k, x.v.Size))
					cancel()
					if err != nil {
						x.r.fail("publish:"+dialErrorKind(err), j.at.UnixNano())
						continue
					}
					x.r.acked(nil, time.Since(j.at))
					x.post.acked(j.at.UnixNano(), time.Since(j.at))
					x.mu.Lock()
					x.upto[room] = max(x.upto[room], pos.Offset)
					x.mu.Unlock()
				}
			}()
		}
		queues = queues[:1]
	}
	pace(ctx, start, steady(x.v.Rate, d), 0, func(k int, at time.Time) bool {
		select {
		case queues[k%len(queues)] <- job{k, at}:
		default:
			x.r.fail("sender-busy", at.UnixNano())
		}
		return true
	})
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
}

// storm publishes for Duration; at a third of it every member drops its
// connection without a close frame and rejoins from its last position.
// The window is the drop to the end of publishing; rejoin gets each
// member's time from the drop to its recovered join.
func (x *vsRun) storm(ctx context.Context, rejoin *histogram) (notRecovered uint64, srv, gen *Cost) {
	start := time.Now().Add(100 * time.Millisecond)
	pubDone := make(chan struct{})
	x.r.setPhase("publishing")
	go func() {
		defer close(pubDone)
		x.publish(ctx, start, x.v.Duration)
	}()
	retry.Sleep(ctx, time.Until(start.Add(x.v.Duration/3)))
	x.r.markWindow(ctx)
	x.r.setPhase("storm")
	x.mu.Lock()
	ms := append([]*vsMember(nil), x.members...)
	x.mu.Unlock()
	dropped := time.Now()
	for _, m := range ms {
		m.gen.Add(1) // what the old connection still reads is not counted
		m.sess.Drop()
	}
	var nr atomic.Uint64
	sem := make(chan struct{}, 512)
	var wg sync.WaitGroup
	for _, m := range ms {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			wait := 50 * time.Millisecond
			for ctx.Err() == nil {
				err := x.join(ctx, m, true)
				if err == nil {
					rejoin.observe(time.Since(dropped))
					return
				}
				if errors.Is(err, errNotRecovered) {
					// Joined, but from the room's present.
					nr.Add(1)
					return
				}
				retry.Sleep(ctx, wait)
				wait = min(2*wait, 2*time.Second)
			}
		}()
	}
	wg.Wait()
	x.r.setPhase("publishing")
	<-pubDone
	srv, gen = x.r.endWindow(ctx)
	return nr.Load(), srv, gen
}

// herd publishes for Duration; at a third of it every member's socket is
// reset at once (TCP RST, reset.ResetAll), and each member comes back on
// its own timer (herdWait: W1's schedule), as many at once as the
// schedule brings, rejoining from its last position. Publishing goes on
// at least After once the last member is back. The window is the
// reset to the last member's recovered join, or RecoverTimeout. rejoin
// gets each member's time from the reset to its recovered join; first
// the first attempts that failed, by kind.
func (x *vsRun) herd(ctx context.Context, reset *resetDialer, rejoin *histogram, first *herdFailures) (notRecovered uint64, recovered, cut int, window time.Duration, srv, gen *Cost) {
	start := time.Now().Add(100 * time.Millisecond)
	pubDone := make(chan struct{})
	x.r.setPhase("publishing")
	go func() {
		defer close(pubDone)
		x.publish(ctx, start, x.v.Duration)
	}()
	retry.Sleep(ctx, time.Until(start.Add(x.v.Duration/3)))
	x.r.markWindow(ctx)
	x.r.setPhase("storm")
	x.mu.Lock()
	ms := append([]*vsMember(nil), x.members...)
	x.mu.Unlock()
	for _, m := range ms {
		m.gen.Add(1) // what the old connection still reads is not counted
	}
	cut = reset.ResetAll()
	dropped := time.Now()
	rctx, cancel := context.WithTimeout(ctx, x.v.RecoverTimeout)
	defer cancel()
	var nr atomic.Uint64
	var back atomic.Int64
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 1; retry.Sleep(rctx, herdWait(n)); n++ {
				err := x.join(rctx, m, true)
				switch {
				case err == nil:
					rejoin.observe(time.Since(dropped))
					back.Add(1)
					return
				case errors.Is(err, errNotRecovered):
					// Joined, but from the room's present.
					nr.Add(1)
					return
				case n == 1:
					first.add(dialErrorKind(err))
				}
			}
		}()
	}
	wg.Wait()
	over := time.Now()
	x.post.begin(over)
	srv, gen = x.r.endWindow(ctx)
	window = time.Since(dropped)
	x.r.setPhase("publishing")
	<-pubDone
	// The herd can outlast Duration: publishing then goes on (After) for
	// the post-herd figures to have something to measure.
	if rest := x.v.After - time.Since(over); rest > 0 && ctx.Err() == nil {
		x.publish(ctx, time.Now(), rest)
	}
	return nr.Load(), int(back.Load()), cut, window, srv, gen
}

// fmtCounts is "kind n, kind n" in kind order, or "none".
func fmtCounts(c map[string]int) string {
	h := herdFailures{by: c}
	return h.String()
}

// drain waits, at most d, until every member has read its room up to the
// room's last offset: the highest acknowledged one, or, where publishes
// are acknowledged without an offset (client publishes, busy-room), the
// highest any member has read. The latter is known only once some member
// has read the last publication, so the drain then lasts at least
// minDrainSettle, for a coalescing server's last frames to land (without
// it the check counted every member still within its server's write
// window as behind).
func (x *vsRun) drain(ctx context.Context, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	settled := time.Now().Add(minDrainSettle)
	for {
		behind, unacked := false, false
		x.mu.Lock()
		last := x.lastOffsets()
		for _, m := range x.members {
			if _, ok := x.upto[m.room]; !ok {
				unacked = true
			}
			if m.last.Load() < last[m.room] {
				behind = true
				break
			}
		}
		x.mu.Unlock()
		if !behind && (!unacked || time.Now().After(settled)) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// minDrainSettle is the least a drain waits when the rooms' last offsets
// are not acknowledged (see drain): well past any server's write window.
const minDrainSettle = 500 * time.Millisecond

// lastOffsets returns each room's last offset as far as the run knows:
// the highest acknowledged, or read by any member. x.mu must be held.
func (x *vsRun) lastOffsets() map[string]uint64 {
	last := make(map[string]uint64, len(x.upto))
	for k, v := range x.upto {
		last[k] = v
	}
	for _, m := range x.members {
		last[m.room] = max(last[m.room], m.last.Load())
	}
	return last
}

// closeAll closes every member's connection normally.
func (x *vsRun) closeAll() {
	x.mu.Lock()
	ms := append([]*vsMember(nil), x.members...)
	x.mu.Unlock()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for _, m := range ms {
		if m.sess == nil {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			m.gen.Add(1)
			_ = m.sess.Close()
		}()
	}
	wg.Wait()
}

// check counts what the members read and what they missed: gaps in their
// offsets, and offsets acknowledged to the publisher that a member never
// read.
func (x *vsRun) check() Delivery {
	x.mu.Lock()
	defer x.mu.Unlock()
	var d Delivery
	// Client publishes are acknowledged without an offset: the room's
	// last offset is the highest any member read.
	upto := x.lastOffsets()
	d.Published = x.r.acks.n.Load()
	// Each member that missed something is named, a gap (a hole in what it
	// read) apart from a tail (behind when the drain ended), the first
	// maxVersusViolations of them: a loss and a reader left behind call for
	// different fixes.
	report := func(format string, a ...any) {
		if len(d.Violations) < maxVersusViolations {
			d.Violations = append(d.Violations, fmt.Sprintf(format, a...))
		}
	}
	for _, m := range x.members {
		d.Received += m.got.Load()
		if g := m.gaps.Load(); g > 0 {
			d.Lost += g
			report("member %d (%s): %d missing in gaps, the first %d-%d", m.idx, m.room, g, m.gapFrom.Load(), m.gapTo.Load())
		}
		if n := m.dups.Load(); n > 0 {
			d.Duplicated += n
			report("member %d (%s): %d publications read twice", m.idx, m.room, n)
		}
		if l := m.last.Load(); l < upto[m.room] {
			d.Lost += upto[m.room] - l
			report("member %d (%s): behind when the drain ended, read up to %d of %d", m.idx, m.room, l, upto[m.room])
		}
	}
	d.ServerQueued = -1
	return d
}

// maxVersusViolations bounds the members a versus check names.
const maxVersusViolations = 20
