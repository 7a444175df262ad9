// Package sessiontable holds the sessions attached to a connection on one
// core, by session id, and when each detached session lost its connection
// (for reconnect_duration_seconds). The core keeps one [Table] of its
// sessions; it knows a session only by [Session] (its id and user).
//
// # Concurrency
//
// A [Table] is its own lock: its methods are safe for concurrent use,
// callers never lock it from outside, and it takes no other lock, so no
// other table's lock is ever held with it.
package sessiontable

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Session is what a Table knows of a session: its id (the table's key)
// and its user. A Table compares sessions by identity, so S is a pointer.
type Session interface {
	comparable
	SessionID() string
	UserID() string
}

// Table holds the sessions attached to a connection by id, and when each
// detached one lost its connection.
type Table[S Session] struct {
	// count follows len(live).
	count prometheus.Gauge

	mu   sync.Mutex // guards the following fields
	live map[string]S
	// droppedAt is when each detached session lost its connection;
	// entries older than the session TTL are swept, and at maxDropped
	// the oldest sixteenth goes (forgotten counts them).
	droppedAt  map[string]time.Time
	maxDropped int
	forgotten  uint64
}

// MaxDropped bounds the detached sessions a Table remembers the drop time
// of: a client reconnecting in a loop makes one a connection, kept for
// the session TTL. Past it the oldest are forgotten (their reconnect is
// not measured).
const MaxDropped = 1 << 20

// New returns an empty Table whose count gauge follows how many sessions
// it holds.
func New[S Session](count prometheus.Gauge) *Table[S] {
	return &Table[S]{
		count:      count,
		live:       make(map[string]S),
		droppedAt:  make(map[string]time.Time),
		maxDropped: MaxDropped,
	}
}

// Forgotten is how many drop times were forgotten before the session
// expired, at MaxDropped.
func (t *Table[S]) Forgotten() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.forgotten
}

// makeRoomLocked forgets the oldest sixteenth of droppedAt (at least one)
// when it is at maxDropped: the sort's cost is spread over the detaches
// that fill that room again. t.mu must be held.
func (t *Table[S]) makeRoomLocked() {
	if len(t.droppedAt) < t.maxDropped {
		return
	}
	type cand struct {
		id string
		at time.Time
	}
	cands := make([]cand, 0, len(t.droppedAt))
	for id, at := range t.droppedAt {
		cands = append(cands, cand{id, at})
	}
	slices.SortFunc(cands, func(a, b cand) int { return a.at.Compare(b.at) })
	n := min(max(len(cands)-t.maxDropped+1, len(cands)/16, 1), len(cands))
	for _, c := range cands[:n] {
		delete(t.droppedAt, c.id)
	}
	t.forgotten += uint64(n)
}

// Attach makes s the attached session of its id and returns the session
// it replaced, if any (the caller takes it over; otherwise old is the zero
// S). When the session had lost its connection, dropped is when (reported
// once) and ok is true.
func (t *Table[S]) Attach(s S) (old S, dropped time.Time, ok bool) {
	id := s.SessionID()
	t.mu.Lock()
	defer t.mu.Unlock()
	old, had := t.live[id]
	t.live[id] = s
	if !had {
		t.count.Inc()
	}
	if dropped, ok = t.droppedAt[id]; ok {
		delete(t.droppedAt, id)
	}
	return old, dropped, ok
}

// Detach removes s if it is still the attached session of its id, and
// reports whether it was. Unless clean, it records at as when the
// session lost its connection.
func (t *Table[S]) Detach(s S, clean bool, at time.Time) bool {
	id := s.SessionID()
	t.mu.Lock()
	defer t.mu.Unlock()
	cur, had := t.live[id]
	removed := had && cur == s
	if removed {
		delete(t.live, id)
		t.count.Dec()
	}
	if !clean {
		if _, ok := t.droppedAt[id]; !ok {
			t.makeRoomLocked()
		}
		t.droppedAt[id] = at
	}
	return removed
}

// Lookup returns the attached session with id, or the zero S.
func (t *Table[S]) Lookup(id string) S {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live[id]
}

// OfUser returns user's attached sessions, in no order.
func (t *Table[S]) OfUser(user string) []S {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []S
	for _, s := range t.live {
		if s.UserID() == user {
			out = append(out, s)
		}
	}
	return out
}

// All returns the attached sessions, in no order. A session may detach as
// soon as All returns.
func (t *Table[S]) All() []S {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]S, 0, len(t.live))
	for _, s := range t.live {
		out = append(out, s)
	}
	return out
}

// Sweep forgets when the sessions that lost their connection before
// expired did (they have expired) and returns how many it forgot.
func (t *Table[S]) Sweep(expired time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for id, at := range t.droppedAt {
		if at.Before(expired) {
			delete(t.droppedAt, id)
			n++
		}
	}
	return n
}
