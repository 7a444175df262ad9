// Package heldpool is a sync.Pool of *T that can count what its users
// hold: taken with Get and not yet given back with Put. Tests bound that
// count (a connection waiting for bytes holds no buffer); counting the
// pool's New calls cannot tell it under the race detector, which drops a
// quarter of what is put back. Safe for concurrent use, as sync.Pool.
package heldpool

import (
	"sync"
	"sync/atomic"
)

// Pool is a pool of *T. The zero value is not usable: see New.
type Pool[T any] struct {
	p        sync.Pool
	counting atomic.Bool
	held     atomic.Int64
}

// New returns a pool that makes a *T with make when it has none.
func New[T any](make func() *T) *Pool[T] {
	p := &Pool[T]{}
	p.p.New = func() any { return make() }
	return p
}

// Get takes a *T.
func (p *Pool[T]) Get() *T {
	if p.counting.Load() {
		p.held.Add(1)
	}
	return p.p.Get().(*T)
}

// Put gives x back.
func (p *Pool[T]) Put(x *T) {
	if p.counting.Load() {
		p.held.Add(-1)
	}
	p.p.Put(x)
}

// Count starts counting from zero what is taken and not given back, and
// returns that count's reader; stop ends the counting. For tests: call it
// before anything takes from the pool.
func (p *Pool[T]) Count() (held func() int64, stop func()) {
	p.held.Store(0)
	p.counting.Store(true)
	return p.held.Load, func() { p.counting.Store(false) }
}
