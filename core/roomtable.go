package core

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// roomTable holds the rooms this core uses, by name, and forgets a room as
// soon as nobody uses it: no member, no join and no publish in flight. It
// is its own lock; callers never lock it from outside.
//
// Lock order: the table's lock may take a room's lock (room.Empty), the
// history store's hold (roomHolder) and the subscription's lock
// (dropUnheld); none of those ever calls back into the table. No other
// table's lock is ever held with it.
type roomTable struct {
	// create builds a room the table did not hold.
	create func(name string) *room
	// hold, when not nil, is held exactly while a room is in the table
	// (see roomHolder).
	hold roomHolder
	// count follows len(rooms).
	count prometheus.Gauge

	mu sync.Mutex // guards the following fields
	// rooms holds rooms that have members or work in flight.
	rooms map[string]*room
	// refs counts the references acquire took on each room and release
	// has not dropped; a room without any is not in it.
	refs map[*room]int
}

func newRoomTable(create func(name string) *room, hold roomHolder, count prometheus.Gauge) *roomTable {
	return &roomTable{create: create, hold: hold, count: count, rooms: make(map[string]*room), refs: make(map[*room]int)}
}

// acquire returns the room for name, creating it when the table did not
// hold it, and takes a reference on it: the room stays until release.
func (t *roomTable) acquire(name string) *room {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.rooms[name]
	if !ok {
		r = t.create(name)
		t.rooms[name] = r
		t.count.Inc()
		if t.hold != nil {
			t.hold.Hold(name)
		}
	}
	t.refs[r]++
	return r
}

// release drops a reference taken by acquire and forgets r when nothing
// uses it.
func (t *roomTable) release(r *room) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := t.refs[r] - 1; n > 0 {
		t.refs[r] = n
	} else {
		delete(t.refs, r)
	}
	t.forgetLocked(r)
}

// forgetIdle forgets r if nothing uses it: called when a member left,
// which holds no reference of its own.
func (t *roomTable) forgetIdle(r *room) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forgetLocked(r)
}

// forgetLocked forgets r when it has no reference, no member and no join.
// Lock must be held.
func (t *roomTable) forgetLocked(r *room) {
	if t.refs[r] > 0 {
		return
	}
	if r.Empty() && t.rooms[r.Name()] == r {
		delete(t.rooms, r.Name())
		t.count.Dec()
		if t.hold != nil {
			t.hold.Release(r.Name())
		}
	}
}

// get returns the room for name, or nil when the table does not hold it.
func (t *roomTable) get(name string) *room {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rooms[name]
}

// all returns the rooms the table holds, in no order. A room may be
// forgotten as soon as all returns.
func (t *roomTable) all() []*room {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*room, 0, len(t.rooms))
	for _, r := range t.rooms {
		out = append(out, r)
	}
	return out
}

// len reports how many rooms the table holds.
func (t *roomTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.rooms)
}

// dropUnheld calls removeIf, under the table's lock, with a function that
// reports the rooms the table does not hold, and returns what removeIf
// returns. Under the lock: a room acquired after the decision is added
// after it (history.Subscription.RemoveIf). removeIf must not block.
func (t *roomTable) dropUnheld(removeIf func(gone func(room string) bool) int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return removeIf(func(room string) bool {
		_, ok := t.rooms[room]
		return !ok
	})
}
