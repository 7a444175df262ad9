package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// run is the state one scenario run shares between its parts: the clock,
// the latency histograms, the per-second timeline, errors by kind and the
// server-cost sampler.
type run struct {
	o     Options
	name  string
	start time.Time
	cost  *costSampler

	// ledger holds the acknowledged publishes.
	ledger *ledger

	// The measured window starts at markWindow: the server's and this
	// generator's cost at that moment.
	winSrv    costSample
	winSrvOK  bool
	winGen    costSample
	winGenOK  bool
	winMach   float64
	winMachAt time.Time

	lat   histogram // every delivery
	acks  histogram // every acknowledged publish, from its scheduled time
	conns atomic.Int64
	phase atomic.Pointer[string]

	// secs is the timeline; slots are allocated on first use and the run
	// records nothing past the horizon.
	secs []atomic.Pointer[second]

	// steps are fixed before the first publish.
	steps []*stepRec

	errMu sync.Mutex // guards the following field
	errs  ErrorCounts

	tickDone chan struct{}
	tickStop context.CancelFunc
}

// second is one slot of the timeline. Conns, CPU and RSS are written by the
// ticker only, and read after it has stopped.
type second struct {
	deliveries atomic.Uint64
	sent       atomic.Uint64
	errors     atomic.Uint64
	lat        histogram
	conns      int64
	cpu        float64
	rss        uint64
	genCPU     float64
	machineCPU float64
}

// stepRec is one measured window; deliveries belong to the step in which
// their message was scheduled.
type stepRec struct {
	name       string
	rate       float64
	unit       string
	from, to   int64 // unix nanos, scheduled times
	lat        histogram
	acks       histogram
	sent       atomic.Uint64
	acked      atomic.Uint64
	deliveries atomic.Uint64
	// lastDone is the latest unix nanos at which one of the step's
	// messages was delivered or acknowledged: rates are counted up to it.
	lastDone   atomic.Int64
	lost, dups uint64 // set by the check

	errMu sync.Mutex // guards the following field
	errs  ErrorCounts
}

func newRun(name string, o Options, horizon time.Duration) *run {
	n := int(horizon/time.Second) + 2
	r := &run{
		o:      o,
		name:   name,
		start:  time.Now(),
		secs:   make([]atomic.Pointer[second], n),
		errs:   make(ErrorCounts),
		cost:   newCostSampler(o.Target),
		ledger: newLedger(),
	}
	r.setPhase("starting")
	return r
}

func (r *run) setPhase(p string) { r.phase.Store(&p) }

func (r *run) slot(t time.Time) *second {
	i := int(t.Sub(r.start) / time.Second)
	if i < 0 || i >= len(r.secs) {
		return nil
	}
	if s := r.secs[i].Load(); s != nil {
		return s
	}
	r.secs[i].CompareAndSwap(nil, new(second))
	return r.secs[i].Load()
}

// stepOf returns the step whose window holds the scheduled time t, or nil.
func (r *run) stepOf(t int64) *stepRec {
	for i := len(r.steps) - 1; i >= 0; i-- {
		s := r.steps[i]
		if t >= s.from {
			if t < s.to {
				return s
			}
			return nil
		}
	}
	return nil
}

// delivered records one message read by a member: sent is its scheduled
// time (unix nanos), now when it was read.
func (r *run) delivered(sent int64, now time.Time) {
	d := time.Duration(now.UnixNano() - sent)
	r.lat.observe(d)
	if s := r.slot(now); s != nil {
		s.deliveries.Add(1)
		s.lat.observe(d)
	}
	if st := r.stepOf(sent); st != nil {
		st.deliveries.Add(1)
		st.lat.observe(d)
		st.done(now.UnixNano())
	}
}

// sentOne records one publish (or dial) scheduled at time at leaving now.
func (r *run) sentOne(at time.Time) {
	if s := r.slot(time.Now()); s != nil {
		s.sent.Add(1)
	}
	if st := r.stepOf(at.UnixNano()); st != nil {
		st.sent.Add(1)
	}
}

// markWindow starts the measured window: the server's and the generator's
// cost are taken now.
func (r *run) markWindow(ctx context.Context) {
	var err error
	r.winSrv, err = r.cost.sample(ctx)
	r.winSrvOK = err == nil
	r.winGen, err = procSample(os.Getpid())
	r.winGenOK = err == nil
	r.winMach, r.winMachAt, _ = machineSample()
}

// machineWindow is the machine's busy CPU since markWindow, in percent of
// one core, or 0 when unknown.
func (r *run) machineWindow() float64 {
	m, at, err := machineSample()
	if err != nil || r.winMachAt.IsZero() || !at.After(r.winMachAt) {
		return 0
	}
	return 100 * (m - r.winMach) / at.Sub(r.winMachAt).Seconds()
}

// endWindow ends the measured window and returns what the server and the
// generator spent in it (nil when not known).
func (r *run) endWindow(ctx context.Context) (srv, gen *Cost) {
	if b, err := r.cost.sample(ctx); err == nil && r.winSrvOK {
		srv = r.cost.window(r.winSrv, b, 0)
	}
	if b, err := procSample(os.Getpid()); err == nil && r.winGenOK {
		gen = (&costSampler{pid: os.Getpid()}).window(r.winGen, b, 0)
		gen.Source = "this process"
	}
	return srv, gen
}

// acked records a publish acknowledged d after it was scheduled, in step
// st (may be nil).
func (r *run) acked(st *stepRec, d time.Duration) {
	r.acks.observe(d)
	if st != nil {
		st.acked.Add(1)
		st.acks.observe(d)
		st.done(time.Now().UnixNano())
	}
}

// fail counts one error of kind; at (unix nanos, 0: now) picks the step.
func (r *run) fail(kind string, at int64) {
	r.errMu.Lock()
	r.errs[kind]++
	r.errMu.Unlock()
	now := time.Now()
	if s := r.slot(now); s != nil {
		s.errors.Add(1)
	}
	if at == 0 {
		at = now.UnixNano()
	}
	if st := r.stepOf(at); st != nil {
		st.errMu.Lock()
		if st.errs == nil {
			st.errs = make(ErrorCounts)
		}
		st.errs[kind]++
		st.errMu.Unlock()
	}
}

func (r *run) errors() ErrorCounts {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return maps.Clone(r.errs)
}

// startTicker samples the server and prints progress once a second until
// stopTicker.
func (r *run) startTicker(ctx context.Context) {
	ctx, r.tickStop = context.WithCancel(ctx)
	r.tickDone = make(chan struct{})
	go func() {
		defer close(r.tickDone)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		prev, _ := r.cost.sample(ctx)
		genPrev, _ := procSample(os.Getpid())
		mPrev, mPrevAt, _ := machineSample()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				cur, err := r.cost.sample(ctx)
				gen, genErr := procSample(os.Getpid())
				r.tick(now, prev, cur, err == nil)
				if err == nil {
					prev = cur
				}
				if genErr == nil {
					if s := r.slot(now.Add(-time.Second / 2)); s != nil && gen.at.After(genPrev.at) {
						s.genCPU = 100 * (gen.cpu - genPrev.cpu) / gen.at.Sub(genPrev.at).Seconds()
					}
					genPrev = gen
				}
				if m, at, err := machineSample(); err == nil {
					if s := r.slot(now.Add(-time.Second / 2)); s != nil && at.After(mPrevAt) {
						s.machineCPU = 100 * (m - mPrev) / at.Sub(mPrevAt).Seconds()
					}
					mPrev, mPrevAt = m, at
				}
			}
		}
	}()
}

func (r *run) stopTicker() {
	if r.tickStop != nil {
		r.tickStop()
		<-r.tickDone
		r.tickStop = nil
	}
}

func (r *run) tick(now time.Time, prev, cur costSample, ok bool) {
	// The slot of the second that just ended.
	last := r.slot(now.Add(-time.Second / 2))
	if last == nil {
		return
	}
	last.conns = r.conns.Load()
	if ok && cur.at.After(prev.at) {
		last.cpu = 100 * (cur.cpu - prev.cpu) / cur.at.Sub(prev.at).Seconds()
		last.rss = cur.rss
	}
	if r.o.Progress != nil {
		// The line of the second before: its generator CPU is known now.
		if before := r.slot(now.Add(-3 * time.Second / 2)); before != nil {
			r.progress(r.o.Progress, now.Add(-time.Second), before, before.rss > 0)
		}
	}
}

func (r *run) progress(w io.Writer, now time.Time, s *second, costOK bool) {
	line := fmt.Sprintf("%-10s %4ds  %-22s conns %6d  sent %6d/s  deliv %7d/s  p99 %7.1fms  errors %d",
		r.name, int(now.Sub(r.start).Seconds()), *r.phase.Load(), s.conns,
		s.sent.Load(), s.deliveries.Load(), ms(s.lat.quantile(0.99)), r.errors().total())
	if costOK && s.rss > 0 {
		line += fmt.Sprintf("  server cpu %3.0f%% rss %s", s.cpu, mib(s.rss))
	}
	if s.genCPU > 0 {
		line += fmt.Sprintf("  bench cpu %3.0f%%", s.genCPU)
	}
	if s.machineCPU > 0 {
		line += fmt.Sprintf("  machine %3.0f%%", s.machineCPU)
	}
	fmt.Fprintln(w, line)
}

// timeline freezes the per-second record. Call after stopTicker.
func (r *run) timeline() []Second {
	var out []Second
	for i := range r.secs {
		s := r.secs[i].Load()
		if s == nil {
			if out != nil {
				out = append(out, Second{T: i})
			}
			continue
		}
		out = append(out, Second{
			T: i, Conns: s.conns, Sent: s.sent.Load(), Deliveries: s.deliveries.Load(),
			P99: ms(s.lat.quantile(0.99)), Errors: s.errors.Load(),
			ServerCPU: math.Round(s.cpu*10) / 10, ServerRSS: s.rss,
			GeneratorCPU: math.Round(s.genCPU*10) / 10,
			MachineCPU:   math.Round(s.machineCPU*10) / 10,
		})
	}
	// Trailing empty seconds are the unused horizon.
	for len(out) > 0 && out[len(out)-1] == (Second{T: out[len(out)-1].T}) {
		out = out[:len(out)-1]
	}
	return out
}

func (st *stepRec) done(t int64) {
	for {
		p := st.lastDone.Load()
		if t <= p || st.lastDone.CompareAndSwap(p, t) {
			return
		}
	}
}

// result freezes one step. Rates are counted over the step's window, or
// up to its last delivery or acknowledgement when that came later: a
// server that falls behind shows a lower rate, not the scheduled one.
func (st *stepRec) result(slo time.Duration) Step {
	secs := float64(st.to-st.from) / 1e9
	s := Step{
		Name: st.name, Rate: st.rate, Unit: st.unit, Seconds: secs,
		Latency: st.lat.summary(), Lost: st.lost, Duplicated: st.dups,
	}
	if span := float64(max(st.to, st.lastDone.Load())-st.from) / 1e9; span > 0 {
		done := st.acked.Load()
		if done == 0 {
			done = st.sent.Load()
		}
		s.Achieved = float64(done) / span
		s.DeliveriesPerSec = float64(st.deliveries.Load()) / span
	}
	if st.acks.n.Load() > 0 {
		a := st.acks.summary()
		s.Acks = &a
	}
	st.errMu.Lock()
	s.Errors = maps.Clone(st.errs)
	st.errMu.Unlock()
	p99 := s.Latency.P99
	if s.Acks != nil {
		p99 = max(p99, s.Acks.P99)
	}
	s.OK = s.Lost == 0 && s.Duplicated == 0 && s.Errors.total() == 0 &&
		(s.Latency.Count > 0 || s.Acks != nil) && (slo <= 0 || p99 <= ms(slo))
	return s
}

func mib(b uint64) string { return fmt.Sprintf("%.0fMiB", float64(b)/(1<<20)) }
