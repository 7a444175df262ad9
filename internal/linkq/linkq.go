// Package linkq is the queue between a link's producers and its single
// sender: producers never block, and the sender takes everything that is
// ready (bounded per take by count and bytes) to send as one stream message.
package linkq

import "sync"

// Queue is a FIFO of items with sizes. All methods are safe for concurrent
// use. The zero value is not usable; call New.
type Queue[T any] struct {
	wake chan struct{} // capacity 1: "not empty"

	mu     sync.Mutex // guards the following fields
	items  []T
	sizes  []int
	bytes  int
	closed bool
}

// Len reports the items queued and their total size: what waits for the
// sender now.
func (q *Queue[T]) Len() (items, size int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items), q.bytes
}

// New returns an empty, open queue.
func New[T any]() *Queue[T] {
	return &Queue[T]{wake: make(chan struct{}, 1)}
}

// Push appends item of the given size. It never blocks. It returns false
// when the queue is closed or already holds limit items (limit <= 0: no
// limit); the item is then not queued.
func (q *Queue[T]) Push(item T, size, limit int) bool {
	q.mu.Lock()
	if q.closed || (limit > 0 && len(q.items) >= limit) {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, item)
	q.sizes = append(q.sizes, size)
	q.bytes += size
	first := len(q.items) == 1
	q.mu.Unlock()
	if first {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// Ready is signalled when the queue becomes non-empty.
func (q *Queue[T]) Ready() <-chan struct{} { return q.wake }

// Take removes and returns the oldest items: at most maxItems, and no more
// than maxBytes in all unless the first item alone is larger (it is then
// taken alone). It returns nil when the queue is empty. The returned slice
// is the caller's; the queue never touches it again.
func (q *Queue[T]) Take(maxItems, maxBytes int) []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	n, total := 0, 0
	for n < len(q.items) && n < maxItems {
		if n > 0 && total+q.sizes[n] > maxBytes {
			break
		}
		total += q.sizes[n]
		n++
	}
	if n == 0 {
		return nil
	}
	out := q.items[:n:n]
	if n == len(q.items) {
		q.items, q.sizes = nil, nil
	} else {
		// Copy the rest so out is never appended to.
		q.items = append([]T(nil), q.items[n:]...)
		q.sizes = append([]int(nil), q.sizes[n:]...)
	}
	q.bytes -= total
	return out
}

// Close empties the queue and refuses further pushes. Safe to call twice.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.items, q.sizes, q.bytes = nil, nil, 0
}

// Drain closes the queue and returns what it held, oldest first: a
// consumer that stops flushes it, and pushes after Drain fail.
func (q *Queue[T]) Drain() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items
	q.closed = true
	q.items, q.sizes, q.bytes = nil, nil, 0
	return out
}

// Reset empties the queue, leaving it open.
func (q *Queue[T]) Reset() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.items, q.sizes, q.bytes = nil, nil, 0
}
