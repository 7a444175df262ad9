package bench

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// Cursors is W2's live cursors: Members clients in Rooms rooms (round-robin),
// the first Senders of them each moving a cursor, a signal with key
// "cursor:<user>", at Hz for Duration. It reports freshness: for each
// receiver and each sender key, the time from a send to the moment the
// receiver holds that value or a newer one (corral keeps only the latest
// value per key, so a value overtaken by a newer one is fresh when the newer
// one arrives). Beside the signals, a low-rate reliable publish stream in
// the same rooms (Rate messages/s) is checked: nothing may be lost.
type Cursors struct {
	Members     int
	Senders     int
	Hz          float64
	Rooms       int
	Duration    time.Duration
	Rate        float64
	Fresh       time.Duration
	ConnectRate float64
	AckTimeout  time.Duration
	SLO         time.Duration
}

// NewCursors returns W2's figures: one room of 200 members, 20 of them
// moving at 20 Hz for 20 s.
func NewCursors() *Cursors {
	return &Cursors{
		Members: 200, Senders: 20, Hz: 20, Rooms: 1, Duration: 20 * time.Second,
		Rate: 5, Fresh: 200 * time.Millisecond, ConnectRate: 1000,
		AckTimeout: 5 * time.Second, SLO: 500 * time.Millisecond,
	}
}

func (c *Cursors) Name() string { return "cursors" }

func (c *Cursors) Describe() string {
	return `W2 (seed 003): live cursors, ephemeral signals at a high rate.

W2's live cursors: --members clients in one room, --senders of them (members
too) each sending a Signal "cursor:<user>" at --hz. corral flushes signals per
room on a 33 ms tick, latest value per key. Freshness, per receiver and sender
key: from a send to the moment the receiver holds that value or a newer one.
Reports the share within --fresh (200 ms), p50/p99 freshness, signal
deliveries/s, server CPU (--pid), and a reliable publish stream at --rate in
the same room checked for loss. Targets on 2 cores: >= 99.9% within 200 ms at
20 and 40 senders, >= 99% at 100 and 200, nothing lost, server CPU <= 3 CPU-s
for the 20 s run at 20 senders (Centrifugo v6: 11-13).`
}

func (c *Cursors) Flags(fs *flag.FlagSet) {
	fs.IntVar(&c.Members, "members", c.Members, "WebSocket clients (all join and receive)")
	fs.IntVar(&c.Senders, "senders", c.Senders, "members that move a cursor")
	fs.Float64Var(&c.Hz, "hz", c.Hz, "cursor updates per `second` per sender")
	fs.IntVar(&c.Rooms, "rooms", c.Rooms, "rooms the members are spread over (round-robin)")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "how long the senders move")
	fs.Float64Var(&c.Rate, "rate", c.Rate, "reliable publishes per `second` beside the signals, over all rooms (0: none)")
	fs.DurationVar(&c.Fresh, "fresh", c.Fresh, "the freshness threshold reported as a share")
	fs.Float64Var(&c.ConnectRate, "connect-rate", c.ConnectRate, "new connections per `second` while setting up")
	fs.DurationVar(&c.AckTimeout, "ack-timeout", c.AckTimeout, "how long the reliable publisher waits for Published")
	fs.DurationVar(&c.SLO, "slo", c.SLO, "the reliable stream's step passes with p99 delivery within this, nothing lost")
}

func (c *Cursors) params() map[string]any {
	return map[string]any{
		"members": c.Members, "senders": c.Senders, "hz": c.Hz, "rooms": c.Rooms,
		"duration": c.Duration.String(), "rate": c.Rate, "fresh": c.Fresh.String(),
		"connect-rate": c.ConnectRate, "ack-timeout": c.AckTimeout.String(), "slo": c.SLO.String(),
	}
}

// cursorSender is one sender's sends: at[n-1] is the unix nanos of send n.
type cursorSender struct {
	m    *member
	key  string
	at   []atomic.Int64
	sent atomic.Int64
}

// freshState is what the receivers share.
type freshState struct {
	bySender  atomic.Pointer[map[string]int] // key -> sender index
	senders   []*cursorSender
	threshold time.Duration
	hist      histogram
	within    atomic.Uint64
	delivered atomic.Uint64
}

// receive is called by m's consumer for a SignalEvent.
func (s *freshState) receive(m *member, ev *corralv1.SignalEvent, now time.Time) {
	idx, ok := (*s.bySender.Load())[ev.GetKey()]
	if !ok || s.senders[idx].m == m || ev.GetClear() {
		return
	}
	s.delivered.Add(1)
	n, ok := counterOf(ev.GetPayload())
	if !ok || m.held == nil || n <= m.held[idx] {
		return
	}
	snd := s.senders[idx]
	for k := m.held[idx] + 1; k <= n && k <= int64(len(snd.at)); k++ {
		d := time.Duration(now.UnixNano() - snd.at[k-1].Load())
		s.hist.observe(d)
		if d <= s.threshold {
			s.within.Add(1)
		}
	}
	m.held[idx] = n
}

// counterOf reads "n":<int> from a cursor payload.
func counterOf(p []byte) (int64, bool) {
	i := bytes.Index(p, []byte(`"n":`))
	if i < 0 {
		return 0, false
	}
	p = bytes.TrimLeft(p[i+4:], " ")
	j := 0
	for j < len(p) && p[j] >= '0' && p[j] <= '9' {
		j++
	}
	n, err := strconv.ParseInt(string(p[:j]), 10, 64)
	return n, err == nil
}

func cursorPayload(buf []byte, n int64, at time.Time) []byte {
	buf = append(buf[:0], `{"x":`...)
	buf = strconv.AppendInt(buf, (n*37)%1920, 10)
	buf = append(buf, `,"y":`...)
	buf = strconv.AppendInt(buf, (n*53)%1080, 10)
	buf = append(buf, `,"t":`...)
	buf = strconv.AppendInt(buf, at.UnixNano(), 10)
	buf = append(buf, `,"n":`...)
	buf = strconv.AppendInt(buf, n, 10)
	return append(buf, '}')
}

func (c *Cursors) Run(ctx context.Context, o Options) (*Result, error) {
	o = o.withDefaults()
	if c.Members <= 0 || c.Rooms <= 0 || c.Senders <= 0 || c.Hz <= 0 || c.Duration <= 0 || c.ConnectRate <= 0 {
		return nil, errors.New("bench: cursors needs positive --members, --senders, --hz, --rooms, --duration and --connect-rate")
	}
	if c.Senders > c.Members {
		return nil, errors.New("bench: cursors: --senders must not exceed --members (every sender is a member)")
	}
	restore, err := prepare(ctx, o, c.Members, false)
	if err != nil {
		return nil, err
	}
	defer restore()
	setup := time.Duration(float64(c.Members)/c.ConnectRate*float64(time.Second)) + 30*time.Second
	horizon := setup + c.Duration + c.AckTimeout + o.Drain + 2*time.Minute
	ctx, cancel := context.WithTimeout(ctx, horizon)
	defer cancel()

	r := newRun(c.Name(), o, horizon)
	f := newFleet(r, roomNamer(runID(), c.Rooms))
	fs := &freshState{threshold: c.Fresh}
	empty := map[string]int{}
	fs.bySender.Store(&empty)
	f.signal = fs.receive
	r.startTicker(ctx)
	defer r.stopTicker()

	r.setPhase("connecting")
	// Members are pinged from their dial on: a fleet that dials for
	// longer than two heartbeats would lose its first members to the
	// server's silence timeout (4003) while the last still dial.
	kctx, stopKeep := context.WithCancel(ctx)
	defer stopKeep()
	go f.keepAlive(kctx)
	joined := f.connect(ctx, c.Members, steady(c.ConnectRate, setup), 256)
	if joined == 0 {
		f.closeAll(10 * time.Second)
		return nil, fmt.Errorf("bench: no client could connect to %s: %v", o.Target.WS, r.errors())
	}
	members := f.all()
	nsend := min(c.Senders, len(members))
	perSender := int(c.Hz*c.Duration.Seconds()) + 2
	by := make(map[string]int, nsend)
	for i := range nsend {
		m := members[i]
		s := &cursorSender{m: m, key: "cursor:" + m.name, at: make([]atomic.Int64, perSender)}
		fs.senders = append(fs.senders, s)
		by[s.key] = i
	}
	for _, m := range members {
		m.held = make([]int64, nsend) // before any signal: nobody sends yet
	}
	fs.bySender.Store(&by)

	// The reliable stream: one publisher per room, the last members.
	var pubs []*member
	seen := map[string]bool{}
	for i := len(members) - 1; i >= 0 && len(pubs) < c.Rooms; i-- {
		if !seen[members[i].room] {
			seen[members[i].room] = true
			pubs = append(pubs, members[i])
		}
	}
	var steps []Step
	var p profile
	if c.Rate > 0 {
		steps, p = rateSteps(c.Rate, c.Duration, nil, 0, "publishes/s")
	}

	start := time.Now().Add(100 * time.Millisecond)
	r.steps = stepRecs(steps, start)
	r.markWindow(ctx)
	r.setPhase("moving")
	period := time.Duration(float64(time.Second) / c.Hz)
	end := start.Add(c.Duration)
	var wg sync.WaitGroup
	for i, s := range fs.senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.move(ctx, r, s, start.Add(period*time.Duration(i)/time.Duration(nsend)), end, period)
		}()
	}
	if c.Rate > 0 {
		clientPublish(ctx, r, r.ledger, pubs, start, p, 100, c.AckTimeout)
	}
	wg.Wait()
	window := time.Since(start)
	// Let the last flushes arrive before the freshness is closed.
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
	}
	res, err := r.conclude(ctx, f, c.params(), stopKeep, c.SLO, func(*Result, *Step) {})
	fr := &Freshness{SLOMs: ms(c.Fresh), Deliveries: fs.delivered.Load()}
	fr.DeliveriesPerSec = float64(fr.Deliveries) / window.Seconds()
	for _, s := range fs.senders {
		fr.Sent += uint64(s.sent.Load())
	}
	for _, m := range f.all() {
		if !isDone(m.done) || m.held == nil {
			continue
		}
		for i, s := range fs.senders {
			if s.m == m || s.m.room != m.room {
				continue
			}
			if left := s.sent.Load() - m.held[i]; left > 0 {
				fr.Never += uint64(left)
			}
		}
	}
	fr.Latency = fs.hist.summary()
	fr.Samples = fr.Latency.Count + fr.Never
	fr.Within = fs.within.Load()
	if fr.Samples > 0 {
		fr.Share = float64(fr.Within) / float64(fr.Samples)
	}
	res.Freshness = fr
	cpu := ""
	if res.Server != nil {
		cpu = fmt.Sprintf(", server %.2f CPU-s", res.Server.CPUSeconds)
	}
	res.Headline = fmt.Sprintf("cursors: %d members in %d rooms, %d senders at %g Hz: %.3f%% fresh within %v, p50 %.1f ms, p99 %.1f ms, %.0f signal deliveries/s; reliable stream lost %d%s",
		len(members), c.Rooms, nsend, c.Hz, 100*fr.Share, c.Fresh, fr.Latency.P50, fr.Latency.P99, fr.DeliveriesPerSec, res.Delivery.Lost, cpu)
	return res, err
}

// move sends s's cursor every period from first until end.
func (c *Cursors) move(ctx context.Context, r *run, s *cursorSender, first, end time.Time, period time.Duration) {
	var buf []byte
	for at := first; at.Before(end); at = at.Add(period) {
		if d := time.Until(at); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return
			}
		}
		n := s.sent.Load() + 1
		if n > int64(len(s.at)) {
			return
		}
		now := time.Now()
		s.at[n-1].Store(now.UnixNano())
		s.sent.Store(n)
		buf = cursorPayload(buf, n, now)
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := s.m.conn.Send(sctx, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Signal{Signal: &corralv1.Signal{
			Room: s.m.room, Key: s.key, Payload: append([]byte(nil), buf...),
		}}})
		cancel()
		if err != nil {
			r.fail("signal:"+strings.TrimPrefix(dialErrorKind(err), "signal:"), 0)
			if ctx.Err() != nil {
				return
			}
		}
	}
}
