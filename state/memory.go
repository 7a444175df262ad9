package state

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// MemoryOptions configures [NewMemory]. Zero fields mean defaults.
type MemoryOptions struct {
	// Limits gives a room its bounds (its room class); zero fields, or a
	// nil func, mean the defaults of [Limits].
	Limits func(room string) Limits
	// Now is the clock TTLs are measured on; default time.Now. Tests
	// inject one to expire keys deterministically.
	Now func() time.Time
	// TTL is how long a room's state lives after its last write, as
	// [RedisOptions.TTL]; default 24h. A room past it is forgotten and
	// comes back empty under a new epoch.
	TTL time.Duration
}

// Memory is a [Store] in process memory. A room's state lives TTL after
// its last write; a restart starts every room over under a new epoch.
type Memory struct {
	limits func(room string) Limits
	now    func() time.Time
	ttl    time.Duration
	closed atomic.Bool
	salt   [16]byte // random: a room's epoch is a hash of it, a generation and its name

	mu sync.Mutex // guards the following fields (the map, not the rooms)
	// rooms by name
	rooms map[string]*memRoom
	// gen counts rooms forgotten: an epoch names the generation it was
	// made in, so a room forgotten and written again gets a new one.
	gen uint64
	// nextSweep is when the rooms past their lifetime are looked for next.
	nextSweep time.Time
}

type memRoom struct {
	mu      sync.Mutex // guards the following fields
	epoch   string
	pos     uint64
	keys    map[string]*Entry
	changes []Change // the newest, oldest first; at most MaxChanges
	// next is the earliest deadline of a key, zero for none.
	next time.Time
	// written is the time of the last write; dead: forgotten (a caller
	// that found it before must look the room up again).
	written time.Time
	dead    bool
}

// NewMemory returns an empty in-process store.
func NewMemory(opts MemoryOptions) *Memory {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.TTL <= 0 {
		opts.TTL = 24 * time.Hour
	}
	m := &Memory{limits: opts.Limits, now: opts.Now, ttl: opts.TTL, rooms: map[string]*memRoom{}}
	_, _ = rand.Read(m.salt[:]) // never fails
	return m
}

func (m *Memory) limitsOf(room string) Limits {
	if m.limits == nil {
		return defaultLimits
	}
	return m.limits(room).withDefaults(defaultLimits)
}

// lock returns room's state, locked, with its due expiries applied. With
// create false it returns nil for a room never written: reads create
// nothing, so that made-up room names cost nothing.
func (m *Memory) lock(room string, create bool) (*memRoom, Limits, error) {
	if m.closed.Load() {
		return nil, Limits{}, errClosed
	}
	m.sweep()
	l := m.limitsOf(room)
	for {
		m.mu.Lock()
		r := m.rooms[room]
		if r == nil && create {
			r = &memRoom{epoch: m.epochLocked(room), keys: map[string]*Entry{}}
			m.rooms[room] = r
		}
		m.mu.Unlock()
		if r == nil {
			return nil, Limits{}, nil
		}
		r.mu.Lock()
		if r.dead {
			r.mu.Unlock()
			continue
		}
		now := m.now()
		if !r.written.IsZero() && now.Sub(r.written) >= m.ttl {
			m.forget(room, r)
			r.mu.Unlock()
			continue
		}
		r.expireLocked(now, l)
		if create {
			r.written = now
		}
		return r, l, nil
	}
}

// forget removes r, which is locked, and moves the generation on.
func (m *Memory) forget(room string, r *memRoom) {
	r.dead = true
	m.mu.Lock()
	if m.rooms[room] == r {
		delete(m.rooms, room)
	}
	m.gen++
	m.mu.Unlock()
}

// sweep forgets the rooms past their lifetime, at most every quarter
// TTL (and every minute), so that rooms nobody writes cost nothing after
// it; no goroutine is needed.
func (m *Memory) sweep() {
	now := m.now()
	m.mu.Lock()
	if now.Before(m.nextSweep) {
		m.mu.Unlock()
		return
	}
	m.nextSweep = now.Add(min(m.ttl/4, time.Minute))
	old := make([]string, 0, len(m.rooms))
	for name := range m.rooms {
		old = append(old, name)
	}
	m.mu.Unlock()
	for _, name := range old {
		m.mu.Lock()
		r := m.rooms[name]
		m.mu.Unlock()
		if r == nil {
			continue
		}
		r.mu.Lock()
		if !r.dead && now.Sub(r.written) >= m.ttl {
			m.forget(name, r)
		}
		r.mu.Unlock()
	}
}

// epochLocked is room's epoch: the same before and after its first write,
// another after a room was forgotten (the generation moved on) and in
// another store (a restart). m.mu must be held.
func (m *Memory) epochLocked(room string) string {
	h := sha256.New()
	h.Write(m.salt[:])
	h.Write(binary.BigEndian.AppendUint64(nil, m.gen))
	h.Write([]byte(room))
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// addLocked appends c at the room's next position. Lock must be held.
func (r *memRoom) addLocked(c Change, l Limits) Change {
	r.pos++
	c.Position = r.pos
	r.changes = append(r.changes, c)
	if over := len(r.changes) - l.MaxChanges; over > 0 {
		r.changes = slices.Delete(r.changes, 0, over)
	}
	return c
}

// expireLocked removes the keys whose deadline is at or before now, in
// deadline order (then key order), each as a change. Lock must be held.
func (r *memRoom) expireLocked(now time.Time, l Limits) {
	if r.next.IsZero() || now.Before(r.next) {
		return
	}
	var due []*Entry
	for _, e := range r.keys {
		if !e.Expires.IsZero() && !now.Before(e.Expires) {
			due = append(due, e)
		}
	}
	slices.SortFunc(due, func(a, b *Entry) int {
		return cmp.Or(a.Expires.Compare(b.Expires), cmp.Compare(a.Key, b.Key))
	})
	for _, e := range due {
		delete(r.keys, e.Key)
		r.addLocked(Change{Key: e.Key, Version: e.Version, Deleted: true, Expired: true}, l)
	}
	r.next = time.Time{}
	for _, e := range r.keys {
		if !e.Expires.IsZero() && (r.next.IsZero() || e.Expires.Before(r.next)) {
			r.next = e.Expires
		}
	}
}

// Set implements [Store.Set].
func (m *Memory) Set(_ context.Context, room string, s Set) (Result, error) {
	if err := checkKey(room, s.Key); err != nil {
		return Result{}, fmt.Errorf("state: set %q in %q: %w", s.Key, room, err)
	}
	r, l, err := m.lock(room, true)
	if err != nil {
		return Result{}, err
	}
	defer r.mu.Unlock()
	if len(s.Value) > l.MaxValue {
		return Result{}, fmt.Errorf("state: set %q in %q: %d bytes, at most %d: %w", s.Key, room, len(s.Value), l.MaxValue, ErrTooLarge)
	}
	old := r.keys[s.Key]
	var version uint64
	if old != nil {
		version = old.Version
	}
	if s.CAS && s.Version != version {
		return Result{}, fmt.Errorf("state: set %q in %q: version %d, not %d: %w", s.Key, room, version, s.Version, ErrConflict)
	}
	if old == nil && len(r.keys) >= l.MaxKeys {
		return Result{}, fmt.Errorf("state: set %q in %q: %d keys: %w", s.Key, room, l.MaxKeys, ErrTooManyKeys)
	}
	e := &Entry{Key: s.Key, Value: slices.Clone(s.Value), Version: version + 1}
	if s.TTL > 0 {
		e.Expires = m.now().Add(s.TTL)
		if r.next.IsZero() || e.Expires.Before(r.next) {
			r.next = e.Expires
		}
	}
	r.keys[s.Key] = e
	c := r.addLocked(Change{Key: s.Key, Value: e.Value, Version: e.Version, Expires: e.Expires}, l)
	return Result{Version: e.Version, Position: c.Position, Epoch: r.epoch, Existed: old != nil}, nil
}

// Delete implements [Store.Delete].
func (m *Memory) Delete(_ context.Context, room, key string, cas bool, version uint64) (Result, error) {
	if err := checkKey(room, key); err != nil {
		return Result{}, fmt.Errorf("state: delete %q in %q: %w", key, room, err)
	}
	r, l, err := m.lock(room, false)
	if err != nil {
		return Result{}, err
	}
	if r == nil {
		if cas && version != 0 {
			return Result{}, fmt.Errorf("state: delete %q in %q: version 0, not %d: %w", key, room, version, ErrConflict)
		}
		return Result{}, nil
	}
	defer r.mu.Unlock()
	old := r.keys[key]
	var have uint64
	if old != nil {
		have = old.Version
	}
	if cas && version != have {
		return Result{}, fmt.Errorf("state: delete %q in %q: version %d, not %d: %w", key, room, have, version, ErrConflict)
	}
	if old == nil {
		return Result{Position: r.pos, Epoch: r.epoch}, nil
	}
	delete(r.keys, key)
	r.written = m.now()
	c := r.addLocked(Change{Key: key, Version: old.Version, Deleted: true}, l)
	return Result{Position: c.Position, Epoch: r.epoch, Existed: true}, nil
}

// Snapshot implements [Store.Snapshot].
func (m *Memory) Snapshot(_ context.Context, room string) (Snapshot, error) {
	r, _, err := m.lock(room, false)
	if err != nil {
		return Snapshot{}, err
	}
	if r == nil {
		return Snapshot{}, nil // never written (or forgotten): empty, no epoch
	}
	defer r.mu.Unlock()
	s := Snapshot{Epoch: r.epoch, Position: r.pos, NextExpiry: r.next, Entries: make([]Entry, 0, len(r.keys))}
	for _, e := range r.keys {
		s.Entries = append(s.Entries, *e)
	}
	slices.SortFunc(s.Entries, func(a, b Entry) int { return cmp.Compare(a.Key, b.Key) })
	return s, nil
}

// Since implements [Store.Since].
func (m *Memory) Since(_ context.Context, room, epoch string, position uint64, maxBytes int) ([]Change, error) {
	r, _, err := m.lock(room, false)
	if err != nil {
		return nil, err
	}
	if r == nil {
		r = &memRoom{} // never written (or forgotten): empty, no epoch
	} else {
		defer r.mu.Unlock()
	}
	if (epoch != r.epoch && (epoch != "" || position != 0)) || position > r.pos {
		return nil, fmt.Errorf("state: changes of %q after %s/%d (now %s/%d): %w", room, epoch, position, r.epoch, r.pos, ErrTooOld)
	}
	if position == r.pos {
		return nil, nil
	}
	first := r.pos - uint64(len(r.changes)) + 1 // the oldest kept
	if position+1 < first {
		return nil, fmt.Errorf("state: changes of %q after %d: oldest kept is %d: %w", room, position, first, ErrTooOld)
	}
	after := r.changes[position+1-first:]
	if maxBytes > 0 {
		size := 0
		for _, c := range after {
			if size += ChangeSize(c); size > maxBytes {
				return nil, fmt.Errorf("state: changes of %q after %d: more than %d bytes: %w", room, position, maxBytes, ErrTooOld)
			}
		}
	}
	return slices.Clone(after), nil
}

// Expire implements [Store.Expire].
func (m *Memory) Expire(_ context.Context, room string) (time.Time, error) {
	r, _, err := m.lock(room, false)
	if err != nil || r == nil {
		return time.Time{}, err
	}
	defer r.mu.Unlock()
	return r.next, nil
}

// Close implements [Store.Close].
func (m *Memory) Close() error {
	m.closed.Store(true)
	return nil
}

// Len reports how many rooms the store holds.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.rooms)
}
