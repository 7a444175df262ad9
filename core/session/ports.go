package session

import (
	"context"
	"time"
)

// The ports of a [Lifecycle]: what the session flows use of the core,
// one small interface per capability, each satisfied by the core's part
// that owns it (the session store is [sessions.Store] itself).

// Table is the sessions attached to a connection on one core
// (sessiontable.Table).
type Table interface {
	// Attach adds s and returns the session it replaced, if any, and
	// when that one lost its connection (dropped reports whether it had).
	Attach(s *Session) (old *Session, droppedAt time.Time, dropped bool)
	// Detach marks s as having lost its connection at at.
	Detach(s *Session, clean bool, at time.Time) bool
	// Sweep forgets the losses before expired.
	Sweep(expired time.Time) int
	// All is the attached sessions.
	All() []*Session
}

// Rooms is the room table as the joins and leaves of a session use it.
type Rooms interface {
	// Acquire returns the room name, held for a join until Release.
	Acquire(ctx context.Context, name string) (*Room, error)
	// Release lets go of a room Acquire returned.
	Release(r *Room)
	// ReleaseMember lets go of a room a member left.
	ReleaseMember(r *Room)
	// Failed answers q, whose room could not be acquired because a store
	// failed with err.
	Failed(ctx context.Context, s *Session, q *JoinReq, err error)
}

// Admission is the door as a session's joins pass it.
type Admission interface {
	// Admit returns the requests of reqs that may go on; it answered the
	// others itself.
	Admit(ctx context.Context, s *Session, reqs []*JoinReq) []*JoinReq
	// RefuseFull answers q, whose room is full.
	RefuseFull(ctx context.Context, s *Session, q *JoinReq)
}

// Reads are what joins read between croom.Room.BeginJoin and
// croom.Room.GoLive, each one batch for all the joins, and the hooks a
// room calls while one goes live.
type Reads interface {
	// Missed reads the history the joins missed.
	Missed(ctx context.Context, qs []*JoinReq)
	// Open reads the prefixes of the rooms' open growing messages.
	Open(ctx context.Context, qs []*JoinReq)
	// Old reads the keyed state older than the rooms' mirrors keep.
	Old(ctx context.Context, qs []*JoinReq)
}

// Presence is the presence of the rooms a session joins and leaves.
type Presence interface {
	// Join counts s in r's presence with state.
	Join(ctx context.Context, s *Session, r *Room, state []byte)
	// Leave takes s out of room's presence.
	Leave(s *Session, room string, clean bool)
	// Detach takes s out of every room's presence (after a grace unless
	// clean).
	Detach(s *Session, clean bool)
}

// Events is the event log of member events (eventlog.Log).
type Events interface {
	// EmitJoined logs that s joined room (resumed: as a resume).
	EmitJoined(s *Session, room string, resumed bool)
	// EmitDisconnected logs that s lost its connection while in rooms.
	// The map, not an iterator of its names: an iterator made here
	// would escape through the port, one allocation a detach.
	EmitDisconnected(s *Session, rooms map[string]*Room, clean bool)
}

// FlowMetrics is what the flows count, as the core labels it.
type FlowMetrics struct {
	// StoreOp times one call of the session store, op naming it; the
	// returned func takes the call's error.
	StoreOp func(op string) func(error)
	// StaleResume counts a resume refused as stale.
	StaleResume func()
	// Reconnected observes how long a resumed session was without a
	// connection, when this core saw it lose the connection.
	Reconnected func(d time.Duration)
	// Resumed counts a resume served.
	Resumed func()
}
