package grants

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Memory is a Store for one process. It holds at most [MaxMemoryUsers]
// users with grants or revocations: forgetting one would lift its
// revocations, so past the bound a change for a user it does not hold is
// refused with [ErrFull] (counted, see [Memory.Refused]); a change that
// leaves a user with nothing forgets the user.
type Memory struct {
	max     int
	refused atomic.Uint64

	mu    sync.RWMutex // guards the following fields; Get (every publish) reads
	users map[string]*Grants
	watch func(string)
}

// MaxMemoryUsers is how many users a [NewMemory] store holds.
const MaxMemoryUsers = 1 << 20

// ErrFull is returned (wrapped) by a [Memory] at its bound of users.
var ErrFull = errors.New("grants: too many users with grants or revocations")

// NewMemory returns an empty Memory store of at most [MaxMemoryUsers].
func NewMemory() *Memory { return NewMemoryMax(MaxMemoryUsers) }

// NewMemoryMax returns an empty Memory store of at most maxUsers users
// (at least one).
func NewMemoryMax(maxUsers int) *Memory {
	return &Memory{max: max(maxUsers, 1), users: make(map[string]*Grants)}
}

// Len is how many users the store holds.
func (m *Memory) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.users)
}

// Refused is how many changes were refused with [ErrFull].
func (m *Memory) Refused() uint64 { return m.refused.Load() }

// Get returns user's grants; nil when there are none.
func (m *Memory) Get(_ context.Context, user string) (*Grants, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.users[user], nil
}

// Grant adds grants for user and lifts the revocations they match.
func (m *Memory) Grant(ctx context.Context, user string, join, publish []string) error {
	return m.update(user, true, join, publish)
}

// Revoke removes the grants the patterns match and records revocations.
func (m *Memory) Revoke(ctx context.Context, user string, join, publish []string) error {
	return m.update(user, false, join, publish)
}

func (m *Memory) update(user string, grant bool, join, publish []string) error {
	if err := Validate(user, join, publish); err != nil {
		return err
	}
	m.mu.Lock()
	prev := m.users[user]
	g, err := apply(prev, grant, join, publish)
	if err != nil {
		m.mu.Unlock()
		return err
	}
	if prev == nil && !g.Empty() && len(m.users) >= m.max {
		m.mu.Unlock()
		m.refused.Add(1)
		return fmt.Errorf("%w: %d held, the bound (revoke what is no longer needed)", ErrFull, m.max)
	}
	if g.Empty() {
		delete(m.users, user)
	} else {
		m.users[user] = g
	}
	watch := m.watch
	m.mu.Unlock()
	if watch != nil {
		watch(user)
	}
	return nil
}

// Watch sets the function called with a user whose grants changed.
func (m *Memory) Watch(fn func(user string)) {
	m.mu.Lock()
	m.watch = fn
	m.mu.Unlock()
}

// Close does nothing; it is safe to call twice.
func (m *Memory) Close() error { return nil }
