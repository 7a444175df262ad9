package api

import (
	"context"
	"log/slog"
	"time"

	"github.com/corral-rt/corral/core/door"
	"github.com/corral-rt/corral/core/everycore"
	"github.com/corral-rt/corral/events"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/sessions"
	"github.com/corral-rt/corral/state"
)

// Core is what the internal API sees of the core: the operations and the
// snapshots of its tables the handlers need. Every method is safe for
// concurrent use and returns values the caller owns.
type Core interface {
	// Publish appends msg to its room and fans it out to the room's
	// members; a dedupe key other than "" makes a retry a duplicate.
	// order, when not zero, is msg's place in its stream's sequence
	// (history.SenderOrder).
	Publish(ctx context.Context, msg *corralv1.Message, dedupe string, order history.Sender) (history.AppendResult, error)
	// SetState and DeleteState write one key of room's keyed state as
	// the API (no client's door; the room class's bounds apply), and fan
	// the change out; StateSnapshot reads the room's whole state.
	SetState(ctx context.Context, room string, set state.Set) (state.Result, error)
	DeleteState(ctx context.Context, room, key string, cas bool, version uint64) (state.Result, error)
	StateSnapshot(ctx context.Context, room string) (state.Snapshot, error)
	// Grow applies one chunk of a growing message (msg.Chunk) to its room
	// as the API (no client's door), in the room's order, and fans it out;
	// a refusal is a *RefusedError, a store without growing messages
	// ErrNoGrowing. Assembled reads a growing message as assembled so far
	// (history.ErrNotFound for none).
	Grow(ctx context.Context, msg *corralv1.Message) (history.AppendResult, error)
	Assembled(ctx context.Context, room, id string) (*corralv1.Message, history.State, error)
	// Backlog sums what waits toward the edges: the bytes of this core's
	// link queues, the bytes the edges last reported in their
	// connections' send queues, and whether one link queue holds half of
	// Config.LinkQueue frames.
	Backlog() (coreBytes, edgeBytes uint64, fullLink bool)
	// Members lists room's members on this core whose join finished, one
	// entry per user (session ids unsorted); over when the room has more
	// than limit members. Nil for a room not in use here.
	Members(room string, limit int) (members []*corralv1.Member, over bool)
	// Presence lists room's presence from the presence store (every core).
	Presence(ctx context.Context, room string) ([]*corralv1.PresenceMember, error)
	// Rooms lists, in name order, the first n rooms with members on this
	// core whose name is after after and that match keeps.
	Rooms(after string, keep func(name string) bool, n int) []*corralv1.RoomInfo
	// Nodes describes this core (first) and the edges linked to it.
	Nodes() []*corralv1.NodeInfo
	// Connections describes, in session id order, the first n
	// connections attached here of user (or of the one session, when
	// session is not "") whose session id is after after.
	Connections(user, session, after string, n int) []*corralv1.ConnectionInfo
	// Signals lists the first n signals of room on this core by key (the
	// latest value of each, clears left out), copied.
	Signals(room string, n int) []*corralv1.SignalEvent
	// Kick closes the connections attached here of user (or of the one
	// session, when session is not "") with code, reason and a delay
	// jittered over [delay, 1.5 delay], records the kicks in the event
	// log, and with stop ends their presence at once; it returns their
	// session ids, sorted.
	Kick(user, session string, code corralv1.Code, reason string, delayMs uint32, stop bool) []string
	// EnforceGrants removes user's sessions here from the rooms their
	// grants no longer allow, and returns those sessions' ids and the
	// rooms left. Called under the door's Enforce.
	EnforceGrants(ctx context.Context, user string) (ids []string, left int)
	// SubscribeHere joins the user's connections on this core to the
	// request's rooms, at since's positions; with wait, it waits (within
	// ctx and a bound) for them.
	SubscribeHere(ctx context.Context, req *corralv1.SubscribeRequest, since map[string]*corralv1.RoomPosition, wait bool) *corralv1.SubscribeResponse
	// UnsubscribeHere removes the user's connections on this core from
	// the request's rooms, with reason on their Left.
	UnsubscribeHere(ctx context.Context, req *corralv1.UnsubscribeRequest, reason string, wait bool) *corralv1.UnsubscribeResponse
}

// ControlBus carries the commands of Subscribe and Unsubscribe to the
// other cores (core.ControlBus; controlbus.Redis implements it).
type ControlBus interface {
	// Publish sends cmd to the other cores and returns how many got it.
	Publish(ctx context.Context, cmd []byte) (int, error)
	// Listen sets the function called with other cores' commands; it
	// must not block.
	Listen(fn func(cmd []byte))
}

// Config is the internal API's settings (core.APIConfig, defaults
// applied by the core).
type Config struct {
	MaxBroadcastRooms    int
	MaxMembers           int
	MaxBatch             int
	BroadcastConcurrency int
	// OverloadQueueBytes is the bytes waiting toward the edges past which
	// Publish, Broadcast and Batch push back; negative: never.
	OverloadQueueBytes int
	// EventsHeartbeat is how often an idle Events stream sends an empty
	// response.
	EventsHeartbeat time.Duration
}

// Options are what a Service needs, given once by core.New.
type Options struct {
	Core   Core
	Config Config
	// Door checks room names and holds the grants store.
	Door *door.Door
	// MaxPayload is a room's payload bound (its class's max-payload).
	MaxPayload func(room string) int
	// History is the history store History reads.
	History history.Store
	// Sessions is the session store a STOP Disconnect deletes from.
	Sessions sessions.Store
	// Events is the event log Events follows; nil when none is kept.
	Events events.Log
	// Control carries Subscribe and Unsubscribe to the other cores; nil:
	// this core is the only one.
	Control ControlBus
	// Asker carries every_core questions; nil: no other core answers.
	Asker everycore.Asker
	// NodeQuery answers the other cores' questions for the process around
	// the core (everycore.Options.NodeQuery).
	NodeQuery func(ctx context.Context, query []byte) []byte
	// Closing ends when the core closes: Events streams end with it, and
	// the other cores' commands run within it.
	Closing context.Context
	// Count counts a refusal or a drop by reason; it must not block.
	Count  func(Reason)
	Logger *slog.Logger
}

// Reason is why the API refused a call or dropped a command: the core
// counts each under its own label (core/reasons.go apiReasons).
type Reason uint8

const (
	// OverloadLink, OverloadEdge: a publish pushed back because the link
	// queues toward the edges held the most, or the edges' send queues.
	OverloadLink Reason = iota // api_overload_link
	OverloadEdge               // api_overload_edge
	// BadControl: a command of another core that could not be decoded or
	// was out of bounds (dropped).
	BadControl // bad_control
	// OutOfOrder: a publish with seq whose predecessor in its stream is
	// not stored (PublishRequest.seq).
	OutOfOrder // out_of_order
	NumReasons
)

// Service implements corralv1connect.RoomServiceHandler over a Core.
type Service struct {
	// stateRPCs serves the keyed-state RPCs (state.go); embedded in it,
	// the unimplemented rest of RoomService.
	stateRPCs

	o     Options
	cfg   Config
	core  Core
	every *everycore.Cores
}

var _ corralv1connect.RoomServiceHandler = (*Service)(nil)

// New returns the internal API of o.Core. It answers the other cores'
// every_core questions (o.Asker) and applies their commands (o.Control)
// from now on.
func New(o Options) *Service {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Count == nil {
		o.Count = func(Reason) {}
	}
	if o.Closing == nil {
		o.Closing = context.Background()
	}
	s := &Service{o: o, cfg: o.Config, core: o.Core}
	s.stateRPCs.s = s
	s.growRPCs.s = s
	s.every = everycore.New(everycore.Options{
		Asker: o.Asker, Local: s, NodeQuery: o.NodeQuery,
		MaxMembers: o.Config.MaxMembers, PageToken: encodePageToken, Logger: o.Logger,
	})
	if o.Control != nil {
		o.Control.Listen(s.onControl)
	}
	if o.Asker != nil {
		o.Asker.Answer(s.every.Answer)
	}
	return s
}

// AskNodes asks the process around every other core sharing the store
// (their NodeQuery) the question q, which begins with
// everycore.NodeQueryKind, and returns their answers and how many heard
// it. It waits two seconds at most. Without a control bus that carries
// questions, there is no other core: nothing, 0.
func (s *Service) AskNodes(ctx context.Context, q []byte) (answers [][]byte, asked int) {
	return s.every.AskNodes(ctx, q)
}
