package presence

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
)

// Memory is a [Store] for one process. Changes reach OnChange and OnCommit
// synchronously, under the store's lock, in version order.
//
// A room is kept only while it has members: the last one leaving forgets
// it, and reads (List, SetState, Remove) of a room without members create
// nothing. Versions still never go back: a room is created at the highest
// version any forgotten room reached (floor), and List of a room without
// members reports that floor. A view of a forgotten room thus sees the
// next change as newer, after a gap it reads the room again for.
type Memory struct {
	opts Options

	mu     sync.Mutex // guards the following fields
	rooms  map[string]*memRoom
	floor  uint64 // the highest version of a forgotten room
	closed bool
}

type memRoom struct {
	members map[string]*Member
	version uint64
}

// NewMemory returns an empty store.
func NewMemory(opts Options) *Memory {
	return &Memory{opts: opts, rooms: make(map[string]*memRoom)}
}

func (m *Memory) room(name string) *memRoom {
	r := m.rooms[name]
	if r == nil {
		r = &memRoom{members: make(map[string]*Member), version: m.floor}
		m.rooms[name] = r
	}
	return r
}

// Len reports how many rooms the store holds (rooms with members).
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.rooms)
}

// commitLocked numbers a change and hands it out. Lock must be held.
func (m *Memory) commitLocked(room string, r *memRoom, k Kind, mem *Member) {
	r.version++
	ch := Change{Room: room, Kind: k, Member: Member{User: mem.User, State: mem.State, Info: mem.Info, Conns: mem.Conns}, Version: r.version}
	if m.opts.OnCommit != nil {
		m.opts.OnCommit(ch)
	}
	if m.opts.OnChange != nil {
		m.opts.OnChange(ch)
	}
}

// Add implements [Store.Add].
func (m *Memory) Add(_ context.Context, room, user string, state, info []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	r := m.room(room)
	mem := r.members[user]
	kind := Updated
	if mem == nil {
		mem = &Member{User: user}
		r.members[user] = mem
		kind = Joined
	}
	mem.Conns++
	if state != nil {
		mem.State = bytes.Clone(state)
	}
	if info != nil {
		mem.Info = bytes.Clone(info)
	}
	m.commitLocked(room, r, kind, mem)
	return nil
}

// Remove implements [Store.Remove].
func (m *Memory) Remove(_ context.Context, room, user string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	r := m.rooms[room]
	if r == nil || r.members[user] == nil {
		return nil
	}
	mem := r.members[user]
	mem.Conns--
	kind := Updated
	if mem.Conns <= 0 {
		mem.Conns = 0
		delete(r.members, user)
		kind = Left
	}
	m.commitLocked(room, r, kind, mem)
	if len(r.members) == 0 {
		// Forgotten; the floor keeps its version from going back.
		delete(m.rooms, room)
		m.floor = max(m.floor, r.version)
	}
	return nil
}

// SetState implements [Store.SetState].
func (m *Memory) SetState(_ context.Context, room, user string, state []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	r := m.rooms[room]
	if r == nil || r.members[user] == nil {
		return nil
	}
	mem := r.members[user]
	if bytes.Equal(mem.State, state) {
		return nil
	}
	mem.State = bytes.Clone(state)
	m.commitLocked(room, r, Updated, mem)
	return nil
}

// List implements [Store.List].
func (m *Memory) List(_ context.Context, room string) (Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Snapshot{}, ErrClosed
	}
	r := m.rooms[room]
	if r == nil {
		return Snapshot{Version: m.floor}, nil
	}
	out := Snapshot{Version: r.version, Members: make([]Member, 0, len(r.members))}
	for _, mem := range r.members {
		out.Members = append(out.Members, *mem)
	}
	sortMembers(out.Members)
	return out, nil
}

// Watch implements [Store.Watch]: Memory hands out every room's changes.
func (m *Memory) Watch(context.Context, string) error { return nil }

// Unwatch implements [Store.Unwatch].
func (m *Memory) Unwatch(context.Context, ...string) error { return nil }

// Close implements [Store.Close].
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

func sortMembers(ms []Member) {
	slices.SortFunc(ms, func(a, b Member) int { return strings.Compare(a.User, b.User) })
}
