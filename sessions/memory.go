package sessions

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// Memory is a [Store] in process memory. Expired sessions are dropped on
// access and by a sweep goroutine that Close stops. Acks are applied at
// once, so Flush does nothing. All methods may be called concurrently.
type Memory struct {
	ttl  time.Duration
	max  int // MaxSessions
	stop chan struct{}
	done chan struct{}
	once sync.Once

	mu       sync.Mutex // guards the following fields
	sessions map[string]*memSession
	closed   bool
	evicted  uint64 // sessions dropped unexpired for MaxSessions
}

type memSession struct {
	tokenHash [sha256.Size]byte
	// prevHash is the token the last resume consumed, still good until
	// tokenHash is used (see Store.Resume); zero when none.
	prevHash [sha256.Size]byte
	hasPrev  bool
	userID   string
	created  time.Time
	rooms    map[string]Position
	expires  time.Time
	attempt  Attempt // the last ordered attempt that resumed it
}

// NewMemory returns an empty store and starts its sweep goroutine.
func NewMemory(opts Options) *Memory {
	opts = opts.withDefaults()
	m := &Memory{
		ttl:      opts.TTL,
		max:      opts.MaxSessions,
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		sessions: make(map[string]*memSession),
	}
	go m.sweep(min(max(opts.TTL/2, 10*time.Millisecond), time.Minute))
	return m
}

func (m *Memory) sweep(every time.Duration) {
	defer close(m.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case now := <-t.C:
			m.mu.Lock()
			for id, s := range m.sessions {
				if !now.Before(s.expires) {
					delete(m.sessions, id)
				}
			}
			m.mu.Unlock()
		}
	}
}

// get returns the live session id. Lock must be held.
func (m *Memory) get(id string) (*memSession, error) {
	if m.closed {
		return nil, errClosed
	}
	s, ok := m.sessions[id]
	if !ok {
		return nil, ErrNotFound
	}
	if !time.Now().Before(s.expires) {
		delete(m.sessions, id)
		return nil, ErrNotFound
	}
	return s, nil
}

// Create implements [Store.Create].
func (m *Memory) Create(_ context.Context, userID string) (*Session, error) {
	id, token := newSecrets()
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("sessions: create: %w", errClosed)
	}
	if len(m.sessions) >= m.max {
		m.makeRoomLocked(now)
	}
	m.sessions[id] = &memSession{
		tokenHash: tokenHash(token),
		userID:    userID,
		created:   now,
		rooms:     make(map[string]Position),
		expires:   now.Add(m.ttl),
	}
	return &Session{ID: id, Token: token, UserID: userID, Rooms: map[string]Position{}, Created: now}, nil
}

// makeRoomLocked makes room for a session at MaxSessions: it drops the
// expired sessions, then, if still at the bound, the sixteenth of them
// that would expire soonest (at least one), so that the cost of a sort is
// spread over the creates that fill that room again. Lock must be held.
func (m *Memory) makeRoomLocked(now time.Time) {
	for id, s := range m.sessions {
		if !now.Before(s.expires) {
			delete(m.sessions, id)
		}
	}
	if len(m.sessions) < m.max {
		return
	}
	type cand struct {
		id      string
		expires time.Time
	}
	cands := make([]cand, 0, len(m.sessions))
	for id, s := range m.sessions {
		cands = append(cands, cand{id, s.expires})
	}
	slices.SortFunc(cands, func(a, b cand) int { return a.expires.Compare(b.expires) })
	n := max(len(cands)-m.max+1, len(cands)/16, 1)
	for _, c := range cands[:min(n, len(cands))] {
		delete(m.sessions, c.id)
	}
	m.evicted += uint64(min(n, len(cands)))
}

// Len is how many sessions the store holds (expired ones not yet swept
// included).
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sessions)
}

// MemoryDrop is why a [Memory] dropped a session before it expired; its
// names are [MemoryDropNames].
type MemoryDrop uint8

const (
	// DroppedMaxSessions: a session that would expire soonest, dropped
	// for a new one at MaxSessions.
	DroppedMaxSessions MemoryDrop = iota
	NumMemoryDrops
)

// MemoryDropNames are the label values of each [MemoryDrop]
// (corral_sessions_memory_dropped_total{reason}).
var MemoryDropNames = [NumMemoryDrops]string{
	DroppedMaxSessions: "max_sessions",
}

// Evicted is how many sessions were dropped before they expired, to stay
// within MaxSessions.
func (m *Memory) Evicted() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.evicted
}

// Resume implements [Store.Resume].
func (m *Memory) Resume(_ context.Context, id, token, userID string, at Attempt) (*Session, error) {
	h := tokenHash(token)
	_, next := newSecrets()
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.get(id)
	if err != nil {
		return nil, fmt.Errorf("sessions: resume: %w", err)
	}
	// Authorize first: a refused resume changes nothing.
	cur := subtle.ConstantTimeCompare(h[:], s.tokenHash[:]) == 1
	prev := s.hasPrev && subtle.ConstantTimeCompare(h[:], s.prevHash[:]) == 1
	switch {
	case !cur && !prev:
		return nil, fmt.Errorf("sessions: resume: %w", ErrTokenMismatch)
	case s.userID != userID:
		return nil, fmt.Errorf("sessions: resume: %w", ErrUserMismatch)
	case at.ordered() && at.Instance == s.attempt.Instance && at.N <= s.attempt.N:
		return nil, fmt.Errorf("sessions: resume: %w", ErrStale)
	}
	if at.ordered() {
		s.attempt = at
	}
	// Presenting the current token kills its predecessor; presenting the
	// predecessor kills the current one, which its client never saw.
	s.prevHash, s.hasPrev = h, true
	s.tokenHash = tokenHash(next)
	s.expires = time.Now().Add(m.ttl)
	return &Session{ID: id, Token: next, UserID: s.userID, Rooms: maps.Clone(s.rooms), Created: s.created}, nil
}

// TouchLater implements [Store.TouchLater]: a Touch at once.
func (m *Memory) TouchLater(id string) { _ = m.Touch(context.Background(), id) }

// Touch implements [Store.Touch].
func (m *Memory) Touch(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.get(id)
	if err != nil {
		return fmt.Errorf("sessions: touch: %w", err)
	}
	s.expires = time.Now().Add(m.ttl)
	return nil
}

// SetRoom implements [Store.SetRoom].
func (m *Memory) SetRoom(_ context.Context, id, room string, pos Position) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.get(id)
	if err != nil {
		return fmt.Errorf("sessions: set room %q: %w", room, err)
	}
	s.rooms[room] = pos
	return nil
}

// SetRooms implements [Store.SetRooms].
func (m *Memory) SetRooms(_ context.Context, id string, rooms map[string]Position) error {
	if len(rooms) == 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.get(id)
	if err != nil {
		return fmt.Errorf("sessions: set %d rooms: %w", len(rooms), err)
	}
	for room, pos := range rooms {
		s.rooms[room] = pos
	}
	return nil
}

// DeleteRoom implements [Store.DeleteRoom].
func (m *Memory) DeleteRoom(_ context.Context, id, room string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.get(id)
	if err != nil {
		return fmt.Errorf("sessions: delete room %q: %w", room, err)
	}
	delete(s.rooms, room)
	return nil
}

// Ack implements [Store.Ack].
func (m *Memory) Ack(_ context.Context, id, room string, seq uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, err := m.get(id)
	if err == errClosed {
		return fmt.Errorf("sessions: ack: %w", err)
	}
	if err != nil {
		return nil
	}
	if pos, ok := s.rooms[room]; ok && seq > pos.Seq {
		pos.Seq = seq
		s.rooms[room] = pos
	}
	return nil
}

// Flush implements [Store.Flush]; Memory has nothing to flush.
func (m *Memory) Flush(context.Context) error { return nil }

// Delete implements [Store.Delete].
func (m *Memory) Delete(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("sessions: delete: %w", errClosed)
	}
	delete(m.sessions, id)
	return nil
}

// Close implements [Store.Close].
func (m *Memory) Close() error {
	m.once.Do(func() {
		m.mu.Lock()
		m.closed = true
		m.mu.Unlock()
		close(m.stop)
		<-m.done
	})
	return nil
}
