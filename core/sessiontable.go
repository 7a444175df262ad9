package core

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// sessionTable holds the sessions attached to a connection on this core, by
// session id, and when each detached session lost its connection (for
// reconnect_duration_seconds). It is its own lock; callers never lock it
// from outside, and no other table's lock is ever held with it.
type sessionTable struct {
	// count follows len(live).
	count prometheus.Gauge

	mu   sync.Mutex // guards the following fields
	live map[string]*session
	// droppedAt is when each detached session lost its connection;
	// entries older than the session TTL are swept.
	droppedAt map[string]time.Time
}

func newSessionTable(count prometheus.Gauge) *sessionTable {
	return &sessionTable{
		count:     count,
		live:      make(map[string]*session),
		droppedAt: make(map[string]time.Time),
	}
}

// attach makes s the attached session of its id and returns the session it
// replaced, if any (the caller takes it over). When the session had lost
// its connection, dropped is when (reported once) and ok is true.
func (t *sessionTable) attach(s *session) (old *session, dropped time.Time, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old = t.live[s.id]
	t.live[s.id] = s
	if old == nil {
		t.count.Inc()
	}
	if dropped, ok = t.droppedAt[s.id]; ok {
		delete(t.droppedAt, s.id)
	}
	return old, dropped, ok
}

// detach removes s if it is still the attached session of its id, and
// reports whether it was. Unless clean, it records at as when the
// session lost its connection.
func (t *sessionTable) detach(s *session, clean bool, at time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	removed := t.live[s.id] == s
	if removed {
		delete(t.live, s.id)
		t.count.Dec()
	}
	if !clean {
		t.droppedAt[s.id] = at
	}
	return removed
}

// lookup returns the attached session with id, or nil.
func (t *sessionTable) lookup(id string) *session {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live[id]
}

// ofUser returns user's attached sessions, in no order.
func (t *sessionTable) ofUser(user string) []*session {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*session
	for _, s := range t.live {
		if s.user == user {
			out = append(out, s)
		}
	}
	return out
}

// all returns the attached sessions, in no order. A session may detach as
// soon as all returns.
func (t *sessionTable) all() []*session {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*session, 0, len(t.live))
	for _, s := range t.live {
		out = append(out, s)
	}
	return out
}

// sweep forgets when the sessions that lost their connection before
// expired did (they have expired) and returns how many it forgot.
func (t *sessionTable) sweep(expired time.Time) int {
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
