package history

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/corral-rt/corral/events"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// MemoryOptions configures [NewMemory]. Zero fields mean defaults.
type MemoryOptions struct {
	// MaxLen is how many messages each room retains; default 1000.
	MaxLen int
	// DedupeWindow is how long a dedupe key is remembered; default 2m.
	DedupeWindow time.Duration
	// Events, when set, receives the event of every appended message in
	// the same step as the append, in seq order per room.
	Events *events.Memory
}

// Memory is a [Store] in process memory: a ring buffer per room. Its epochs
// are random per room and process, so a restart resets every room. Rooms are
// kept until the store is dropped. All methods may be called concurrently.
type Memory struct {
	maxLen int
	window time.Duration
	events *events.Memory // nil: no event log
	rooms  sync.Map       // room name → *memRoom
}

// NewMemory returns an empty in-process store.
func NewMemory(opts MemoryOptions) *Memory {
	if opts.MaxLen <= 0 {
		opts.MaxLen = 1000
	}
	if opts.DedupeWindow <= 0 {
		opts.DedupeWindow = 2 * time.Minute
	}
	return &Memory{maxLen: opts.MaxLen, window: opts.DedupeWindow, events: opts.Events}
}

// Events returns the log that receives the store's message events, or nil.
func (m *Memory) Events() events.Log {
	if m.events == nil {
		return nil
	}
	return m.events
}

type memRoom struct {
	epoch string

	mu sync.Mutex // guards the following fields
	// buf holds the retained messages; it grows to maxLen, then wraps.
	// head is the index of the oldest, n how many are retained.
	buf     []*corralv1.Message
	head, n int
	last    uint64
	dedupe  map[string]uint64
	expiry  []dedupeExpiry // in expiry order; expiry[qhead:] is live
	qhead   int
}

type dedupeExpiry struct {
	key string
	at  time.Time
}

func (m *Memory) room(name string) *memRoom {
	if r, ok := m.rooms.Load(name); ok {
		return r.(*memRoom)
	}
	r, _ := m.rooms.LoadOrStore(name, &memRoom{epoch: newEpoch()})
	return r.(*memRoom)
}

// Append implements [Store.Append].
func (m *Memory) Append(_ context.Context, room string, msg *corralv1.Message, dedupeKey string) (AppendResult, error) {
	if err := checkAppend(room, msg); err != nil {
		return AppendResult{}, err
	}
	r := m.room(room)
	r.mu.Lock()
	defer r.mu.Unlock()
	var now time.Time
	if dedupeKey != "" {
		now = time.Now()
		r.expireDedupe(now)
		if seq, ok := r.dedupe[dedupeKey]; ok {
			msg.Seq = seq
			return AppendResult{Seq: seq, Epoch: r.epoch, Duplicate: true}, nil
		}
	}
	r.last++
	msg.Seq = r.last
	if len(r.buf) < m.maxLen {
		r.buf = append(r.buf, msg)
		r.n++
	} else {
		// Full: overwrite the oldest.
		r.buf[r.head] = msg
		r.head++
		if r.head == len(r.buf) {
			r.head = 0
		}
	}
	if dedupeKey != "" {
		if r.dedupe == nil {
			r.dedupe = make(map[string]uint64)
		}
		r.dedupe[dedupeKey] = r.last
		r.expiry = append(r.expiry, dedupeExpiry{key: dedupeKey, at: now.Add(m.window)})
	}
	if m.events != nil {
		m.events.CommitMessage(msg)
	}
	return AppendResult{Seq: r.last, Epoch: r.epoch}, nil
}

// expireDedupe forgets dedupe keys older than the window. Lock must be held.
func (r *memRoom) expireDedupe(now time.Time) {
	for r.qhead < len(r.expiry) && !now.Before(r.expiry[r.qhead].at) {
		delete(r.dedupe, r.expiry[r.qhead].key)
		r.expiry[r.qhead] = dedupeExpiry{}
		r.qhead++
	}
	if r.qhead == len(r.expiry) {
		r.expiry, r.qhead = r.expiry[:0], 0
	} else if r.qhead >= 1024 && r.qhead*2 >= len(r.expiry) {
		n := copy(r.expiry, r.expiry[r.qhead:])
		clear(r.expiry[n:])
		r.expiry, r.qhead = r.expiry[:n], 0
	}
}

// state returns the room's state. Lock must be held.
func (r *memRoom) state() State {
	s := State{Epoch: r.epoch, Last: r.last}
	if r.n > 0 {
		s.First = r.last - uint64(r.n) + 1
	}
	return s
}

// at returns the retained message with the given seq. Lock must be held.
func (r *memRoom) at(seq uint64, first uint64) *corralv1.Message {
	i := r.head + int(seq-first)
	if i >= len(r.buf) {
		i -= len(r.buf)
	}
	return r.buf[i]
}

// Read implements [Store.Read].
func (m *Memory) Read(_ context.Context, q Query) (Page, error) {
	if q.Room == "" {
		return Page{}, errEmptyRoom
	}
	r := m.room(q.Room)
	r.mu.Lock()
	defer r.mu.Unlock()
	p := Page{State: r.state()}
	if r.n == 0 {
		return p, nil
	}
	first, last, limit := p.First, p.Last, uint64(pageLimit(q.Limit))
	if !q.Reverse {
		from := max(q.After+1, first)
		if from > last {
			return p, nil
		}
		to := last
		if to-from+1 > limit {
			to = from + limit - 1
			p.More = true
		}
		p.Messages = make([]*corralv1.Message, 0, to-from+1)
		for s := from; s <= to; s++ {
			p.Messages = append(p.Messages, r.at(s, first))
		}
		return p, nil
	}
	to := last
	if q.Before != 0 {
		if q.Before <= first {
			return p, nil
		}
		to = min(q.Before-1, last)
	}
	from := first
	if to-from+1 > limit {
		from = to - limit + 1
		p.More = true
	}
	p.Messages = make([]*corralv1.Message, 0, to-from+1)
	for s := to; s >= from; s-- {
		p.Messages = append(p.Messages, r.at(s, first))
	}
	return p, nil
}

// ReadMany implements [Store.ReadMany].
func (m *Memory) ReadMany(ctx context.Context, qs []Query) ([]Page, error) {
	pages := make([]Page, len(qs))
	for i, q := range qs {
		var err error
		if pages[i], err = m.Read(ctx, q); err != nil {
			return nil, err
		}
	}
	return pages, nil
}

// State implements [Store.State].
func (m *Memory) State(_ context.Context, room string) (State, error) {
	if room == "" {
		return State{}, errEmptyRoom
	}
	r := m.room(room)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state(), nil
}

// Close implements [Store.Close]; it does nothing.
func (m *Memory) Close() error { return nil }

func checkAppend(room string, msg *corralv1.Message) error {
	if room == "" {
		return errEmptyRoom
	}
	if msg.GetRoom() != room {
		return fmt.Errorf("history: append to %q: message is for room %q", room, msg.GetRoom())
	}
	return nil
}

var errEmptyRoom = fmt.Errorf("history: empty room name")

// newEpoch returns a random id, distinct from every earlier epoch with
// overwhelming probability.
func newEpoch() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}
