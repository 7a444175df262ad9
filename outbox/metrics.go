package outbox

import (
	"github.com/corral-rt/corral/internal/reasons"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are a relay's Prometheus metrics (docs/OUTBOX.md "Metrics").
type metrics struct {
	lagRows    prometheus.Gauge
	lagSeconds prometheus.Gauge
	leader     prometheus.Gauge
	published  *prometheus.CounterVec
	waits      *prometheus.CounterVec
	waitBy     [numWaitReasons]prometheus.Counter // waits by reason, resolved once
	delivery   prometheus.Histogram
}

// Results of a row's publish (corral_outbox_rows_total{result}).
var results = []string{"published", "duplicate", "failed"}

// waitReason is why the relay ended a pass early to wait: a label value
// of corral_outbox_waits_total{reason}, created at 0 with its counter
// resolved once. docs/SECURITY.md's "Drop and refusal reasons" table has
// a row for each (TestReasonsHaveMetricsAndDocs).
type waitReason uint8

const (
	waitOverloaded  waitReason = iota // the core refused with a retry hint
	waitUnavailable                   // the publish failed otherwise
	numWaitReasons
)

// waitReasonNames are the label values users see (deploy/grafana).
var waitReasonNames = [numWaitReasons]string{
	waitOverloaded:  "overloaded",
	waitUnavailable: "unavailable",
}

func (r waitReason) String() string { return waitReasonNames[r] }

func newMetrics() metrics {
	m := metrics{
		lagRows: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "corral_outbox_lag_rows",
			Help: "Committed outbox rows not yet published, as of the relay's last read (0 on a standby core).",
		}),
		lagSeconds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "corral_outbox_lag_seconds",
			Help: "Age of the oldest outbox row not yet published, as of the relay's last read, by the database's clock.",
		}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "corral_outbox_leader",
			Help: "1 when this core holds the outbox lock and delivers, 0 on a standby.",
		}),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_outbox_rows_total",
			Help: "Outbox rows handled, by result: published, duplicate (published before a crash or by another core), failed (moved to corral_outbox_failed).",
		}, []string{"result"}),
		waits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_outbox_waits_total",
			Help: "Passes the relay ended early to wait, by reason: overloaded (the core refused with a retry hint: backpressure), unavailable (its store failed).",
		}, []string{"reason"}),
		delivery: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "corral_outbox_delivery_seconds",
			Help:    "From a row's created_at to its publish, by the database's clock when the row was read.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
	}
	for _, r := range results {
		m.published.WithLabelValues(r)
	}
	copy(m.waitBy[:], reasons.Counters("outbox", m.waits, waitReasonNames[:]))
	return m
}

func (m metrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.lagRows, m.lagSeconds, m.leader, m.published, m.waits, m.delivery} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
