package core

import (
	"context"
	"errors"
	"time"

	"github.com/corral-rt/corral/core/pubrate"
	"github.com/corral-rt/corral/core/sessiontable"
	"github.com/corral-rt/corral/grants"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/internal/reasons"
	"github.com/corral-rt/corral/sessions"
	"github.com/corral-rt/corral/state"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the core's Prometheus collectors.
type metrics struct {
	rooms, sessions, links prometheus.Gauge
	published, resumes     prometheus.Counter
	linkSends, linkFrames  prometheus.Counter
	linkOverflows          prometheus.Counter
	dropped                *prometheus.CounterVec
	refused                *prometheus.CounterVec
	storeSeconds           *prometheus.HistogramVec
	storeErrors            *prometheus.CounterVec
	storeInFlight          prometheus.Gauge
	signalsIn, signalsOut  prometheus.Counter
	presenceFlushes        prometheus.Counter
	signalsCoalesced       prometheus.Counter
	signalsDeferred        prometheus.Counter
	reconnectSeconds       prometheus.Histogram
	unsubscribed           prometheus.Counter
	// Keyed state (keyed.go): changes delivered, of them sent as deltas,
	// snapshots sent to every member after the order was lost, and
	// resumes served from the kept changes (since) or a snapshot.
	stateChanges, stateDeltas, stateSnapshots prometheus.Counter
	stateResumes                              *prometheus.CounterVec
	// backlogFrames and backlogBytes are what waits in the connections'
	// work queues (core/session Work); coalesced counts queued presence updates
	// and acks replaced by newer ones.
	backlogFrames, backlogBytes prometheus.Gauge
	coalesced                   prometheus.Counter
	// liveBatchMessages and liveBatchFlushes are the flushes of rooms
	// with a write delay (core/room/delay.go).
	liveBatchMessages prometheus.Histogram
	liveBatchFlushes  *prometheus.CounterVec
	// refusedBy and droppedBy are refused's and dropped's counters, one
	// per reason, resolved once (reasons.go).
	refusedBy [numRefuseReasons]prometheus.Counter
	droppedBy [numDropReasons]prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		rooms:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "corral_core_rooms", Help: "Rooms with members or work in flight."}),
		unsubscribed:  prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_core_pubsub_unsubscribed_total", Help: "Rooms whose Redis pub/sub subscription this core dropped because it no longer has members there."}),
		sessions:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "corral_core_sessions_attached", Help: "Sessions attached to a connection."}),
		links:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "corral_core_links", Help: "Open edge links."}),
		published:     prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_core_messages_published_total", Help: "Messages appended to room history and fanned out."}),
		resumes:       prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_core_resumes_total", Help: "Sessions resumed."}),
		linkSends:     prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_core_link_sends_total", Help: "Stream messages sent to edges."}),
		linkFrames:    prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_core_link_frames_total", Help: "Frames sent to edges (frames per send = this / sends)."}),
		linkOverflows: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_core_link_overflows_total", Help: "Links closed because their queue overflowed."}),
		dropped:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_core_dropped_total", Help: "Frames the core dropped, by reason; replay_busy, replay_failed and catchup_full count joins whose replay was dropped (the client got Reset): too many replay reads queued, the history read failed, or too much live traffic was held for the join meanwhile."}, []string{"reason"}),
		refused:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_core_refused_total", Help: "Client operations the core refused by policy or limit, by reason (forbidden_join, forbidden_publish, read_only, rooms_per_conn, payload_too_large, join_revoked, refresh_no_grant, refresh_other_user, grants_unavailable, invalid_argument, not_joined, stale_resume, conn_backlog; internal API publishes pushed back: api_overload_link, api_overload_edge)."}, []string{"reason"}),
		storeSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "corral_core_store_seconds", Help: "Latency of history and session store operations, by operation.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}, []string{"op"}),
		storeErrors:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_core_store_errors_total", Help: "Failed store operations, by operation and kind (busy, timeout, canceled, other)."}, []string{"op", "kind"}),
		storeInFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "corral_core_store_in_flight", Help: "Store operations in flight."}),
		reconnectSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "reconnect_duration_seconds",
			Help:    "From a session's connection dropping to the session resumed (seed W1's metric, measured at the server).",
			Buckets: []float64{.05, .1, .25, .5, 1, 2, 3, 5, 10, 20, 30, 60, 120},
		}),
		signalsIn:       prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_core_signals_in_total", Help: "Signals received from clients."}),
		signalsOut:      prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_core_signals_out_total", Help: "Signal values flushed to rooms (each goes once per link)."}),
		presenceFlushes: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_core_presence_flushes_total", Help: "Presence frames flushed to rooms (each goes once per link)."}),
		backlogFrames:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "corral_core_conn_backlog_frames", Help: "Client frames waiting in the connections' work queues (each bounded by --conn-backlog-frames)."}),
		backlogBytes:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "corral_core_conn_backlog_bytes", Help: "Bytes of the client frames waiting in the connections' work queues (each bounded by --conn-backlog-bytes)."}),
		coalesced:       prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_core_conn_coalesced_total", Help: "Queued presence updates and acks replaced by a newer one of the same room before the core processed them."}),
		liveBatchMessages: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "corral_core_live_batch_messages", Help: "Live messages per flush of a room with a write delay (one frame per link).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}),
		liveBatchFlushes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_core_live_batch_flushes_total", Help: "Flushes of rooms with a write delay, by reason (timer: the window ended; full: 256 messages or 64 KiB; event: a join, leave or reset that must not overtake them)."}, []string{"reason"}),
		signalsCoalesced: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_core_signals_coalesced_total", Help: "Signals replaced by a newer value of the same key before their flush."}),
		signalsDeferred:  prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_core_signals_deferred_total", Help: "Signal values left for the next tick because the room's flush reached its byte bound (256 KiB a tick)."}),
		stateChanges:     prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_core_state_changes_total", Help: "Keyed-state changes delivered to the rooms held here (each goes once per link)."}),
		stateDeltas:      prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_core_state_deltas_total", Help: "Keyed-state sets sent as a delta against the previous value instead of the value (docs/DELTA.md)."}),
		stateSnapshots:   prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_core_state_snapshots_total", Help: "Keyed-state snapshots sent to every member of a room because its changes were no longer all kept or its epoch changed."}),
		stateResumes:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_core_state_resumes_total", Help: "Joins with a keyed-state position, by how they continued: since (the mirror's kept changes after it), store (changes older than the mirror keeps, read from the store) or snapshot (older than the store keeps, or another epoch)."}, []string{"how"}),
	}
	m.stateResumes.WithLabelValues("since")
	m.stateResumes.WithLabelValues("snapshot")
	m.stateResumes.WithLabelValues("store")
	copy(m.refusedBy[:], reasons.Counters("core", m.refused, refuseReasonNames[:]))
	copy(m.droppedBy[:], reasons.Counters("core", m.dropped, dropReasonNames[:]))
	if reg != nil {
		reg.MustRegister(m.rooms, m.sessions, m.links, m.published, m.resumes, m.linkSends, m.linkFrames, m.linkOverflows, m.dropped, m.refused, m.storeSeconds, m.storeErrors, m.storeInFlight, m.signalsIn, m.signalsOut, m.signalsCoalesced, m.signalsDeferred, m.reconnectSeconds, m.unsubscribed, m.presenceFlushes, m.backlogFrames, m.backlogBytes, m.coalesced, m.liveBatchMessages, m.liveBatchFlushes, m.stateChanges, m.stateDeltas, m.stateSnapshots, m.stateResumes)
	}
	return m
}

// memoryGrants registers the gauge and refusal counter of g, the
// in-memory grants store (grants.MaxMemoryUsers).
func (m *metrics) memoryGrants(reg prometheus.Registerer, g *grants.Memory) {
	if reg == nil {
		return
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "corral_grants_memory_users", Help: "Users with run-time grants or revocations in the in-memory grants store (bounded by 1,048,576)."},
			func() float64 { return float64(g.Len()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "corral_grants_memory_refused_total", Help: "Grant and Revoke calls the in-memory grants store refused, by reason (max_users: a user it does not hold, at its bound).", ConstLabels: prometheus.Labels{"reason": "max_users"},
		}, func() float64 { return float64(g.Refused()) }),
	)
}

// sessionDrops registers the counter of the drop times t forgot at its
// bound (sessiontable.MaxDropped).
func (m *metrics) sessionDrops(reg prometheus.Registerer, t *sessiontable.Table[*session]) {
	if reg == nil {
		return
	}
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "corral_core_session_drops_forgotten_total", Help: "Detached sessions whose drop time the core forgot before they expired, at its bound (1,048,576): their reconnect is not measured."},
		func() float64 { return float64(t.Forgotten()) }))
}

// memorySessions registers the gauge and drop counter of st, the
// in-memory session store the core made (sessions.Options.MaxSessions).
func (m *metrics) memorySessions(reg prometheus.Registerer, st *sessions.Memory) {
	if reg == nil {
		return
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "corral_sessions_memory", Help: "Sessions the in-memory session store holds (bounded by 1,048,576)."},
		func() float64 { return float64(st.Len()) }))
	for _, name := range sessions.MemoryDropNames {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "corral_sessions_memory_dropped_total", Help: "Sessions the in-memory session store dropped before they expired, by reason (max_sessions: the ones expiring soonest, at its bound).", ConstLabels: prometheus.Labels{"reason": name},
		}, func() float64 { return float64(st.Evicted()) }))
	}
}

// publishBudgets registers the gauge and counter of t, the room
// classes' publish budgets (core/pubrate).
func (m *metrics) publishBudgets(reg prometheus.Registerer, t *pubrate.Table) {
	if reg == nil {
		return
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "corral_core_publish_budgets", Help: "Publish buckets of room classes with a publish-rate held per (user, room), until full again."},
			func() float64 { return float64(t.Len()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "corral_core_publish_budgets_evicted_total", Help: "Publish buckets forgotten before they were full again because the core held its bound of them (131,072): the user got a fresh burst early."},
			func() float64 { return float64(t.Evicted()) }),
	)
}

// storeOp measures one store operation: latency, in-flight, errors by kind.
// Call the returned function with the operation's error when it is done.
func (m *metrics) storeOp(op string) func(error) {
	start := time.Now()
	m.storeInFlight.Inc()
	return func(err error) {
		m.storeInFlight.Dec()
		m.storeSeconds.WithLabelValues(op).Observe(time.Since(start).Seconds())
		if err != nil {
			m.storeErrors.WithLabelValues(op, errorKind(err)).Inc()
		}
	}
}

func errorKind(err error) string {
	switch {
	case errors.Is(err, history.ErrBusy), errors.Is(err, sessions.ErrBusy):
		return "busy"
	case errors.Is(err, context.DeadlineExceeded), isStoreTimeout(err):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, sessions.ErrNotFound), errors.Is(err, sessions.ErrTokenMismatch),
		errors.Is(err, state.ErrConflict), errors.Is(err, state.ErrTooManyKeys),
		errors.Is(err, state.ErrTooLarge), errors.Is(err, state.ErrInvalid):
		return "refused"
	}
	return "other"
}
