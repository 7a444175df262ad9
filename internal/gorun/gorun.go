// Package gorun runs functions on goroutines that are kept a while once
// done, for the next function, rather than on a new goroutine each.
//
// A new goroutine starts with a 2 KiB stack, and one that serves a
// connection's upgrade and hello, or a session's attach and join, grows it
// to 8 or 16 KiB, a copy of the whole stack at each doubling: in a
// reconnect herd (10,000 of them at once) runtime.copystack was 8% of the
// server's CPU (docs/benchmarks/2026-12-07-0220-issue34-herd-allocs.md). A
// goroutine of a Pool that is done waits up to the pool's idle time for
// the next function, with the stack it grew (until the GC shrinks it).
package gorun

import (
	"sync"
	"time"
)

// Pool runs functions on its goroutines. The zero value is not usable:
// see New.
type Pool struct {
	idle      time.Duration
	ready     chan func()   // idle goroutines receive here
	closed    chan struct{} // closed by Close
	closeOnce sync.Once
}

// New is a Pool whose goroutines wait up to idle for the next function
// once done, then end.
func New(idle time.Duration) *Pool {
	return &Pool{idle: idle, ready: make(chan func()), closed: make(chan struct{})}
}

// Close ends the pool's waiting goroutines now, and each busy one once
// its function returns; Go still runs what it is given, each on a
// goroutine that then ends. (A pool in a testing/synctest bubble must
// have no goroutine left waiting when the bubble ends.)
func (p *Pool) Close() {
	p.closeOnce.Do(func() { close(p.closed) })
}

// Go runs f on a goroutine of the pool that waits for one, or on a new
// one. As with a go statement, f runs alone on its goroutine: nothing of
// the caller's, and a panic in f ends the process.
func (p *Pool) Go(f func()) {
	select {
	case p.ready <- f:
	default:
		go p.run(f)
	}
}

// run runs f, then the functions handed to it while it waits.
func (p *Pool) run(f func()) {
	f()
	t := time.NewTimer(p.idle)
	for {
		select {
		case f = <-p.ready:
			f()
			t.Reset(p.idle)
		case <-t.C:
			return
		case <-p.closed:
			t.Stop()
			return
		}
	}
}
