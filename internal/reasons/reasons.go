// Package reasons resolves the counters of a metric whose label is a
// typed reason (a drop, a refusal): one counter per reason, created at 0
// when the metrics are built, so that counting is an array index and a
// dashboard sees every reason before it first happens. Safe for concurrent
// use: it only builds values.
package reasons

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Counters resolves one counter of vec per name, in order (names[i] is
// the label of reason i). It panics on an empty or repeated name: a reason
// added to an enum without its label (derp's dropReason does the same)
// must not reach a metric. pkg prefixes the panic's message. A nil vec
// (a metric not kept) gives none.
func Counters(pkg string, vec *prometheus.CounterVec, names []string) []prometheus.Counter {
	if vec == nil {
		return nil
	}
	seen := make(map[string]bool, len(names))
	cs := make([]prometheus.Counter, len(names))
	for i, n := range names {
		if n == "" || seen[n] {
			panic(fmt.Sprintf("%s: reason %d has an empty or repeated label %q", pkg, i, n))
		}
		seen[n] = true
		cs[i] = vec.WithLabelValues(n)
	}
	return cs
}
