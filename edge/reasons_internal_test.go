package edge

import (
	"testing"

	"github.com/corral-rt/corral/internal/reasontest"
	"github.com/prometheus/client_golang/prometheus"
)

// TestReasonsHaveMetricsAndDocs: every reason the edge counts has its
// series at 0 from the start and its row in docs/SECURITY.md, and no
// series or row names a reason the edge does not have.
func TestReasonsHaveMetricsAndDocs(t *testing.T) {
	reg := prometheus.NewRegistry()
	newMetrics(reg)
	reasontest.Check(t, reg, "corral_edge_refused_total", refuseReasonNames[:])
	reasontest.Check(t, reg, "corral_edge_slow_consumers_total", slowReasonNames[:])
}

// TestReasonCountsWithoutAllocating: counting a reason is a fixed
// counter's increment, nothing to allocate on the hot path.
func TestReasonCountsWithoutAllocating(t *testing.T) {
	m := newMetrics(nil)
	if n := testing.AllocsPerRun(100, func() {
		m.refuse(refusedRateMessages)
		m.cutSlow(slowQueueFull)
	}); n != 0 {
		t.Fatalf("%v allocations per count", n)
	}
}
