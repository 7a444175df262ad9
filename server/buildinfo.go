package server

import (
	"github.com/corral-rt/corral/internal/buildinfo"
	"github.com/prometheus/client_golang/prometheus"
)

// registerBuildInfo adds corral_build_info, always 1, whose labels say
// which build a node runs: a dashboard joins on it to tell the versions
// apart during a rolling upgrade.
func registerBuildInfo(reg prometheus.Registerer) {
	b := buildinfo.Get()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "corral_build_info", Help: "Always 1; the labels name the running build: version (semantic, or (devel)), commit, goversion.",
	}, []string{"version", "commit", "goversion"})
	g.WithLabelValues(b.Version, b.Commit, b.GoVersion).Set(1)
	reg.MustRegister(g)
}
