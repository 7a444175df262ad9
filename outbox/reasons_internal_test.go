package outbox

import (
	"testing"

	"github.com/corral-rt/corral/internal/reasontest"
	"github.com/prometheus/client_golang/prometheus"
)

// TestReasonsHaveMetricsAndDocs: every reason the relay waits for has its
// series at 0 from the start and its row in docs/SECURITY.md, and no
// series or row names a reason the relay does not have.
func TestReasonsHaveMetricsAndDocs(t *testing.T) {
	reg := prometheus.NewRegistry()
	if err := newMetrics().register(reg); err != nil {
		t.Fatal(err)
	}
	reasontest.Check(t, reg, "corral_outbox_waits_total", waitReasonNames[:])
}
