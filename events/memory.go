package events

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// MemoryOptions configures [NewMemory]. Zero fields mean defaults.
type MemoryOptions struct {
	// MaxLen is how many events the log retains; default 10000.
	MaxLen int
}

// Memory is a [Log] in process memory: a ring of the newest events. Its
// epoch is random per log, so positions from before a restart read as
// [ErrGap]. All methods may be called concurrently.
type Memory struct {
	epoch string

	mu sync.Mutex // guards the following fields
	// buf holds the retained events; it grows to its capacity, then
	// wraps. head is the index of the oldest, n how many are retained.
	buf     []*corralv1.Event
	max     int
	head, n int
	last    uint64 // the newest event's number; 0 before the first
	// changed is closed at the next append; nil when nobody waits.
	changed chan struct{}
}

// NewMemory returns an empty log.
func NewMemory(opts MemoryOptions) *Memory {
	if opts.MaxLen <= 0 {
		opts.MaxLen = 10000
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails
	return &Memory{epoch: hex.EncodeToString(b[:]), max: opts.MaxLen}
}

// CommitMessage appends the event of msg. The history store calls it while
// it holds the room's lock, right after storing msg, so a room's message
// events are in seq order. msg must not be modified afterwards.
func (m *Memory) CommitMessage(msg *corralv1.Message) {
	ev := MessageEvent(msg)
	m.mu.Lock()
	m.appendLocked(ev)
	m.wakeLocked()
	m.mu.Unlock()
}

// Append implements [Log.Append].
// Immediate implements [Immediate]: Append never waits.
func (*Memory) Immediate() {}

func (m *Memory) Append(_ context.Context, evs []*corralv1.Event) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ev := range evs {
		m.appendLocked(ev)
	}
	m.wakeLocked()
	return nil
}

// appendLocked numbers ev and stores it. Lock must be held.
func (m *Memory) appendLocked(ev *corralv1.Event) {
	m.last++
	b := make([]byte, 0, len(m.epoch)+1+20)
	b = append(append(b, m.epoch...), '.')
	ev.Position = string(strconv.AppendUint(b, m.last, 10))
	if len(m.buf) < m.max {
		m.buf = append(m.buf, ev)
		m.n++
		return
	}
	m.buf[m.head] = ev
	m.head++
	if m.head == len(m.buf) {
		m.head = 0
	}
}

// wakeLocked wakes the readers waiting for an event. Lock must be held.
func (m *Memory) wakeLocked() {
	if m.changed != nil {
		close(m.changed)
		m.changed = nil
	}
}

// Tail implements [Log.Tail].
func (m *Memory) Tail(context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return position{where: m.epoch, n: m.last}.String(), nil
}

// Head implements [Log.Head].
func (m *Memory) Head(context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return position{where: m.epoch, n: m.last - uint64(m.n)}.String(), nil
}

// Read implements [Log.Read].
func (m *Memory) Read(ctx context.Context, after string, limit int, wait time.Duration) ([]*corralv1.Event, error) {
	var from uint64 // the number of the first event wanted; 0: the oldest
	if after != "" {
		p, err := parsePosition(after)
		if err != nil {
			return nil, fmt.Errorf("events: read after %q: %w", after, err)
		}
		if p.where != m.epoch {
			return nil, fmt.Errorf("events: read after %q: the log was reset: %w", after, ErrGap)
		}
		from = p.n + 1
	}
	limit = readLimit(limit)
	var timer *time.Timer
	for {
		m.mu.Lock()
		first := m.last - uint64(m.n) + 1
		if from == 0 {
			from = first
		}
		switch {
		case from > m.last+1:
			m.mu.Unlock()
			return nil, fmt.Errorf("events: read after %q: past the newest event (the log was reset): %w", after, ErrGap)
		case from < first:
			m.mu.Unlock()
			return nil, fmt.Errorf("events: read after %q: trimmed: %w", after, ErrGap)
		case from <= m.last:
			to := min(m.last, from+uint64(limit)-1)
			out := make([]*corralv1.Event, 0, to-from+1)
			for s := from; s <= to; s++ {
				i := m.head + int(s-first)
				if i >= len(m.buf) {
					i -= len(m.buf)
				}
				out = append(out, m.buf[i])
			}
			m.mu.Unlock()
			return out, nil
		}
		if wait <= 0 {
			m.mu.Unlock()
			return nil, nil
		}
		if m.changed == nil {
			m.changed = make(chan struct{})
		}
		changed := m.changed
		m.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		select {
		case <-changed:
		case <-timer.C:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
