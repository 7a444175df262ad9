package reasons_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/corral-rt/corral/internal/reasons"
)

func TestCounters(t *testing.T) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total"}, []string{"reason"})
	cs := reasons.Counters("x", vec, []string{"a", "b"})
	cs[1].Inc()
	if got := testutil.CollectAndCount(vec); got != 2 {
		t.Fatalf("%d series, want 2 (every reason at 0)", got)
	}
	if v := testutil.ToFloat64(vec.WithLabelValues("b")); v != 1 {
		t.Fatalf("b = %v, want 1", v)
	}
	for name, names := range map[string][]string{"empty": {"a", ""}, "repeated": {"a", "a"}} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			reasons.Counters("x", prometheus.NewCounterVec(prometheus.CounterOpts{Name: "y_total"}, []string{"reason"}), names)
		})
	}
}
