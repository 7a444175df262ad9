package server

import (
	"errors"

	"github.com/corral-rt/corral/internal/reasons"
	"github.com/prometheus/client_golang/prometheus"
)

// Why the server refuses an internal API call or admin request before it
// reaches the core: the label values of
// corral_api_unauthenticated_total{reason} and
// corral_api_refused_total{reason}. Each reason is a typed value whose
// name is fixed here; the metrics create every value at 0 and the
// interceptors resolve their counters once. docs/SECURITY.md's "Drop and
// refusal reasons" table has a row for each
// (TestReasonsHaveMetricsAndDocs). The tables are read-only.

// keyRefusal is a reason of corral_api_unauthenticated_total.
type keyRefusal uint8

const (
	keyMissing keyRefusal = iota // no Authorization bearer header
	keyWrong                     // a key that is not one of --api-keys
	numKeyRefusals
)

var keyRefusalNames = [numKeyRefusals]string{
	keyMissing: "missing",
	keyWrong:   "wrong",
}

func (r keyRefusal) String() string { return keyRefusalNames[r] }

// apiRefusal is a reason of corral_api_refused_total.
type apiRefusal uint8

const (
	apiStreamsPerKey apiRefusal = iota // an event stream past api-max-event-streams for its key
	numAPIRefusals
)

var apiRefusalNames = [numAPIRefusals]string{
	apiStreamsPerKey: "streams_per_key",
}

func (r apiRefusal) String() string { return apiRefusalNames[r] }

// newKeyRefused returns corral_api_unauthenticated_total with every reason
// at 0.
func newKeyRefused() *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "corral_api_unauthenticated_total", Help: "Internal API calls and admin requests refused for a missing or wrong API key, by reason.",
	}, []string{"reason"})
	reasons.Counters("server", v, keyRefusalNames[:])
	return v
}

// newAPIRefused returns corral_api_refused_total with every reason at 0.
func newAPIRefused() *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "corral_api_refused_total", Help: "Internal API calls refused by a bound of the server, by reason.",
	}, []string{"reason"})
	reasons.Counters("server", v, apiRefusalNames[:])
	return v
}

// keyRefusalOf is the reason of an API key check's error.
func keyRefusalOf(err error) keyRefusal {
	if errors.Is(err, errNoAPIKey) {
		return keyMissing
	}
	return keyWrong
}
