package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"
)

// ChatBurst is W4's burst of chat posts: Senders of the Sockets clients
// publish reliable messages (each waits for its Published) at a rate that
// ramps from 0 to Rate over RampUp and then holds for Duration; or, with
// Ramp, steps through the listed rates, Step each. It reports
// acknowledgement latency, delivery latency to the room, and errors by
// kind.
type ChatBurst struct {
	Sockets     int
	Rooms       int
	Senders     int
	Rate        float64
	RampUp      time.Duration
	Duration    time.Duration
	Ramp        []float64
	Step        time.Duration
	Size        int
	AckTimeout  time.Duration
	ConnectRate float64
	SLO         time.Duration
	// Hooks serves a counting hooks backend (--hooks-listen).
	Hooks HooksOptions

	name, describe string // set for busy-room, which is a preset of chat-burst
}

// NewChatBurst returns W4's figures: the 15% of a 6,000-member chat who
// post in a burst (900 senders), a target of 200 posts/s reached over 10 s.
// The 900 are spread over 9 rooms of 100, so that the run measures the
// write path; --sockets 6000 --rooms 1 --senders 900 is the seed's single
// room, and then a broadcast test (200/s x 6,000 = 1.2 million deliveries/s).
func NewChatBurst() *ChatBurst {
	return &ChatBurst{
		Sockets: 900, Rooms: 9, Rate: 200,
		RampUp: 10 * time.Second, Duration: 20 * time.Second, Step: 10 * time.Second,
		Size: 100, AckTimeout: 5 * time.Second, ConnectRate: 2000,
		SLO: 500 * time.Millisecond,
	}
}

func (c *ChatBurst) Name() string {
	if c.name != "" {
		return c.name
	}
	return "chat-burst"
}

func (c *ChatBurst) Describe() string {
	if c.describe != "" {
		return c.describe
	}
	return `W4 (seed 004): a burst of persisted chat posts from WebSocket clients.

W4's burst of chat posts (seed 004): clients publish reliable messages over
WebSocket, each waiting for the server's Published (the message is in the
room's history), at a rate ramping from 0 to --rate over --ramp-up, then
holding for --duration. Reports acknowledgement latency (publish scheduled to
Published), delivery latency to the room, and errors by kind. The seed: 147
posts/s peak on 2 vCPU, p95/p99 30 ms, 3.51% errors, against a target of
~180/s. --ramp 200,1000,5000 steps far beyond.`
}

func (c *ChatBurst) Flags(fs *flag.FlagSet) {
	fs.IntVar(&c.Sockets, "sockets", c.Sockets, "WebSocket clients (all join; --senders of them post)")
	fs.IntVar(&c.Rooms, "rooms", c.Rooms, "rooms the clients are spread over (round-robin)")
	fs.IntVar(&c.Senders, "senders", c.Senders, "clients that post (0: all)")
	fs.Float64Var(&c.Rate, "rate", c.Rate, "target posts per `second`, over all senders")
	fs.DurationVar(&c.RampUp, "ramp-up", c.RampUp, "time to ramp from 0 to --rate")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "time to hold --rate after the ramp-up")
	fs.Var((*rateList)(&c.Ramp), "ramp", "step through these posts/s `r1,r2,...` instead (overrides --rate, --ramp-up, --duration)")
	fs.DurationVar(&c.Step, "step", c.Step, "how long each --ramp step lasts")
	fs.IntVar(&c.Size, "size", c.Size, "payload `bytes`")
	fs.DurationVar(&c.AckTimeout, "ack-timeout", c.AckTimeout, "how long a sender waits for Published")
	fs.Float64Var(&c.ConnectRate, "connect-rate", c.ConnectRate, "new connections per `second` while setting up")
	fs.DurationVar(&c.SLO, "slo", c.SLO, "a step passes with p99 of acks and deliveries within this, nothing lost and no errors")
	c.Hooks.flags(fs)
}

func (c *ChatBurst) params() map[string]any {
	return c.Hooks.params(map[string]any{
		"sockets": c.Sockets, "rooms": c.Rooms, "senders": c.Senders, "rate": c.Rate,
		"ramp-up": c.RampUp.String(), "duration": c.Duration.String(),
		"ramp": (*rateList)(&c.Ramp).String(), "step": c.Step.String(), "size": c.Size,
		"ack-timeout": c.AckTimeout.String(), "connect-rate": c.ConnectRate, "slo": c.SLO.String(),
	})
}

func (c *ChatBurst) Run(ctx context.Context, o Options) (*Result, error) {
	o = o.withDefaults()
	if c.Sockets <= 0 || c.Rooms <= 0 || c.ConnectRate <= 0 || (c.Rate <= 0 && len(c.Ramp) == 0) {
		return nil, errors.New("bench: chat-burst needs positive --sockets, --rooms, --connect-rate and --rate")
	}
	restore, err := prepare(ctx, o, c.Sockets, false)
	if err != nil {
		return nil, err
	}
	defer restore()
	hctx, stopHooks := context.WithCancel(ctx)
	defer stopHooks()
	hooks, err := c.Hooks.start(hctx)
	if err != nil {
		return nil, err
	}
	var steps []Step
	var p profile
	if len(c.Ramp) > 0 {
		steps, p = rateSteps(0, 0, c.Ramp, c.Step, "posts/s")
	} else {
		if c.RampUp > 0 {
			steps = append(steps, Step{Name: fmt.Sprintf("ramp 0 -> %g posts/s", c.Rate), Rate: c.Rate / 2, Unit: "posts/s", Seconds: c.RampUp.Seconds()})
			p = append(p, segment{c.RampUp, 0, c.Rate})
		}
		steps = append(steps, Step{Name: fmt.Sprintf("%g posts/s", c.Rate), Rate: c.Rate, Unit: "posts/s", Seconds: c.Duration.Seconds()})
		p = append(p, segment{c.Duration, c.Rate, c.Rate})
	}
	setup := time.Duration(float64(c.Sockets)/c.ConnectRate*float64(time.Second)) + 30*time.Second
	horizon := setup + p.duration() + c.AckTimeout + o.Drain + 2*time.Minute
	ctx, cancel := context.WithTimeout(ctx, horizon)
	defer cancel()

	r := newRun(c.Name(), o, horizon)
	f := newFleet(r, roomNamer(runID(), c.Rooms))
	r.startTicker(ctx)
	defer r.stopTicker()

	r.setPhase("connecting")
	// Members are pinged from their dial on: a fleet that dials for
	// longer than two heartbeats would lose its first members to the
	// server's silence timeout (4003) while the last still dial.
	kctx, stopKeep := context.WithCancel(ctx)
	defer stopKeep()
	go f.keepAlive(kctx)
	joined := f.connect(ctx, c.Sockets, steady(c.ConnectRate, setup), 1024)
	if joined == 0 {
		f.closeAll(10 * time.Second)
		return nil, fmt.Errorf("bench: no client could connect to %s: %v", o.Target.WS, r.errors())
	}
	senders := f.all()
	if c.Senders > 0 && c.Senders < len(senders) {
		senders = senders[:c.Senders]
	}

	start := time.Now().Add(100 * time.Millisecond)
	r.steps = stepRecs(steps, start)
	r.markWindow(ctx)
	r.setPhase("posting")
	clientPublish(ctx, r, r.ledger, senders, start, p, c.Size, c.AckTimeout)
	return r.conclude(ctx, f, c.params(), stopKeep, c.SLO, func(res *Result, best *Step) {
		if hooks != nil {
			h := &HooksStats{LatencyMs: ms(hooks.Latency), Total: hooks.Counts()}
			h.Window = h.Total
			if n := res.Delivery.Published; n > 0 {
				h.PublishPerPost = float64(h.Total.Publish) / float64(n)
			}
			res.Hooks = h
		}
		if best == nil {
			res.Headline = fmt.Sprintf("chat-burst from %d senders in %d rooms: no step within p99 %v with nothing lost and no errors (errors: %d)",
				len(senders), c.Rooms, c.SLO, res.Errors.total())
			return
		}
		var acks Latency
		if best.Acks != nil {
			acks = *best.Acks
		}
		res.Headline = fmt.Sprintf("chat-burst from %d senders in %d rooms: %.0f posts/s acknowledged, ack p95 %.1f ms, p99 %.1f ms; delivery p99 %.1f ms; %d errors",
			len(senders), c.Rooms, best.Achieved, acks.P95, acks.P99, best.Latency.P99, res.Errors.total())
	})
}
