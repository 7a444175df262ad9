package presence

import (
	"context"
	"errors"
)

// Member is one user present in a room.
type Member struct {
	User  string
	State []byte
	// Info is the user's member info in the room (from the application's
	// hooks): set by Add, the latest non-nil wins; nil when none.
	Info []byte
	// Conns is the user's connections in the room, on every core.
	Conns int
}

// Kind is what a Change did to a member.
type Kind uint8

const (
	// Joined: the user's first connection in the room.
	Joined Kind = 1
	// Updated: the user's state or connection count changed.
	Updated Kind = 2
	// Left: the user's last connection in the room is gone. Member holds
	// the last state and no connections.
	Left Kind = 3
)

func (k Kind) String() string {
	switch k {
	case Joined:
		return "joined"
	case Updated:
		return "updated"
	case Left:
		return "left"
	}
	return "unknown"
}

// Change is one committed change of a room's presence.
type Change struct {
	Room   string
	Kind   Kind
	Member Member
	// Version is the room's presence version after the change: the
	// previous change of the room has Version-1.
	Version uint64
}

// Snapshot is a room's presence at one version.
type Snapshot struct {
	// Members ordered by user id.
	Members []Member
	Version uint64
}

// Options configure a store. Zero fields mean defaults.
type Options struct {
	// OnChange receives every change of the rooms this process watches
	// (all rooms for Memory), made by any core, in version order per room
	// unless some were lost (Redis pub/sub reconnecting): then a Change
	// with Kind 0 tells to read the room again. It runs on the store's
	// goroutines or under its lock: it must not block nor call the store.
	OnChange func(Change)
	// OnCommit receives every change this store handle committed (its own
	// Add, Remove, SetState, and the sweeps it ran), once each: the place
	// to record events exactly once. Same rules as OnChange.
	OnCommit func(Change)
	// OnLost is called when a shared store finds that other cores took
	// this core for dead (it could not heartbeat for too long) and removed
	// its connections: the caller should Add its connections again. It
	// runs on a store goroutine and may call the store.
	OnLost func()
}

// Store holds presence for every room of a deployment. All methods may be
// called concurrently.
type Store interface {
	// Add counts one connection of user in room on this core. A non-nil
	// state replaces the user's state; a non-nil info replaces the user's
	// member info.
	Add(ctx context.Context, room, user string, state, info []byte) error
	// Remove uncounts one connection of user in room on this core. It is
	// a no-op when this core counts none (a sweep removed them).
	Remove(ctx context.Context, room, user string) error
	// SetState replaces the state of a present user.
	SetState(ctx context.Context, room, user string, state []byte) error
	// List reads a room's presence.
	List(ctx context.Context, room string) (Snapshot, error)
	// Watch makes sure OnChange receives room's changes from now on;
	// Unwatch stops it (a no-op for Memory).
	Watch(ctx context.Context, room string) error
	Unwatch(ctx context.Context, rooms ...string) error
	// Close stops the store's background work. Safe to call twice.
	Close() error
}

// ErrClosed is returned by calls on a closed store.
var ErrClosed = errors.New("presence: closed")
var (
	_ Store = (*Memory)(nil)
	_ Store = (*Redis)(nil)
)
