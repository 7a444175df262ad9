package batch_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/corral-rt/corral/internal/batch"
	"github.com/corral-rt/corral/internal/inflight"
)

var (
	errBusy   = errors.New("test: busy")
	errClosed = errors.New("test: closed")
	errOdd    = errors.New("test: odd")
)

// gate is a Send that records its batches and, while held, blocks until
// released, so that tests can queue ops behind a batch in flight.
type gate struct {
	mu      sync.Mutex
	batches [][]int
	entered chan struct{}
	release chan struct{}
}

func newGate() *gate {
	return &gate{entered: make(chan struct{}, 100), release: make(chan struct{})}
}

// send answers each op with its argument doubled, and fails odd ones.
func (g *gate) send(ops []*batch.Op[int, int]) {
	args := make([]int, len(ops))
	for i, op := range ops {
		args[i] = op.Arg
	}
	g.mu.Lock()
	g.batches = append(g.batches, args)
	g.mu.Unlock()
	g.entered <- struct{}{}
	<-g.release
	for _, op := range ops {
		if op.Arg%2 == 1 {
			op.Finish(0, errOdd)
			continue
		}
		op.Finish(2*op.Arg, nil)
	}
}

func newBatcher(g *gate, max, limit int) (*batch.Batcher[int, int], *inflight.Limit) {
	l := inflight.New(limit)
	return batch.New(batch.Options[int, int]{Max: max, Limit: l, Busy: errBusy, Closed: errClosed, Send: g.send}), l
}

type result struct {
	arg, got int
	err      error
}

// TestBatcher checks that callers queued behind a batch in flight share
// the next batches (up to Max each), that each gets its own reply, and
// that one op's failure fails no other.
func TestBatcher(t *testing.T) {
	g := newGate()
	b, l := newBatcher(g, 4, 100)
	out := make(chan result, 20)
	do := func(arg int) {
		got, err := b.Do(context.Background(), arg)
		out <- result{arg, got, err}
	}
	go do(100)
	<-g.entered // the first batch is in flight, alone
	for i := range 10 {
		go do(i)
	}
	for l.InFlight() < 11 { // wait until all ten are queued
		runtime.Gosched()
	}
	close(g.release)
	for range 11 {
		r := <-out
		switch {
		case r.arg%2 == 1:
			if !errors.Is(r.err, errOdd) {
				t.Errorf("op %d: err %v, want errOdd", r.arg, r.err)
			}
		case r.err != nil || r.got != 2*r.arg:
			t.Errorf("op %d: got %d, %v; want %d", r.arg, r.got, r.err, 2*r.arg)
		}
	}
	b.Close()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.batches) != 4 || len(g.batches[0]) != 1 || len(g.batches[1]) != 4 || len(g.batches[3]) != 2 {
		t.Errorf("batches %v, want [100] then the ten queued in batches of 4, 4, 2", g.batches)
	}
	if l.InFlight() != 0 {
		t.Errorf("%d slots still taken", l.InFlight())
	}
}

// TestBatcherCancel checks that a caller whose ctx ends while queued gets
// ctx.Err() at once, and that its op is not sent while the others are.
func TestBatcherCancel(t *testing.T) {
	g := newGate()
	b, l := newBatcher(g, 10, 100)
	out := make(chan result, 3)
	go func() { v, err := b.Do(context.Background(), 2); out <- result{2, v, err} }()
	<-g.entered
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error, 1)
	go func() { _, err := b.Do(ctx, 4); cancelled <- err }()
	go func() { v, err := b.Do(context.Background(), 6); out <- result{6, v, err} }()
	for l.InFlight() < 3 {
		runtime.Gosched()
	}
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: %v, want context.Canceled", err)
	}
	close(g.release)
	for range 2 {
		if r := <-out; r.err != nil || r.got != 2*r.arg {
			t.Errorf("op %d: %d, %v", r.arg, r.got, r.err)
		}
	}
	b.Close()
	g.mu.Lock()
	defer g.mu.Unlock()
	if fmt.Sprint(g.batches) != "[[2] [6]]" {
		t.Errorf("batches %v, want [[2] [6]]: the cancelled op is never sent", g.batches)
	}
	if l.InFlight() != 0 {
		t.Errorf("%d slots still taken", l.InFlight())
	}
}

// TestBatcherBusy checks the bound: with a Limit of 3, one op in flight
// and two queued, the next fails at once; once drained, calls pass again.
func TestBatcherBusy(t *testing.T) {
	g := newGate()
	b, l := newBatcher(g, 10, 3)
	out := make(chan error, 3)
	for i := range 3 {
		go func() { _, err := b.Do(context.Background(), 2*i); out <- err }()
		if i == 0 {
			<-g.entered
		}
	}
	for l.InFlight() < 3 {
		runtime.Gosched()
	}
	if _, err := b.Do(context.Background(), 8); !errors.Is(err, errBusy) {
		t.Fatalf("past the bound: %v, want busy", err)
	}
	close(g.release)
	for range 3 {
		if err := <-out; err != nil {
			t.Fatal(err)
		}
	}
	if v, err := b.Do(context.Background(), 8); err != nil || v != 16 {
		t.Fatalf("after draining: %d, %v", v, err)
	}
	b.Close()
	b.Close()
	if _, err := b.Do(context.Background(), 2); !errors.Is(err, errClosed) {
		t.Fatalf("after Close: %v, want closed", err)
	}
}
