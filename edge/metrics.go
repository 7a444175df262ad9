package edge

import (
	"github.com/corral-rt/corral/internal/reasons"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the edge's Prometheus collectors.
type metrics struct {
	conns          prometheus.Gauge
	accepted       prometheus.Counter
	streams        *prometheus.CounterVec // HTTP carriers opened, by carrier
	closes         *prometheus.CounterVec
	slow           *prometheus.CounterVec
	framesPerFlush prometheus.Histogram
	flushPass      prometheus.Histogram // one sender pass (sender.go)
	linkUp         prometheus.Gauge
	linkFailures   prometheus.Counter
	linkFailovers  prometheus.Counter
	signalsMerged  prometheus.Counter
	admissions     *prometheus.CounterVec
	draining       prometheus.Gauge
	reattached     prometheus.Counter
	refused        *prometheus.CounterVec
	pending        prometheus.Gauge
	// settles and settleSeconds count the heap settles after connect
	// bursts and the time they took (settle.go).
	settles       prometheus.Counter
	settleSeconds prometheus.Counter
	// refusedBy and slowBy are refused's and slow's counters, one per
	// reason, resolved once (reasons.go).
	refusedBy [numRefuseReasons]prometheus.Counter
	slowBy    [numSlowReasons]prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		conns:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "corral_edge_connections", Help: "Open WebSocket connections."}),
		accepted: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_edge_connections_accepted_total", Help: "WebSocket upgrades and HTTP fallback streams accepted."}),
		closes:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_edge_server_closes_total", Help: "Connections the server closed, by code."}, []string{"code"}),
		slow:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_edge_slow_consumers_total", Help: "Slow-consumer disconnects, by reason."}, []string{"reason"}),
		framesPerFlush: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "corral_edge_frames_per_flush", Help: "Frames written per WebSocket write.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}),
		flushPass: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "corral_edge_flush_pass_seconds", Help: "How long one sender pass took to write every socket handed to it (long passes: the senders are saturated, and frames wait for their socket's turn).",
			Buckets: []float64{50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3},
		}),
		linkUp:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "corral_edge_links_up", Help: "Link streams to the core that are up."}),
		linkFailures:  prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_edge_link_failures_total", Help: "Link streams to the core that failed."}),
		linkFailovers: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_edge_link_failovers_total", Help: "Link streams moved to another core after a failure (several cores configured)."}),
		streams:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_edge_streams_opened_total", Help: "HTTP fallback streams opened (docs/TRANSPORTS.md), by carrier (sse, stream); each is also a connection accepted."}, []string{"carrier"}),
		admissions:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_edge_admissions_total", Help: "Connection attempts by kind (handshake, resume) and outcome (accepted, deferred with 503)."}, []string{"kind", "outcome"}),
		reattached:    prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_edge_sessions_reattached_total", Help: "Sessions the edge resumed by itself after its link to the core came back (their clients saw no disconnect)."}),
		draining:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "corral_edge_drain_remaining", Help: "Connections still open during a drain (0 when not draining)."}),
		refused:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_edge_refused_total", Help: "Frames and connections the edge refused for a limit, by reason (rate_messages, rate_signals, rate_control, rate_sustained, frame_too_large, conns_per_user, pending_handshakes; link_lost: a frame queued for a core whose stream ended, answered 4103 UNAVAILABLE)."}, []string{"reason"}),
		pending:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "corral_edge_pending_handshakes", Help: "Connections upgraded whose hello is not yet authenticated."}),
		signalsMerged: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_edge_signals_merged_total", Help: "Signals merged into a batch still queued for a slow connection (coalesced per connection)."}),
		settles:       prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_edge_heap_settles_total", Help: "GCs the edge ran to return memory to the OS once accepts went quiet after a burst of connections (edge/settle.go)."}),
		settleSeconds: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_edge_heap_settle_seconds_total", Help: "Wall time those GCs took (corral_edge_heap_settles_total)."}),
	}
	copy(m.refusedBy[:], reasons.Counters("edge", m.refused, refuseReasonNames[:]))
	copy(m.slowBy[:], reasons.Counters("edge", m.slow, slowReasonNames[:]))
	if reg != nil {
		reg.MustRegister(m.conns, m.accepted, m.closes, m.slow, m.framesPerFlush, m.flushPass, m.linkUp, m.linkFailures, m.linkFailovers, m.signalsMerged, m.admissions, m.streams, m.draining, m.reattached, m.refused, m.pending, m.settles, m.settleSeconds)
	}
	return m
}
