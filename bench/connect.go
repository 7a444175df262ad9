package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/corral-rt/corral/internal/retry"
)

// Connect is W3's connection load: Rate new connections per second (each
// dial, hello and join timed from the start of the dial to Joined) until
// Sockets are connected; then they stay idle for Hold and the server's
// memory per connection is read; then Probes messages per room check that
// every connection still receives.
type Connect struct {
	Sockets  int
	Rooms    int
	Rate     float64
	Inflight int
	Hold     time.Duration
	Probes   int
	SLO      time.Duration
	// Slowloris half-open connections are held against the server while
	// the honest ones connect (see slowloris.go). 0: none.
	Slowloris int
	// Presence: members join with presence; the result counts their
	// presence frames and bytes.
	Presence bool
}

// NewConnect returns W3's rate, 1,000 new connections/s, up to 15,000
// connections (the seed reached 100,000 on two 4-vCPU tasks; one process
// here holds at most 20,000 open files).
func NewConnect() *Connect {
	return &Connect{
		Sockets: 15000, Rooms: 100, Rate: 1000, Inflight: 1024,
		Hold: 10 * time.Second, Probes: 3, SLO: 100 * time.Millisecond,
	}
}

func (c *Connect) Name() string { return "connect" }

func (c *Connect) Describe() string {
	return `W3 (seed 002): new connections per second, then memory per idle connection.

W3's connection load (seed 002): new connections per second, each timed from
the start of the dial to Joined (TCP, WebSocket upgrade, hello, welcome,
join); then N idle connections held, and the server's memory per connection
((RSS after - RSS before) / N; give --pid for /proc, else its /metrics). The
seed: 1,000 connections/s, p95 100 ms. corral's target: >= 5,000/s at p95
<= 50 ms, <= 14 KiB per idle connection at 15,000.`
}

func (c *Connect) Flags(fs *flag.FlagSet) {
	fs.IntVar(&c.Sockets, "sockets", c.Sockets, "connections to open and hold")
	fs.IntVar(&c.Rooms, "rooms", c.Rooms, "rooms the connections join (round-robin)")
	fs.Float64Var(&c.Rate, "rate", c.Rate, "new connections per `second`")
	fs.IntVar(&c.Inflight, "inflight", c.Inflight, "dials in progress at most")
	fs.DurationVar(&c.Hold, "hold", c.Hold, "how long the connections stay idle before memory is read")
	fs.IntVar(&c.Probes, "probes", c.Probes, "messages published to each room after the hold, to check delivery (through --api when given, else by a member)")
	fs.IntVar(&c.Slowloris, "slowloris", c.Slowloris, "hold `N` half-open connections (half dribbling HTTP headers, half upgraded and silent, re-opened when cut) while the honest ones connect")
	fs.BoolVar(&c.Presence, "presence", c.Presence, "join with presence and count the presence frames and bytes each member reads")
	fs.DurationVar(&c.SLO, "slo", c.SLO, "the run passes with p95 connect-to-joined within this and no failed connection")
}

func (c *Connect) params() map[string]any {
	return map[string]any{
		"sockets": c.Sockets, "rooms": c.Rooms, "rate": c.Rate, "inflight": c.Inflight,
		"hold": c.Hold.String(), "probes": c.Probes, "slo": c.SLO.String(), "slowloris": c.Slowloris, "presence": c.Presence,
	}
}

func (c *Connect) Run(ctx context.Context, o Options) (*Result, error) {
	o = o.withDefaults()
	if c.Sockets <= 0 || c.Rooms <= 0 || c.Rate <= 0 {
		return nil, errors.New("bench: connect needs positive --sockets, --rooms and --rate")
	}
	restore, err := prepare(ctx, o, c.Sockets+c.Slowloris, false)
	if err != nil {
		return nil, err
	}
	defer restore()
	dialing := time.Duration(float64(c.Sockets)/c.Rate*float64(time.Second)) + time.Second
	horizon := 2*dialing + c.Hold + o.Drain + 2*time.Minute
	ctx, cancel := context.WithTimeout(ctx, horizon)
	defer cancel()

	r := newRun(c.Name(), o, horizon)
	rooms := roomNamer(runID(), c.Rooms)
	f := newFleet(r, rooms)
	if c.Presence {
		f.presence = new(presenceTally)
	}
	// Connections per second are this scenario's deliveries: the step's
	// window is the dialing time at the target rate.
	start := time.Now().Add(100 * time.Millisecond)
	r.steps = stepRecs([]Step{{Name: fmt.Sprintf("%g connections/s", c.Rate), Rate: c.Rate, Unit: "connections/s",
		Seconds: float64(c.Sockets) / c.Rate}}, start)
	r.startTicker(ctx)
	defer r.stopTicker()
	r.markWindow(ctx)
	a := r.winSrv

	var loris *slowloris
	if c.Slowloris > 0 {
		lctx, stopLoris := context.WithCancel(ctx)
		loris, err = holdSlowloris(lctx, o.Target.WS, c.Slowloris)
		if err != nil {
			stopLoris()
			return nil, err
		}
		defer func() {
			stopLoris()
			loris.wait()
		}()
	}
	r.setPhase("connecting")
	retry.Sleep(ctx, time.Until(start))
	t0 := time.Now()
	// Members are pinged from their dial on: a fleet that dials for
	// longer than two heartbeats would lose its first members to the
	// server's silence timeout (4003) while the last still dial.
	kctx, stopKeep := context.WithCancel(ctx)
	defer stopKeep()
	go f.keepAlive(kctx)
	joined := f.connect(ctx, c.Sockets, steady(c.Rate, dialing), c.Inflight)
	took := time.Since(t0)

	r.setPhase(fmt.Sprintf("holding %d idle", joined))
	retry.Sleep(ctx, c.Hold)
	held, heldErr := r.cost.sample(ctx)
	srv, gen := r.endWindow(ctx)
	machine := r.machineWindow()

	// Probes: a few messages per room, checked like any delivery.
	r.setPhase("probing")
	pstart := time.Now()
	probes := steady(float64(c.Rooms*c.Probes)/2, 2*time.Second)
	r.steps = append(r.steps, &stepRec{name: "probes", unit: "publishes/s", rate: probes[0].from,
		from: pstart.UnixNano(), to: pstart.Add(probes.duration()).UnixNano()})
	if o.Target.API != "" {
		apiPublish(ctx, r, apiClient(o.Target), r.ledger, rooms, pstart, probes, 16, 100, 5*time.Second)
	} else {
		clientPublish(ctx, r, r.ledger, firstPerRoom(f, c.Rooms), pstart, probes, 100, 5*time.Second)
	}
	res, err := r.conclude(ctx, f, c.params(), stopKeep, 0, func(*Result, *Step) {})
	if res == nil {
		return nil, err
	}
	// The connect figures replace the delivery ones at the top.
	cs := res.Connect
	cs.Rate = c.Rate
	cs.Achieved = float64(joined) / took.Seconds()
	res.Latency, res.Histogram = cs.Latency, f.connLat.buckets()
	res.SLOMs = ms(c.SLO)
	conn := &res.Steps[0]
	conn.Achieved, conn.Latency, conn.Seconds = cs.Achieved, cs.Latency, took.Seconds()
	conn.OK = cs.Failed == 0 && cs.Latency.P95 <= ms(c.SLO)
	res.Best = -1
	if conn.OK {
		res.Best = 0
	}
	if o.InProcess {
		gen = nil // the server's figure is this whole process
	}
	res.Server, res.Generator, res.MachineCPU = srv, gen, machine
	if srv != nil && heldErr == nil && a.rss > 0 {
		srv.RSSPeak = max(srv.RSSPeak, peakRSS(res.Timeline))
		if joined > 0 {
			res.Server.PerConn = uint64(max(int64(held.rss)-int64(a.rss), 0)) / uint64(joined)
			if held.heap > 0 && a.heap > 0 {
				res.Server.HeapPerConn = uint64(max(int64(held.heap)-int64(a.heap), 0)) / uint64(joined)
			}
		}
	}
	res.Headline = fmt.Sprintf("connect: %d of %d joined at %.0f/s (target %g/s), connect-to-joined p50 %.1f ms, p95 %.1f ms, p99 %.1f ms",
		joined, c.Sockets, cs.Achieved, c.Rate, cs.Latency.P50, cs.Latency.P95, cs.Latency.P99)
	if loris != nil {
		res.Headline += fmt.Sprintf("; meanwhile %d half-open connections held (%d opened, %d cut by the server)",
			c.Slowloris, loris.opened.Load(), loris.cut.Load())
	}
	if res.Server != nil {
		res.Headline += fmt.Sprintf("; server memory %.1f KiB per idle connection", float64(res.Server.PerConn)/1024)
	}
	if f.presence != nil {
		res.Presence = f.presence.stats()
		res.Headline += res.Presence.headline()
	}
	return res, err
}

// firstPerRoom returns one member of each of the first rooms rooms.
func firstPerRoom(f *fleet, rooms int) []*member {
	seen := make(map[string]bool)
	var out []*member
	for _, m := range f.all() {
		if !seen[m.room] && len(out) < rooms {
			seen[m.room] = true
			out = append(out, m)
		}
	}
	return out
}
