package core

import (
	"github.com/corral-rt/corral/core/api"
	"github.com/corral-rt/corral/core/door"
)

// Why the core refuses a client operation or an internal API call, or
// drops frames: the label values of corral_core_refused_total{reason} and
// corral_core_dropped_total{reason} (member events: core/eventlog). Each
// reason is a typed value whose name is fixed here, so a call site cannot invent a label; the
// metrics create every value at 0 (dashboards see a reason before its
// first count) and resolve its counter once, so counting one allocates
// nothing. docs/SECURITY.md's "Drop and refusal reasons" table has a row
// for each (TestReasonsHaveMetricsAndDocs). Safe for concurrent use: the
// tables are read-only after init.

// refuseReason is a reason of corral_core_refused_total.
type refuseReason uint8

const (
	refusedJoin refuseReason = iota
	refusedPublish
	refusedReadOnly
	refusedRate
	refusedFull
	refusedRooms
	refusedTooLarge
	refusedRevoked
	refusedGrantsErr
	refusedInvalid
	// The application's backend refused (hook_*) or could not answer
	// (hook_unavailable).
	refusedHookJoin
	refusedHookPublish
	refusedHookDown
	refusedNotJoined
	// refusedOrder: a publish whose predecessor in its session's sequence
	// for the room is not stored (Publish.seq, CODE_OUT_OF_ORDER).
	refusedOrder
	// refusedBacklog: a connection's work queue overflowed (package core/session, Work).
	refusedBacklog
	// A refreshed token does not grant a room the session is in.
	refusedRefreshGrant
	// A refresh for another user than the session's (the edge checks
	// this first; counted here when an edge did not).
	refusedRefreshUser
	refusedStaleResume // core/session's Lifecycle (sessionparts.go)
	refusedSignalKeys  // a signal past croom.MaxSignalKeys (core/room/signals.go)
	// Internal API publishes pushed back (core/api overloaded): the link
	// queues toward the edges held the most, or the edges' send queues.
	refusedOverloadLink
	refusedOverloadEdge
	// Keyed state writes (keyed_write.go): a compare-and-set found another
	// version; a new key past the class's state.max-keys.
	refusedStateConflict
	refusedStateKeys
	// Growing messages (grow.go): an append to a message that has its
	// final chunk; an append past the class's append rate.
	refusedFinal
	refusedAppendRate
	numRefuseReasons
)

// refuseReasonNames are the label values users see; renaming one breaks
// their dashboards (deploy/grafana).
var refuseReasonNames = [numRefuseReasons]string{
	refusedJoin:          "forbidden_join",
	refusedPublish:       "forbidden_publish",
	refusedReadOnly:      "read_only",
	refusedRate:          "class_publish_rate",
	refusedFull:          "room_full",
	refusedRooms:         "rooms_per_conn",
	refusedTooLarge:      "payload_too_large",
	refusedRevoked:       "join_revoked",
	refusedGrantsErr:     "grants_unavailable",
	refusedInvalid:       "invalid_argument",
	refusedHookJoin:      "hook_join",
	refusedHookPublish:   "hook_publish",
	refusedHookDown:      "hook_unavailable",
	refusedNotJoined:     "not_joined",
	refusedOrder:         "out_of_order",
	refusedBacklog:       "conn_backlog",
	refusedRefreshGrant:  "refresh_no_grant",
	refusedRefreshUser:   "refresh_other_user",
	refusedStaleResume:   "stale_resume",
	refusedSignalKeys:    "signal_keys",
	refusedOverloadLink:  "api_overload_link",
	refusedOverloadEdge:  "api_overload_edge",
	refusedStateConflict: "state_conflict",
	refusedStateKeys:     "state_too_many_keys",
	refusedFinal:         "message_final",
	refusedAppendRate:    "class_append_rate",
}

func (r refuseReason) String() string { return refuseReasonNames[r] }

// dropReason is a reason of corral_core_dropped_total.
type dropReason uint8

const (
	droppedBadControl   dropReason = iota // a control-bus command this core could not decode (core/api control.go)
	droppedControlBusy                    // a control task for a connection closing or with a full queue
	droppedUnattached                     // an edge frame for a connection not attached here
	droppedUnknownFrame                   // an edge frame kind this core does not know
	droppedConnClosing                    // a frame for a connection whose work queue is closing
	droppedBacklog                        // a connection's queued frames, dropped with it (core/session Work)
	droppedDetached                       // queued frames of a session detached meanwhile
	droppedAckStore                       // an ack the session store failed to record
	// Joins' replays dropped (each such join gets Reset): past
	// replay.MaxQueued (core/replay), or a failed read (replay.go), or too much live
	// traffic held for the join meanwhile: past maxCatchupBuffer or
	// maxCatchupBytes (core/room: Room.fanoutLocked).
	droppedReplayBusy
	droppedReplayFailed
	droppedCatchupFull
	numDropReasons
)

var dropReasonNames = [numDropReasons]string{
	droppedBadControl:   "bad_control",
	droppedControlBusy:  "control_busy",
	droppedUnattached:   "unattached",
	droppedUnknownFrame: "unknown_edge_frame",
	droppedConnClosing:  "conn_closing",
	droppedBacklog:      "conn_backlog",
	droppedDetached:     "detached",
	droppedAckStore:     "ack_store",
	droppedReplayBusy:   "replay_busy",
	droppedReplayFailed: "replay_failed",
	droppedCatchupFull:  "catchup_full",
}

func (r dropReason) String() string { return dropReasonNames[r] }

// refuse counts one refusal.
func (m *metrics) refuse(r refuseReason) { m.refusedBy[r].Inc() }

// drop counts n frames dropped.
func (m *metrics) drop(r dropReason, n int) { m.droppedBy[r].Add(float64(n)) }

// doorReasons are the labels of the door's reasons (core/door).
var doorReasons = [door.NumReasons]refuseReason{
	door.ReadOnly:          refusedReadOnly,
	door.ForbiddenPublish:  refusedPublish,
	door.GrantsUnavailable: refusedGrantsErr,
	door.HookPublish:       refusedHookPublish,
	door.HookUnavailable:   refusedHookDown,
	door.TooLarge:          refusedTooLarge,
}

// The internal API's reasons (core/api): refusals and drops, each with
// the label it has always had here.
var (
	apiRefusals = map[api.Reason]refuseReason{
		api.OverloadLink: refusedOverloadLink,
		api.OverloadEdge: refusedOverloadEdge,
		api.OutOfOrder:   refusedOrder,
	}
	apiDrops = map[api.Reason]dropReason{
		api.BadControl: droppedBadControl,
	}
)

// countAPI counts one refusal or drop of the internal API.
func (m *metrics) countAPI(r api.Reason) {
	if rr, ok := apiRefusals[r]; ok {
		m.refuse(rr)
		return
	}
	m.drop(apiDrops[r], 1)
}
