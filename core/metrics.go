package core

import "github.com/prometheus/client_golang/prometheus"

// metrics are the core's Prometheus collectors.
type metrics struct {
	rooms, sessions, links prometheus.Gauge
	published, resumes     prometheus.Counter
	linkSends, linkFrames  prometheus.Counter
	linkOverflows          prometheus.Counter
	dropped                *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		rooms:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "corral_core_rooms", Help: "Rooms with members or work in flight."}),
		sessions:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "corral_core_sessions_attached", Help: "Sessions attached to a connection."}),
		links:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "corral_core_links", Help: "Open edge links."}),
		published:     prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_core_messages_published_total", Help: "Messages appended to room history and fanned out."}),
		resumes:       prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_core_resumes_total", Help: "Sessions resumed."}),
		linkSends:     prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_core_link_sends_total", Help: "Stream messages sent to edges."}),
		linkFrames:    prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_core_link_frames_total", Help: "Frames sent to edges (frames per send = this / sends)."}),
		linkOverflows: prometheus.NewCounter(prometheus.CounterOpts{Name: "corral_core_link_overflows_total", Help: "Links closed because their queue overflowed."}),
		dropped:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "corral_core_dropped_total", Help: "Frames the core dropped, by reason."}, []string{"reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.rooms, m.sessions, m.links, m.published, m.resumes, m.linkSends, m.linkFrames, m.linkOverflows, m.dropped)
	}
	return m
}
