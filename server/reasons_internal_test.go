package server

import (
	"testing"

	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/internal/reasontest"
	"github.com/prometheus/client_golang/prometheus"
)

// TestReasonsHaveMetricsAndDocs: every reason the server refuses an API
// call for has its series at 0 from the start and its row in
// docs/SECURITY.md, and no series or row names a reason it does not have.
func TestReasonsHaveMetricsAndDocs(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newKeyRefused(), newAPIRefused())
	reasontest.Check(t, reg, "corral_api_unauthenticated_total", keyRefusalNames[:])
	reasontest.Check(t, reg, "corral_api_refused_total", apiRefusalNames[:])

	hist := prometheus.NewRegistry()
	registerMemoryHistory(hist, history.NewMemory(history.MemoryOptions{}))
	reasontest.Check(t, hist, "corral_history_memory_refused_total", history.MemoryRefusalNames[:])
}
