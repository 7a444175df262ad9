package bench

import (
	"context"
	"fmt"
	"time"
)

// conclude ends a publishing scenario: it samples the server's cost of the
// publishing window, waits for deliveries in flight, closes the clients,
// checks delivery and assembles the Result. headline fills in the summary
// line given the best step (nil when none passed).
func (r *run) conclude(ctx context.Context, f *fleet, params map[string]any,
	stopKeepAlive context.CancelFunc, slo time.Duration, headline func(*Result, *Step)) (*Result, error) {
	srv, gen := r.endWindow(ctx)
	machine := r.machineWindow()
	acks, upto := r.ledger.snapshot()
	r.setPhase("draining")
	serverQueued := 0.0
	if !f.drain(ctx, upto, r.o.Drain) {
		r.setPhase("settling")
		serverQueued = f.settle(ctx, upto, r.o.Drain)
	}
	stopKeepAlive()
	r.setPhase("closing")
	f.closeAll(30 * time.Second)
	r.stopTicker()

	res := &Result{
		Scenario: r.name, Started: r.start, Seconds: time.Since(r.start).Seconds(),
		Target: r.o.Target, Params: params, SLOMs: ms(slo), Best: -1,
		Latency: r.lat.summary(), Histogram: r.lat.buckets(), Errors: r.errors(),
		Timeline: r.timeline(),
	}
	if r.acks.n.Load() > 0 {
		a := r.acks.summary()
		res.Acks = &a
	}
	res.Delivery = f.check(upto, acks)
	res.Delivery.ServerQueued = serverQueued
	res.Connect = &ConnectStats{Target: f.target, Joined: f.count(), Failed: f.target - f.count(), Latency: f.connLat.summary()}
	for i, st := range r.steps {
		s := st.result(slo)
		res.Steps = append(res.Steps, s)
		if s.OK && (res.Best < 0 || s.Rate > res.Steps[res.Best].Rate) {
			res.Best = i
		}
	}
	if srv != nil {
		srv.RSSPeak = max(srv.RSSPeak, peakRSS(res.Timeline))
	}
	if r.o.InProcess {
		gen = nil // the server's figure is this whole process
	}
	res.Server, res.Generator, res.MachineCPU = srv, gen, machine
	var best *Step
	if res.Best >= 0 {
		best = &res.Steps[res.Best]
	}
	headline(res, best)
	if len(res.Delivery.Violations) > 0 {
		return res, fmt.Errorf("%w: %d lost, %d duplicated; first: %s", ErrViolation,
			res.Delivery.Lost, res.Delivery.Duplicated, res.Delivery.Violations[0])
	}
	return res, nil
}

func peakRSS(tl []Second) uint64 {
	var p uint64
	for _, s := range tl {
		p = max(p, s.ServerRSS)
	}
	return p
}
