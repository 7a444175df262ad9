package bench

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/faultproxy"
)

// Storm is W1's reconnect storm: Clients sessions (client.Session) in Rooms
// rooms, a backend publishing Rate messages/s per room over the internal
// API; once steady, every connection is reset at once with TCP RST, and the
// run measures how each session comes back: from the RST to its
// EventConnected{Resumed: true}, the dials it took, failures by kind, and
// that nothing was lost or duplicated meanwhile.
//
// By default (Cause "rst") the generator dials the sessions' sockets
// itself and resets them all (SO_LINGER 0, close): the server gets a RST on
// every socket, as from a middlebox, with nothing copying traffic in
// between. Cause "rst-proxy" puts a TCP proxy in front of the target that
// resets both sides instead. A proxied client costs 7 open files (the
// client's socket, the proxy's two, and two pipe pairs); under a
// 20,000-file limit the proxy therefore runs in this process only up to
// about 2,800 clients; beyond, the generator starts child processes of
// itself (corral-bench with ProxyChildArg), one per 2,500 clients, and keeps
// one file per client.
type Storm struct {
	Clients        int
	Rooms          int
	Rate           float64
	Steady         time.Duration
	After          time.Duration
	RecoverTimeout time.Duration
	ConnectRate    float64
	Publishers     int
	Size           int
	Timeout        time.Duration
	Proxies        int
	// Cause is how the connections end: "rst" (the proxy resets them) or
	// "drain" (POST /admin/drain on the target's internal listener,
	// Admin; the sessions move to Fallback, or come back to the target
	// once it restarts).
	Cause       string
	DrainWindow time.Duration
	Fallback    string
	// Admin is the base URL of the drained server's internal listener
	// (corral --internal-addr), where /admin/drain is. Default: the
	// target's API.
	Admin string
	// Presence: sessions join with presence; the result counts their
	// presence frames and bytes (the reset and the resumes included).
	Presence bool
	// Rejoin: each client holds a plain client.Conn and comes back with a
	// new session and a positioned join (Join.since_seq and epoch), not
	// hello.resume (stormrejoin.go).
	Rejoin bool
	// Schedule is how a client spaces its reconnect attempts: "w1" (the
	// default), seed 001's min(300ms*2^(n-1), 5s)*(1±0.5*rand) before
	// every attempt n (herd.go), or "sdk", the old storm's: client.Session's
	// default Backoff, and with --rejoin a dial at once, then 100ms
	// doubling to 4s. Neither caps the dials in flight.
	Schedule string
	// Hooks serves a counting hooks backend (--hooks-listen).
	Hooks HooksOptions

	httpClient *http.Client // with --cause rst: dials what ResetAll resets
}

// NewStorm returns W1's figures: 10,000 clients in 100 rooms of 100, 10
// messages/s per room (100,000 deliveries/s).
func NewStorm() *Storm {
	return &Storm{
		Clients: 10000, Rooms: 100, Rate: 10,
		Steady: 5 * time.Second, After: 5 * time.Second, RecoverTimeout: 60 * time.Second,
		ConnectRate: 1000, Publishers: 32, Size: 100, Timeout: 5 * time.Second,
		Cause: "rst", DrainWindow: 10 * time.Second, Schedule: "w1",
	}
}

func (s *Storm) Name() string { return "storm" }

func (s *Storm) Describe() string {
	return `W1 (seed 001): a reconnect storm, every connection reset at once.

W1's reconnect storm: --clients self-healing sessions (client.Session) in
--rooms rooms; a backend publishes --rate messages/s per room over the
internal API (--api). After --steady, every connection is reset with TCP
RST at once. Reports, per client, the time from the RST to its resumed
connection (p50/p95/p99/max), the dials each reconnect took, failures by
kind, lost and duplicated messages (must be 0/0), the server's CPU seconds
from the RST until all resumed, and its peak RSS. Publishing goes on for
--after once all have resumed.

--cause rst (the default): the generator resets its own sockets
(SO_LINGER 0, then close) at the same instant; the server receives a RST
on every socket, exactly what a middlebox reset sends it, and no proxy sits
in the path copying traffic. --cause rst-proxy: the clients connect through
a TCP proxy that this generator starts in front of --url, and the proxy
resets both sides. A proxied connection costs 7 open files (the client's
socket, the proxy's two, two pipe pairs); under a 20,000-file limit the
proxy runs in this process up to ~2,800 clients; beyond (or with --proxies
N) corral-bench starts proxy child processes of itself, one per 2,500
clients, each with its own file limit.

With --rejoin the clients are not client.Sessions: each holds a plain
connection and, once reset, comes back with a NEW session and joins its room
from the last seq it read and the room's epoch (a positioned join), as
clients built without corral's SDK do; the figures count such a rejoin as
"resumed" (a Reset instead of a replay is an error, "reset").

With --cause drain there is no proxy: the clients connect to --url directly,
and instead of the RST the generator drains that server (POST /admin/drain
on its internal listener, --admin, with --drain-window, the internal API key as bearer). Each client follows
its hint to --fallback (another edge of the same deployment, sharing Redis),
or, without one, back to --url once something listens there again (a
restarted process). Reports the time from the drain until all are back and
the peak reconnect rate (resumes per second, by the clients' clocks).`
}

func (s *Storm) Flags(fs *flag.FlagSet) {
	fs.IntVar(&s.Clients, "clients", s.Clients, "sessions")
	fs.IntVar(&s.Rooms, "rooms", s.Rooms, "rooms the clients are spread over (round-robin)")
	fs.Float64Var(&s.Rate, "rate", s.Rate, "publishes per `second` per room")
	fs.DurationVar(&s.Steady, "steady", s.Steady, "how long to publish before the reset")
	fs.DurationVar(&s.After, "after", s.After, "how long to keep publishing once all have resumed")
	fs.DurationVar(&s.RecoverTimeout, "recover-timeout", s.RecoverTimeout, "how long to wait for every client to resume")
	fs.Float64Var(&s.ConnectRate, "connect-rate", s.ConnectRate, "new sessions per `second` while setting up")
	fs.IntVar(&s.Publishers, "publishers", s.Publishers, "publish RPCs in flight at most")
	fs.IntVar(&s.Size, "size", s.Size, "payload `bytes`")
	fs.DurationVar(&s.Timeout, "publish-timeout", s.Timeout, "deadline of one publish RPC")
	fs.StringVar(&s.Schedule, "schedule", s.Schedule, "how each client spaces its reconnects: w1 (seed 001: min(300ms*2^(n-1), 5s)*(1+-0.5*rand) before attempt n) or sdk (the old storm: the SDK's default backoff; with --rejoin a dial at once, then 100ms doubling to 4s)")
	fs.BoolVar(&s.Rejoin, "rejoin", s.Rejoin, "clients come back with a NEW session and join their room from the last seq read and its epoch (a positioned join), instead of resuming their session; with --cause rst")
	fs.BoolVar(&s.Presence, "presence", s.Presence, "join with presence and count the presence frames and bytes each member reads, through the reset and the resumes")
	fs.IntVar(&s.Proxies, "proxies", s.Proxies, "with --cause rst-proxy: proxy child processes (0: in this process when the open-file limit allows, else one per 2,500 clients; -1: always in this process)")
	fs.StringVar(&s.Cause, "cause", s.Cause, "how the connections end: rst (this generator resets every socket: SO_LINGER 0, close), rst-proxy (TCP RST from a proxy in between) or drain (POST /admin/drain on --admin)")
	fs.StringVar(&s.Admin, "admin", s.Admin, "with --cause drain: base `URL` of the drained server's internal listener (corral --internal-addr), where POST /admin/drain is; default --api")
	fs.DurationVar(&s.DrainWindow, "drain-window", s.DrainWindow, "with --cause drain: the window the server spreads the reconnect hints over")
	fs.StringVar(&s.Fallback, "fallback", s.Fallback, "with --cause drain: the WebSocket `URL` of another edge the clients move to")
	s.Hooks.flags(fs)
}

func (s *Storm) params() map[string]any {
	return s.Hooks.params(map[string]any{
		"clients": s.Clients, "rooms": s.Rooms, "rate": s.Rate, "steady": s.Steady.String(),
		"after": s.After.String(), "recover-timeout": s.RecoverTimeout.String(),
		"connect-rate": s.ConnectRate, "publishers": s.Publishers, "size": s.Size,
		"publish-timeout": s.Timeout.String(), "proxies": s.Proxies,
		"cause": s.Cause, "drain-window": s.DrainWindow.String(), "fallback": s.Fallback, "presence": s.Presence, "rejoin": s.Rejoin, "schedule": s.Schedule,
	})
}

// stormState is what the sessions' consumers share.
type stormState struct {
	resetAt  atomic.Int64 // unix nanos of the RST; 0 before
	recovery histogram
	resumed  atomic.Int64
	failed   atomic.Int64 // came back without resuming, or ended

	first herdFailures // --rejoin: first reconnect dials that failed, by kind

	mu          sync.Mutex // guards the following fields
	disconnects map[string]int
	perSecond   map[int64]int // resumes by whole second since the cut
}

type stormClient struct {
	m    *member
	sess *client.Session // nil with --rejoin
	rj   *rejoiner       // with --rejoin
	// back is set once by the consumer: the client came back (or failed).
	back atomic.Bool
}

func (s *Storm) Run(ctx context.Context, o Options) (*Result, error) {
	o = o.withDefaults()
	if s.Clients <= 0 || s.Rooms <= 0 || s.Rate <= 0 || s.ConnectRate <= 0 {
		return nil, errors.New("bench: storm needs positive --clients, --rooms, --rate and --connect-rate")
	}
	drain := s.Cause == "drain"
	if s.Schedule != "w1" && s.Schedule != "sdk" && s.Schedule != "" {
		return nil, fmt.Errorf("bench: storm: --schedule %q: want w1 or sdk", s.Schedule)
	}
	if s.Rejoin && (drain || s.Presence) {
		return nil, errors.New("bench: storm --rejoin goes with --cause rst or rst-proxy, without --presence")
	}
	var local *resetDialer // --cause rst: the generator resets its own sockets
	switch s.Cause {
	case "rst", "":
		local = newResetDialer(sourceDial(o.sources(s.Clients)))
	case "drain", "rst-proxy":
	default:
		return nil, fmt.Errorf("bench: storm: --cause %q: want rst, rst-proxy or drain", s.Cause)
	}
	// The proxy (rst-proxy): in this process when its files fit, else
	// child processes of clientsPerProxy clients each (--proxies overrides).
	limit, _ := raiseFileLimit()
	nproxy := s.Proxies
	if nproxy == 0 && limit > 0 && uint64(filesPerProxied*s.Clients+256) > limit {
		nproxy = (s.Clients + clientsPerProxy - 1) / clientsPerProxy
	}
	conns := filesPerProxied * s.Clients
	if nproxy > 0 || drain || local != nil {
		conns = s.Clients
	}
	restore, err := prepare(ctx, o, conns, true)
	if err != nil {
		return nil, err
	}
	defer restore()
	hctx, stopHooks := context.WithCancel(ctx)
	defer stopHooks()
	hooks, err := s.Hooks.start(hctx)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(o.Target.WS)
	if err != nil {
		return nil, fmt.Errorf("bench: storm: --url: %w", err)
	}
	var proxies []stormProxy
	defer func() {
		for _, p := range proxies {
			p.Close()
		}
	}()
	if drain || local != nil {
		nproxy = 0
	} else if nproxy <= 0 {
		p, err := faultproxy.Start(u.Host)
		if err != nil {
			return nil, fmt.Errorf("bench: storm: start the proxy: %w", err)
		}
		proxies = append(proxies, p)
	}
	for range nproxy {
		p, err := startChildProxy(u.Host)
		if err != nil {
			return nil, err
		}
		proxies = append(proxies, p)
	}
	urls := make([]string, len(proxies))
	for i, p := range proxies {
		pu := *u
		pu.Host = p.Addr()
		urls[i] = pu.String()
	}
	if drain || local != nil {
		urls = []string{o.Target.WS}
	}
	if local != nil {
		s.httpClient = local.client()
	}

	setup := time.Duration(float64(s.Clients)/s.ConnectRate*float64(time.Second)) + 30*time.Second
	horizon := setup + s.Steady + s.RecoverTimeout + s.After + o.Drain + 2*time.Minute
	ctx, cancel := context.WithTimeout(ctx, horizon)
	defer cancel()

	r := newRun(s.Name(), o, horizon)
	rooms := roomNamer(runID(), s.Rooms)
	f := newFleet(r, rooms)
	st := &stormState{disconnects: map[string]int{}, perSecond: map[int64]int{}}
	if s.Presence {
		f.presence = new(presenceTally)
	}
	r.startTicker(ctx)
	defer r.stopTicker()

	// Connect the sessions through the proxy, paced.
	r.setPhase("connecting")
	var mu sync.Mutex
	var clients []*stormClient
	f.target = s.Clients
	dial := s.dial
	if s.Rejoin {
		dial = s.dialRejoin
	}
	paceGo(ctx, time.Now(), steady(s.ConnectRate, setup), s.Clients, 256, func(i int, at time.Time) {
		if c := dial(ctx, r, f, st, urls[i%len(urls)], i, at); c != nil {
			mu.Lock()
			clients = append(clients, c)
			mu.Unlock()
		}
	})
	if len(clients) == 0 {
		return nil, fmt.Errorf("bench: no client could connect to %s (through the proxy): %v", o.Target.WS, r.errors())
	}

	// Publish from now until the end; reset once steady.
	total := s.Steady + s.RecoverTimeout + s.After + 10*time.Second
	steps, p := rateSteps(s.Rate*float64(s.Rooms), total, nil, 0, "publishes/s")
	start := time.Now().Add(100 * time.Millisecond)
	r.steps = stepRecs(steps, start)
	stop, stopPublish := context.WithCancel(ctx)
	defer stopPublish()
	pubDone := make(chan struct{})
	r.setPhase("steady")
	go func() {
		defer close(pubDone)
		apiPublishUntil(ctx, stop, r, apiClient(o.Target), r.ledger, rooms, start, p, s.Publishers, s.Size, s.Timeout)
	}()
	select {
	case <-time.After(time.Until(start.Add(s.Steady))):
	case <-ctx.Done():
	}

	r.setPhase("storm")
	r.markWindow(ctx)
	var hooksAtReset HooksCounts
	if hooks != nil {
		hooksAtReset = hooks.Counts()
	}
	resetAt := time.Now()
	st.resetAt.Store(resetAt.UnixNano())
	var cut int
	drained := make(chan error, 1)
	switch {
	case drain:
		cut = len(clients)
		go func() { drained <- s.drainTarget(ctx, o) }()
	case local != nil:
		cut = local.ResetAll()
		drained <- nil
	default:
		cut = resetAll(proxies)
		drained <- nil
	}
	deadline := time.NewTimer(s.RecoverTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	for st.resumed.Load()+st.failed.Load() < int64(len(clients)) {
		select {
		case <-deadline.C:
		case <-ctx.Done():
		case <-tick.C:
			continue
		}
		break
	}
	tick.Stop()
	deadline.Stop()
	recovered := time.Since(resetAt)
	if err := <-drained; err != nil {
		r.fail("drain:"+err.Error(), 0)
	}
	srv, gen := r.endWindow(ctx)
	machine := r.machineWindow()

	r.setPhase("after")
	select {
	case <-time.After(s.After):
	case <-ctx.Done():
	}
	stopPublish()
	<-pubDone
	stoppedAt := time.Now().UnixNano()
	acks, upto := r.ledger.snapshot()
	r.setPhase("draining")
	f.drain(ctx, upto, o.Drain)
	r.setPhase("closing")
	attempts := map[string]int{}
	notBack := 0
	for _, c := range clients {
		if !c.back.Load() {
			notBack++
		}
		if c.rj != nil {
			if n := c.rj.lastAttempts(); n > 0 {
				attempts[strconv.Itoa(n)]++
			}
		} else if a := c.sess.Attempts(); len(a) > 1 {
			attempts[strconv.Itoa(a[len(a)-1])]++
		}
	}
	if notBack > 0 {
		r.errMu.Lock()
		r.errs["not-resumed"] += uint64(notBack)
		r.errMu.Unlock()
	}
	// A resumed session's rooms pass the door (and the Join hook) after
	// its Welcome: count the calls from the reset until now, not until
	// the last Welcome.
	var hooksWindow HooksCounts
	if hooks != nil {
		hooksWindow = hooks.Counts().Sub(hooksAtReset)
	}
	closeSessions(clients, 30*time.Second)
	r.stopTicker()
	st.mu.Lock()
	defer st.mu.Unlock()
	// The publisher ran until stopped, not the profile's full length:
	// rates are over what ran (the consumers have ended).
	for _, sr := range r.steps {
		sr.to = min(sr.to, stoppedAt)
	}

	res := &Result{
		Scenario: r.name, Started: r.start, Seconds: time.Since(r.start).Seconds(),
		Target: r.o.Target, Params: s.params(), Best: -1,
		Latency: r.lat.summary(), Histogram: r.lat.buckets(), Errors: r.errors(),
		Timeline: r.timeline(),
	}
	res.Delivery = f.check(upto, acks)
	res.Connect = &ConnectStats{Target: s.Clients, Joined: len(clients), Failed: s.Clients - len(clients), Latency: f.connLat.summary()}
	for _, sr := range r.steps {
		res.Steps = append(res.Steps, sr.result(0))
	}
	if srv != nil {
		srv.RSSPeak = max(srv.RSSPeak, peakRSS(res.Timeline))
	}
	if r.o.InProcess {
		gen = nil
	}
	res.Server, res.Generator, res.MachineCPU = srv, gen, machine
	rec := st.recovery.summary()
	res.Storm = &StormStats{
		Clients: len(clients), Cut: cut, Resumed: int(st.resumed.Load()), Failed: int(st.failed.Load()),
		NotBack: notBack, AllBackSeconds: recovered.Seconds(), Recovery: rec, Attempts: attempts,
		Disconnects: st.disconnects, Cause: s.Cause, Schedule: cmp.Or(s.Schedule, "w1"),
		FirstFailures: st.first.counts(),
	}
	for _, n := range st.perSecond {
		res.Storm.PeakPerSecond = max(res.Storm.PeakPerSecond, n)
	}
	if hooks != nil {
		h := &HooksStats{LatencyMs: ms(hooks.Latency), Total: hooks.Counts(), Window: hooksWindow}
		if n := st.resumed.Load(); n > 0 {
			h.JoinCallsPerResumedRoom = float64(hooksWindow.JoinCalls) / float64(n)
		}
		if hooksWindow.JoinCalls > 0 {
			h.PairsPerJoinCall = float64(hooksWindow.JoinPairs) / float64(hooksWindow.JoinCalls)
		}
		res.Hooks = h
	}
	cpu := ""
	if srv != nil {
		cpu = fmt.Sprintf(", server %.2f CPU-s from RST to all resumed, peak RSS %d MiB", srv.CPUSeconds, srv.RSSPeak>>20)
	}
	what := "connections reset (" + res.Storm.Schedule + " schedule)"
	if s.Rejoin {
		what += ", each back with a new session and a positioned join (\"resumed\": rejoined)"
	}
	if drain {
		what = fmt.Sprintf("drained over %v", s.DrainWindow)
	}
	res.Headline = fmt.Sprintf("storm: %d clients in %d rooms, %d %s: %d resumed in %.1f s (p50 %.0f ms, p95 %.0f ms, p99 %.0f ms, max %.0f ms; peak %d resumes/s), %d failed, %d not back; lost %d, duplicated %d%s",
		len(clients), s.Rooms, cut, what, st.resumed.Load(), recovered.Seconds(), rec.P50, rec.P95, rec.P99, rec.Max,
		res.Storm.PeakPerSecond, st.failed.Load(), notBack, res.Delivery.Lost, res.Delivery.Duplicated, cpu)
	if s.Rejoin {
		res.Headline += "; first rejoins failed: " + st.first.String()
	}
	if f.presence != nil {
		res.Presence = f.presence.stats()
		res.Headline += res.Presence.headline()
	}
	if h := res.Hooks; h != nil {
		res.Headline += fmt.Sprintf("; hooks backend (+%g ms): %d Join calls for %d resumed rooms (%.4f per room)",
			h.LatencyMs, h.Window.JoinCalls, st.resumed.Load(), h.JoinCallsPerResumedRoom)
	}
	if len(res.Delivery.Violations) > 0 {
		return res, fmt.Errorf("%w: %d lost, %d duplicated; first: %s", ErrViolation,
			res.Delivery.Lost, res.Delivery.Duplicated, res.Delivery.Violations[0])
	}
	return res, nil
}

// dial connects session i through the proxy and joins its room.
func (s *Storm) dial(ctx context.Context, r *run, f *fleet, st *stormState, wsURL string, i int, scheduled time.Time) *stormClient {
	m := &member{idx: i, name: "bench-" + strconv.Itoa(i), room: f.room(i), done: make(chan struct{})}
	token := r.o.Target.Token
	if token == "" {
		token = m.name
	}
	dctx, cancel := context.WithTimeout(ctx, f.dialTTL)
	defer cancel()
	t0 := time.Now()
	r.sentOne(scheduled)
	opts := client.SessionOptions{
		Options:     client.Options{Token: token, Encoding: r.o.Encoding, Transport: r.o.Transport, FrameBuffer: frameBuffer, HTTPClient: r.o.Client.httpClient(s.httpClient)},
		EventBuffer: frameBuffer,
	}
	if s.Cause == "drain" && s.Fallback != "" {
		opts.Fallbacks = []string{s.Fallback}
	}
	if s.Schedule != "sdk" {
		// The Session's attempt 0 is seed 001's attempt 1.
		opts.Backoff.Schedule = func(n int) time.Duration { return herdWait(n + 1) }
	}
	sess, err := client.Connect(dctx, wsURL, opts)
	if err != nil {
		r.fail("connect:"+dialErrorKind(err), 0)
		return nil
	}
	var j *corralv1.Joined
	if f.presence != nil {
		m.pres = new(presenceCount)
		f.presence.add(m.pres)
		j, err = sess.JoinPresence(dctx, m.room, []byte(`{"name":"`+m.name+`"}`))
	} else {
		j, err = sess.Join(dctx, m.room)
	}
	if err != nil {
		r.fail("join:"+dialErrorKind(err), 0)
		_ = sess.Close()
		return nil
	}
	f.connLat.observe(time.Since(t0))
	m.joined = j.GetSeq()
	c := &stormClient{m: m, sess: sess}
	f.mu.Lock()
	f.members = append(f.members, m)
	f.mu.Unlock()
	r.conns.Add(1)
	go s.consume(r, st, c)
	return c
}

// consume reads c's events until its session ends.
func (s *Storm) consume(r *run, st *stormState, c *stormClient) {
	m := c.m
	defer close(m.done)
	defer r.conns.Add(-1)
	for ev := range c.sess.Events() {
		switch ev.Kind {
		case client.EventFrame:
			if m.pres != nil && ev.Frame.GetPresence() != nil {
				m.pres.observe(r.o.Encoding, ev.Frame)
				continue
			}
			if msg, ok := ev.Frame.GetKind().(*corralv1.ServerFrame_Message); ok {
				if msg.Message.GetRoom() != m.room {
					continue
				}
				if t, ok := sentTime(msg.Message.GetPayload()); ok {
					r.delivered(t, time.Now())
				}
				m.got = append(m.got, entry{msg.Message.GetSeq(), msg.Message.GetId()})
				if q := msg.Message.GetSeq(); q > m.last.Load() {
					m.last.Store(q)
				}
			}
		case client.EventConnected:
			at := st.resetAt.Load()
			if at == 0 || c.back.Load() {
				continue
			}
			c.back.Store(true)
			if ev.Resumed {
				d := time.Duration(time.Now().UnixNano() - at)
				st.recovery.observe(d)
				st.resumed.Add(1)
				st.mu.Lock()
				st.perSecond[int64(d/time.Second)]++
				st.mu.Unlock()
			} else {
				st.failed.Add(1)
				r.fail("new-session", 0)
			}
		case client.EventDisconnected:
			if st.resetAt.Load() != 0 && !c.back.Load() && ev.Err != nil {
				kind := dialErrorKind(ev.Err)
				var ce *client.CloseError
				if errors.As(ev.Err, &ce) && ce.Code <= 0 && ce.Err != nil {
					kind = dialErrorKind(ce.Err)
				}
				st.mu.Lock()
				st.disconnects[kind]++
				st.mu.Unlock()
			}
		case client.EventReset:
			m.resets++
			r.fail("reset", 0)
		}
	}
	if st.resetAt.Load() != 0 && !c.back.Load() {
		c.back.Store(true)
		st.failed.Add(1)
		r.fail("session-ended", 0)
	}
}

// closeSessions closes every session and waits for their consumers, at
// most d.
func closeSessions(cs []*stormClient, d time.Duration) {
	work := make(chan *stormClient)
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				c.m.closed.Store(true)
				if c.rj != nil {
					c.rj.close()
				} else {
					_ = c.sess.Close()
				}
			}
		}()
	}
	for _, c := range cs {
		work <- c
	}
	close(work)
	wg.Wait()
	timeout := time.After(d)
	for _, c := range cs {
		select {
		case <-c.m.done:
		case <-timeout:
			return
		}
	}
}

// sortedKeys is for stable output of the attempts histogram.
func sortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		a, ea := strconv.Atoi(ks[i])
		b, eb := strconv.Atoi(ks[j])
		if ea != nil || eb != nil {
			return ks[i] < ks[j]
		}
		return a < b
	})
	return ks
}

// drainTarget asks the target's server to drain (POST /admin/drain on its
// internal listener, API) and waits for its answer: it comes when its
// clients have gone.
func (s *Storm) drainTarget(ctx context.Context, o Options) error {
	base := cmp.Or(s.Admin, o.Target.API)
	if base == "" {
		return errors.New("bench: --cause drain posts /admin/drain to the server's internal listener: give its URL (--admin)")
	}
	u, err := url.Parse(strings.TrimSuffix(base, "/") + "/admin/drain")
	if err != nil {
		return err
	}
	u.RawQuery = "window=" + s.DrainWindow.String()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
	if err != nil {
		return err
	}
	if o.Target.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+o.Target.APIKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s", u, resp.Status)
	}
	return nil
}
