package client

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/corral-rt/corral/delta"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// ErrStateStale is returned by State.Change for a change that does not
// follow what the view holds: another epoch, a gap in positions, or a
// delta against a version the view does not hold. Nothing changes; the
// view needs a new snapshot (rejoin the room; docs/STATE.md).
var ErrStateStale = errors.New("client: room state: snapshot needed")

// StateEntry is one key of a room's state as a member holds it.
type StateEntry struct {
	Value   []byte
	Version uint64
	// ExpiresMs: when the server removes the key, milliseconds since the
	// Unix epoch (0: never). The removal arrives as a change.
	ExpiresMs int64
}

// State is a member's view of one room's keyed state (docs/STATE.md): a
// snapshot, then each change in position order. A change at or below the
// view's position is a duplicate (a resume replays), ignored.
//
// A State is not safe for concurrent use: feed it from the goroutine that
// reads the frames.
type State struct {
	Room     string
	Epoch    string
	Position uint64
	// Ready: a snapshot was applied.
	Ready   bool
	entries map[string]StateEntry
}

// NewState returns an empty view of room's state, waiting for a snapshot.
func NewState(room string) *State {
	return &State{Room: room, entries: make(map[string]StateEntry)}
}

// Snapshot replaces the view with s.
func (st *State) Snapshot(s *corralv1.StateSnapshot) {
	st.entries = make(map[string]StateEntry, len(s.GetEntries()))
	for _, e := range s.GetEntries() {
		st.entries[e.GetKey()] = StateEntry{Value: e.GetValue(), Version: e.GetVersion(), ExpiresMs: e.GetExpiresMs()}
	}
	st.Epoch, st.Position, st.Ready = s.GetEpoch(), s.GetPosition(), true
}

// Change applies c, reporting whether it changed the view (false: a
// duplicate). A delta is applied to the key's value at version-1.
func (st *State) Change(c *corralv1.StateChange) (bool, error) {
	if !st.Ready && c.GetPosition() == 1 && st.Epoch == "" && st.Position == 0 {
		// The first change of a room never written before: the server
		// sends no snapshot of the empty state; this change begins it.
		st.Ready = true
	}
	if !st.Ready {
		return false, fmt.Errorf("%w: change at position %d before a snapshot", ErrStateStale, c.GetPosition())
	}
	// The empty state (position 0 of the empty epoch) continues into the
	// epoch its first write opens.
	fresh := st.Epoch == "" && st.Position == 0
	if c.GetEpoch() != st.Epoch && !fresh {
		return false, fmt.Errorf("%w: change of epoch %q, holding %q", ErrStateStale, c.GetEpoch(), st.Epoch)
	}
	if c.GetPosition() <= st.Position {
		return false, nil
	}
	if c.GetPosition() != st.Position+1 {
		return false, fmt.Errorf("%w: change at position %d after %d", ErrStateStale, c.GetPosition(), st.Position)
	}
	key := c.GetKey()
	switch {
	case c.GetDeleted():
		delete(st.entries, key)
	case len(c.GetDelta()) > 0:
		old, ok := st.entries[key]
		if !ok || old.Version+1 != c.GetVersion() {
			return false, fmt.Errorf("%w: a delta to version %d of %q, holding version %d", ErrStateStale, c.GetVersion(), key, old.Version)
		}
		v, err := delta.Apply(old.Value, c.GetDelta(), 0)
		if err != nil {
			return false, fmt.Errorf("client: room state %q version %d: %w", key, c.GetVersion(), err)
		}
		st.entries[key] = StateEntry{Value: v, Version: c.GetVersion(), ExpiresMs: c.GetExpiresMs()}
	default:
		st.entries[key] = StateEntry{Value: c.GetValue(), Version: c.GetVersion(), ExpiresMs: c.GetExpiresMs()}
	}
	st.Epoch, st.Position = c.GetEpoch(), c.GetPosition()
	return true, nil
}

// Get returns key's entry.
func (st *State) Get(key string) (StateEntry, bool) {
	e, ok := st.entries[key]
	return e, ok
}

// Keys returns the keys held, sorted.
func (st *State) Keys() []string { return slices.Sorted(maps.Keys(st.entries)) }
