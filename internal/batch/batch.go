// Package batch gathers a store's calls that arrive together into one
// batch, so that a storm of callers costs a round trip per batch, not per
// call. The sessions store batches its writes with it, the grants store
// its reads, the core its joins' replay reads.
package batch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-rt/corral/internal/inflight"
)

// Op is one call waiting for, or in, a batch. Send finishes every op it is
// given exactly once.
type Op[A, R any] struct {
	// Ctx is the caller's context: a batch serves it until it ends.
	Ctx context.Context
	// Arg is what the caller asked for.
	Arg  A
	b    *Batcher[A, R]
	done chan struct{} // closed when resp and err are set
	resp R
	err  error
}

// Finish frees the op's in-flight slot and hands the op its reply, in
// that order: a caller that retries as soon as it has its reply finds its
// slot free.
func (o *Op[A, R]) Finish(resp R, err error) {
	o.resp, o.err = resp, err
	o.b.limit.Release()
	close(o.done)
}

// Options configure a Batcher. Busy and Closed are the errors Do returns
// past the bound and after Close: each store keeps its own sentinels.
type Options[A, R any] struct {
	// Max bounds the ops of one batch, so that one call stays short and
	// the server serves other clients between batches.
	Max int
	// Limit bounds the ops queued or in flight; it may be shared with
	// other calls of the same store.
	Limit  *inflight.Limit
	Busy   error
	Closed error
	// Send runs one batch of ops whose callers still wait (in arrival
	// order) and finishes each. Batches are sent one at a time.
	Send func(ops []*Op[A, R])
}

// Batcher runs calls in batches: a lone caller's batch starts at once;
// callers that arrive while a batch is in flight wait for the next one,
// which carries all of them (up to Max). All methods may be called
// concurrently.
type Batcher[A, R any] struct {
	o      Options[A, R]
	limit  *inflight.Limit
	closed atomic.Bool

	mu      sync.Mutex    // guards the following fields
	queue   []*Op[A, R]   // ops waiting for the next batch
	running bool          // a goroutine is sending batches
	idle    chan struct{} // if set, closed when running turns false
}

// New returns a Batcher; o.Max, o.Limit and o.Send must be set.
func New[A, R any](o Options[A, R]) *Batcher[A, R] {
	return &Batcher[A, R]{o: o, limit: o.Limit}
}

// Do runs arg in the next batch and returns its reply. Each op holds an
// in-flight slot from here until its batch answers, so the queue is
// bounded by the Limit: past it Do fails at once with Options.Busy. When
// ctx ends first, Do returns ctx.Err(); the op is dropped if its batch
// has not been sent yet.
func (b *Batcher[A, R]) Do(ctx context.Context, arg A) (R, error) {
	var zero R
	if b.closed.Load() {
		return zero, b.o.Closed
	}
	if !b.limit.TryAcquire() {
		return zero, b.o.Busy
	}
	op := &Op[A, R]{Ctx: ctx, Arg: arg, b: b, done: make(chan struct{})}
	b.mu.Lock()
	if b.closed.Load() {
		// Close has waited for the batches already: start none.
		b.mu.Unlock()
		b.limit.Release()
		return zero, b.o.Closed
	}
	b.queue = append(b.queue, op)
	start := !b.running
	b.running = true
	b.mu.Unlock()
	if start {
		go b.run()
	}
	select {
	case <-op.done:
		return op.resp, op.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// run sends batches until the queue is empty.
func (b *Batcher[A, R]) run() {
	for {
		b.mu.Lock()
		n := min(len(b.queue), b.o.Max)
		if n == 0 {
			b.running = false
			b.queue = nil
			if b.idle != nil {
				close(b.idle)
				b.idle = nil
			}
			b.mu.Unlock()
			return
		}
		batch := make([]*Op[A, R], n)
		copy(batch, b.queue)
		b.queue = append(b.queue[:0], b.queue[n:]...)
		b.mu.Unlock()
		live := batch[:0]
		for _, op := range batch {
			if err := op.Ctx.Err(); err != nil {
				op.Finish(*new(R), err)
				continue
			}
			live = append(live, op)
		}
		if len(live) > 0 {
			b.o.Send(live)
		}
	}
}

// Close makes Do fail with Options.Closed from now on and waits until no
// batch is queued or in flight. Safe to call twice.
func (b *Batcher[A, R]) Close() {
	b.mu.Lock()
	b.closed.Store(true)
	var idle chan struct{}
	if b.running {
		if b.idle == nil {
			b.idle = make(chan struct{})
		}
		idle = b.idle
	}
	b.mu.Unlock()
	if idle != nil {
		<-idle
	}
}

// Context bounds a batch by the latest deadline of its callers, or by
// none when one of them has none: a batch serves all of them.
func Context[A, R any](ops []*Op[A, R]) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, op := range ops {
		d, ok := op.Ctx.Deadline()
		if !ok {
			return context.Background(), func() {}
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.Background(), latest)
}
