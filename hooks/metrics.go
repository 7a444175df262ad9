package hooks

import "github.com/prometheus/client_golang/prometheus"

// metrics are the hooks' Prometheus collectors, labelled by hook.
type metrics struct {
	calls     *prometheus.CounterVec   // hook, result
	errors    *prometheus.CounterVec   // hook, kind
	batch     *prometheus.HistogramVec // hook
	duration  *prometheus.HistogramVec // hook
	breaker   *prometheus.GaugeVec     // hook
	cache     *prometheus.CounterVec   // result: hit, miss
	unchecked *prometheus.CounterVec   // hook
}

// Results of corral_hook_calls_total: the backend's answer (allowed,
// refused) or none (failed; corral_hook_errors_total says why).
const (
	resultAllowed = "allowed"
	resultRefused = "refused"
	resultFailed  = "failed"
)

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_hook_calls_total",
			Help: "Decisions asked of the application's backend, by hook and result (allowed, refused, failed); a Join call counts each pair.",
		}, []string{"hook", "result"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_hook_errors_total",
			Help: "Hook calls that got no answer, by hook and kind (timeout, backend, breaker_open, overloaded, bad_response).",
		}, []string{"hook", "kind"}),
		batch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "corral_hook_batch_size",
			Help:    "Pairs per backend call of a batched hook (Join).",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000},
		}, []string{"hook"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "corral_hook_duration_seconds",
			Help:    "Latency of backend calls, by hook.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 15),
		}, []string{"hook"}),
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "corral_hook_breaker_state",
			Help: "Each hook's circuit breaker: 0 closed, 1 half-open, 2 open.",
		}, []string{"hook"}),
		cache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_hook_join_cache_total",
			Help: "Join decisions looked up in the result cache, by result (hit, miss).",
		}, []string{"result"}),
		unchecked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_hook_unchecked_total",
			Help: "Events let through without the backend's answer by a failure policy other than closed (join: allow-known, publish: open, refresh: allow-known), by hook.",
		}, []string{"hook"}),
	}
	for _, h := range []string{HookJoin, HookPublish, HookRefresh} {
		m.unchecked.WithLabelValues(h)
	}
	if reg != nil {
		reg.MustRegister(m.calls, m.errors, m.batch, m.duration, m.breaker, m.cache, m.unchecked)
	}
	return m
}
