package core

import (
	"testing"

	"github.com/corral-rt/corral/core/api"
	"github.com/corral-rt/corral/core/door"
	"github.com/corral-rt/corral/grants"
	"github.com/corral-rt/corral/internal/reasontest"
	"github.com/corral-rt/corral/sessions"
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

	sess := prometheus.NewRegistry()
	st := sessions.NewMemory(sessions.Options{})
	defer st.Close()
	newMetrics(nil).memorySessions(sess, st)
	reasontest.Check(t, sess, "corral_sessions_memory_dropped_total", sessions.MemoryDropNames[:])

	gr := prometheus.NewRegistry()
	newMetrics(nil).memoryGrants(gr, grants.NewMemory())
	reasontest.Check(t, gr, "corral_grants_memory_refused_total", []string{"max_users"})
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

// Every reason of the door (core/door) has its own label, none left at
// the zero value by a missing line of doorReasons.
func TestDoorReasonsMapped(t *testing.T) {
	seen := make(map[refuseReason]door.Reason)
	for r := door.Reason(0); r < door.NumReasons; r++ {
		got := doorReasons[r]
		if got == refusedJoin {
			t.Errorf("door reason %d has no label in doorReasons", r)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("door reasons %d and %d share the label %s", prev, r, got)
		}
		seen[got] = r
	}
}

// Every reason of the internal API (core/api) has exactly one label: a
// refusal's or a drop's.
func TestAPIReasonsMapped(t *testing.T) {
	for r := api.Reason(0); r < api.NumReasons; r++ {
		_, refused := apiRefusals[r]
		_, dropped := apiDrops[r]
		if refused == dropped {
			t.Errorf("api reason %d: refusal %v, drop %v; want exactly one", r, refused, dropped)
		}
	}
}
