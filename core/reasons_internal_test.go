package core

import (
	"testing"

	"github.com/corral-rt/corral/internal/reasontest"
	"github.com/prometheus/client_golang/prometheus"
)

// TestReasonsHaveMetricsAndDocs: every reason the core counts has its
// series at 0 from the start and its row in docs/SECURITY.md, and no
// series or row names a reason the core does not have.
func TestReasonsHaveMetricsAndDocs(t *testing.T) {
	reg := prometheus.NewRegistry()
	newMetrics(reg)
	reasontest.Check(t, reg, "corral_core_refused_total", refuseReasonNames[:])
	reasontest.Check(t, reg, "corral_core_dropped_total", dropReasonNames[:])
}

// TestReasonCountsWithoutAllocating: counting a reason is a fixed
// counter's increment, nothing to allocate on the hot path.
func TestReasonCountsWithoutAllocating(t *testing.T) {
	m := newMetrics(nil)
	if n := testing.AllocsPerRun(100, func() {
		m.refuse(refusedOrder)
		m.drop(droppedReplayBusy, 3)
	}); n != 0 {
		t.Fatalf("%v allocations per count", n)
	}
}
