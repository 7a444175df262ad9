// Package inflight bounds the store operations in flight: past the bound a
// caller is refused at once instead of queueing (seed W4: requests queued
// on a pool until they timed out in a storm).
package inflight

import "sync/atomic"

// Limit counts operations in flight against a maximum. The zero value
// refuses everything; use New. Safe for concurrent use.
type Limit struct {
	n   atomic.Int64
	max int64
}

// New returns a Limit admitting at most max operations at once.
func New(max int) *Limit { return &Limit{max: int64(max)} }

// TryAcquire takes a slot and reports true, or reports false at once when
// all slots are taken. Release every slot taken.
func (l *Limit) TryAcquire() bool {
	if l.n.Add(1) > l.max {
		l.n.Add(-1)
		return false
	}
	return true
}

// Release returns a slot.
func (l *Limit) Release() { l.n.Add(-1) }

// InFlight reports the slots taken.
func (l *Limit) InFlight() int64 { return l.n.Load() }
