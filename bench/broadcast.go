package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"
)

// Broadcast is W3's broadcast API: Sockets clients spread over Rooms rooms,
// and an application backend publishing through the internal Connect API
// at Rate publishes per second (each one reaches every member of its room,
// so deliveries/s = Rate x Sockets/Rooms). With Ramp, the rate steps up
// through the listed values, Step each, and the result names the highest
// step with p99 within SLO and nothing lost.
type Broadcast struct {
	Sockets     int
	Rooms       int
	Rate        float64
	Ramp        []float64
	Duration    time.Duration
	Step        time.Duration
	Size        int
	Publishers  int
	ConnectRate float64
	Timeout     time.Duration
	SLO         time.Duration
}

// NewBroadcast returns W3's figures: 15,000 sockets in 100 rooms and 200
// publishes/s, that is the seed's 30,000 deliveries/s.
func NewBroadcast() *Broadcast {
	return &Broadcast{
		Sockets: 15000, Rooms: 100, Rate: 200,
		Duration: 30 * time.Second, Step: 10 * time.Second,
		Size: 100, Publishers: 32, ConnectRate: 2000,
		Timeout: 5 * time.Second, SLO: 500 * time.Millisecond,
	}
}

func (b *Broadcast) Name() string { return "broadcast" }

func (b *Broadcast) Describe() string {
	return `W3 (seed 002): server-side publishes fanned out to N sockets over R rooms.

W3's broadcast API (seed 002): N WebSocket clients over R rooms; a backend
publishes server-side through the internal RoomService API (--api) at a rate,
and every member of the room receives each message. Deliveries/s = rate x
members per room. The seed: 15,000 sockets, 30,000 messages/s, p99 399 ms on
16 vCPU. corral's target on 2 cores: >= 110,000 deliveries/s at p99 <= 250 ms,
nothing lost. --ramp 400,600,800 steps the rate and reports the highest step
within --slo.`
}

func (b *Broadcast) Flags(fs *flag.FlagSet) {
	fs.IntVar(&b.Sockets, "sockets", b.Sockets, "WebSocket clients")
	fs.IntVar(&b.Rooms, "rooms", b.Rooms, "rooms the clients are spread over (round-robin)")
	fs.Float64Var(&b.Rate, "rate", b.Rate, "server-side publishes per `second`, over all rooms")
	fs.Var((*rateList)(&b.Ramp), "ramp", "step the rate through these publishes/s `r1,r2,...` (overrides --rate and --duration)")
	fs.DurationVar(&b.Duration, "duration", b.Duration, "how long to publish at --rate")
	fs.DurationVar(&b.Step, "step", b.Step, "how long each --ramp step lasts")
	fs.IntVar(&b.Size, "size", b.Size, "payload `bytes`")
	fs.IntVar(&b.Publishers, "publishers", b.Publishers, "publish RPCs in flight at most")
	fs.Float64Var(&b.ConnectRate, "connect-rate", b.ConnectRate, "new connections per `second` while setting up")
	fs.DurationVar(&b.Timeout, "publish-timeout", b.Timeout, "deadline of one publish RPC")
	fs.DurationVar(&b.SLO, "slo", b.SLO, "a step passes with p99 delivery latency within this, nothing lost and no errors")
}

func (b *Broadcast) params() map[string]any {
	return map[string]any{
		"sockets": b.Sockets, "rooms": b.Rooms, "rate": b.Rate, "ramp": (*rateList)(&b.Ramp).String(),
		"duration": b.Duration.String(), "step": b.Step.String(), "size": b.Size,
		"publishers": b.Publishers, "connect-rate": b.ConnectRate,
		"publish-timeout": b.Timeout.String(), "slo": b.SLO.String(),
	}
}

func (b *Broadcast) Run(ctx context.Context, o Options) (*Result, error) {
	o = o.withDefaults()
	if b.Sockets <= 0 || b.Rooms <= 0 || b.ConnectRate <= 0 || (b.Rate <= 0 && len(b.Ramp) == 0) {
		return nil, errors.New("bench: broadcast needs positive --sockets, --rooms, --connect-rate and --rate")
	}
	restore, err := prepare(ctx, o, b.Sockets, true)
	if err != nil {
		return nil, err
	}
	defer restore()
	steps, p := rateSteps(b.Rate, b.Duration, b.Ramp, b.Step, "publishes/s")
	setup := time.Duration(float64(b.Sockets)/b.ConnectRate*float64(time.Second)) + 30*time.Second
	horizon := setup + p.duration() + o.Drain + 2*time.Minute
	ctx, cancel := context.WithTimeout(ctx, horizon)
	defer cancel()

	r := newRun(b.Name(), o, horizon)
	rooms := roomNamer(runID(), b.Rooms)
	f := newFleet(r, rooms)
	r.startTicker(ctx)
	defer r.stopTicker()

	r.setPhase("connecting")
	// Members are pinged from their dial on: a fleet that dials for
	// longer than two heartbeats would lose its first members to the
	// server's silence timeout (4003) while the last still dial.
	kctx, stopKeep := context.WithCancel(ctx)
	defer stopKeep()
	go f.keepAlive(kctx)
	joined := f.connect(ctx, b.Sockets, steady(b.ConnectRate, setup), 1024)
	if joined == 0 {
		f.closeAll(10 * time.Second)
		return nil, fmt.Errorf("bench: no client could connect to %s: %v", o.Target.WS, r.errors())
	}

	start := time.Now().Add(100 * time.Millisecond)
	r.steps = stepRecs(steps, start)
	r.markWindow(ctx)
	r.setPhase("publishing")
	apiPublish(ctx, r, apiClient(o.Target), r.ledger, rooms, start, p, b.Publishers, b.Size, b.Timeout)
	return r.conclude(ctx, f, b.params(), stopKeep, b.SLO, func(res *Result, best *Step) {
		per := float64(joined) / float64(b.Rooms)
		if best == nil {
			res.Headline = fmt.Sprintf("broadcast to %d sockets in %d rooms: no step within p99 %v with nothing lost", joined, b.Rooms, b.SLO)
			return
		}
		res.Headline = fmt.Sprintf("broadcast to %d sockets in %d rooms (%.0f per room): %.0f publishes/s -> %.0f deliveries/s, p50 %.1f ms, p99 %.1f ms, lost %d",
			joined, b.Rooms, per, best.Achieved, best.DeliveriesPerSec, best.Latency.P50, best.Latency.P99, best.Lost)
	})
}

// rateSteps turns a rate and duration, or a ramp of rates, into steps and
// the profile that paces them.
func rateSteps(rate float64, d time.Duration, ramp []float64, step time.Duration, unit string) ([]Step, profile) {
	if len(ramp) == 0 {
		ramp, step = []float64{rate}, d
	}
	var steps []Step
	var p profile
	for _, r := range ramp {
		steps = append(steps, Step{Name: fmt.Sprintf("%g %s", r, unit), Rate: r, Unit: unit, Seconds: step.Seconds()})
		p = append(p, segment{step, r, r})
	}
	return steps, p
}

// stepRecs lays the steps end to end from start.
func stepRecs(steps []Step, start time.Time) []*stepRec {
	out := make([]*stepRec, len(steps))
	t := start.UnixNano()
	for i, s := range steps {
		d := int64(s.Seconds * float64(time.Second))
		out[i] = &stepRec{name: s.Name, rate: s.Rate, unit: s.Unit, from: t, to: t + d}
		t += d
	}
	return out
}
