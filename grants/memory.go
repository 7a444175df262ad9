package grants

import (
	"context"
	"sync"
)

// Memory is a Store for one process.
type Memory struct {
	mu    sync.RWMutex // guards the following fields; Get (every publish) reads
	users map[string]*Grants
	watch func(string)
}

// NewMemory returns an empty Memory store.
func NewMemory() *Memory { return &Memory{users: make(map[string]*Grants)} }

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
	g, err := apply(m.users[user], grant, join, publish)
	if err != nil {
		m.mu.Unlock()
		return err
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
