package edge

// Why the edge refuses a frame or a connection, or cuts a slow consumer:
// the label values of corral_edge_refused_total{reason} and
// corral_edge_slow_consumers_total{reason}. Each reason is a typed value
// whose name is fixed here, so a call site cannot invent a label; the
// metrics create every value at 0 (dashboards see a reason before its
// first count) and resolve its counter once, so counting one allocates
// nothing. docs/SECURITY.md's "Drop and refusal reasons" table has a row
// for each (TestReasonsHaveMetricsAndDocs). Safe for concurrent use: the
// tables are read-only after init.

// refuseReason is a reason of corral_edge_refused_total.
type refuseReason uint8

const (
	refusedRateMessages refuseReason = iota
	refusedRateSignals
	refusedRateControl
	refusedRatePresence
	refusedRateQueries
	refusedRateAcks
	refusedRateMisc
	refusedRateClose
	refusedFrameTooLarge
	refusedConnsPerUser
	refusedPending
	refusedRefresh // refresh.go
	refusedRateCalls
	refusedCallsInFlight // hooks.go
	refusedLinkLost      // link.go: queued for a core whose stream ended, answered 4103
	refusedStreamID      // stream.go: a malformed or taken stream id
	refusedStreamUnknown // stream.go: a POST for a stream not open here
	refusedStreamSecret  // stream.go: a POST with the wrong secret
	refusedPostTooLarge  // stream.go: a body past Config.MaxPostBytes
	refusedPostBusy      // stream.go: a POST while another of its stream is read
	refusedPostType      // stream.go: a body of another Content-Type
	refusedOrigin        // stream.go: a cross-origin request from an origin not allowed
	numRefuseReasons
)

// refuseReasonNames are the label values users see; renaming one breaks
// their dashboards (deploy/grafana).
var refuseReasonNames = [numRefuseReasons]string{
	refusedRateMessages:  "rate_messages",
	refusedRateSignals:   "rate_signals",
	refusedRateControl:   "rate_control",
	refusedRatePresence:  "rate_presence",
	refusedRateQueries:   "rate_queries",
	refusedRateAcks:      "rate_acks",
	refusedRateMisc:      "rate_misc",
	refusedRateClose:     "rate_sustained",
	refusedFrameTooLarge: "frame_too_large",
	refusedConnsPerUser:  "conns_per_user",
	refusedPending:       "pending_handshakes",
	refusedRefresh:       "refresh_token",
	refusedRateCalls:     "rate_calls",
	refusedCallsInFlight: "calls_in_flight",
	refusedLinkLost:      "link_lost",
	refusedStreamID:      "stream_id",
	refusedStreamUnknown: "stream_unknown",
	refusedStreamSecret:  "stream_secret",
	refusedPostTooLarge:  "post_too_large",
	refusedPostBusy:      "post_busy",
	refusedPostType:      "post_type",
	refusedOrigin:        "origin",
}

func (r refuseReason) String() string { return refuseReasonNames[r] }

// slowReason is a reason of corral_edge_slow_consumers_total.
type slowReason uint8

const (
	slowQueueFull    slowReason = iota // live traffic past the queue's bounds
	slowReplayFull                     // replays past Config.replayBytes
	slowWriteTimeout                   // a write stuck past Config.WriteTimeout
	numSlowReasons
)

var slowReasonNames = [numSlowReasons]string{
	slowQueueFull:    "queue_full",
	slowReplayFull:   "replay_full",
	slowWriteTimeout: "write_timeout",
}

func (r slowReason) String() string { return slowReasonNames[r] }

// refuse counts one refusal.
func (m *metrics) refuse(r refuseReason) { m.refusedBy[r].Inc() }

// cutSlow counts one slow-consumer disconnect.
func (m *metrics) cutSlow(r slowReason) { m.slowBy[r].Inc() }
