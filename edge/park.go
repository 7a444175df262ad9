package edge

import (
	"sync"
	"syscall"
	"time"
)

// Parking: an idle connection holds no goroutine. Between frames, when
// nothing is buffered, the reader waits parkAfter for the next frame; if
// none comes it registers the socket with the edge's poller and ends. The
// poller starts a reader again when the socket turns readable (a frame, a
// close, a reset). An idle connection then costs its state, not a goroutine
// stack (about 5 KiB each).
//
// What watches a connection works without its reader: the sweeper's
// heartbeat timeout and a drain queue a close, which the writer performs.
// A closed socket leaves the poller's set without an event, so whoever
// closes a connection outside its reader then calls conn.cutOff (or
// poller.closed): a parked reader is started to end the connection (detach,
// accounting). Where the platform has no poller (not Linux), or it fails,
// the reader keeps its goroutine and blocks in its read.

// parkAfter is how long an idle reader waits for the next frame before it
// parks: a client sending frames faster keeps its reader, so parking costs
// nothing per frame (a park is a syscall, a wake a new goroutine).
const parkAfter = 500 * time.Millisecond

// poller starts the reader of a parked connection when its socket turns
// readable. A nil poller parks nothing.
//
// It also hands a connection back to its sender when its socket, found
// full by a write, has room again (EPOLLOUT): a second epoll set, out, so
// that waiting for room and waiting for a frame never re-arm each other.
type poller struct {
	ep   *epoll
	out  *epoll
	done chan struct{} // closed when both wait loops have ended

	mu sync.Mutex // guards the following fields, conn.registered, conn.registeredOut and conn.cut
	// parked are the connections without a reader, by id.
	parked map[uint64]*conn
	// full are the connections whose writer waits for room, by id.
	full    map[uint64]*conn
	stopped bool
}

// newPoller starts a poller, or returns nil where the platform has none.
func newPoller() *poller {
	ep, err := openEpoll()
	if err != nil {
		return nil
	}
	out, err := openEpoll()
	if err != nil {
		ep.close()
		return nil
	}
	p := &poller{ep: ep, out: out, done: make(chan struct{}),
		parked: make(map[uint64]*conn), full: make(map[uint64]*conn)}
	outDone := make(chan struct{})
	go func() {
		defer close(outDone)
		p.out.wait(p.writable)
		p.stop()
	}()
	go func() {
		defer close(p.done)
		p.ep.wait(p.wake)
		p.stop()
		<-outDone
	}()
	return p
}

// stop is the end of a wait loop (closed, or failed): nothing parks or
// waits for room any more; parked connections get their reader back, and
// those waiting for room their writer (which then writes blocking).
func (p *poller) stop() {
	p.mu.Lock()
	p.stopped = true
	parked, full := p.parked, p.full
	p.parked, p.full = nil, nil
	p.mu.Unlock()
	for _, c := range parked {
		go c.readFrames()
	}
	for _, c := range full {
		c.sender().add(c)
	}
}

// writable hands the connection waiting for room under id, if any, back
// to its sender.
func (p *poller) writable(id uint64) {
	p.mu.Lock()
	c := p.full[id]
	delete(p.full, id)
	p.mu.Unlock()
	if c != nil {
		c.sender().add(c)
	}
}

// waitWritable registers c's socket, to hand c back to its sender when the
// socket turns writable (or fails). It reports whether it did; if not (no
// poller, c cut off, the poller stopped) the caller writes blocking. The
// caller holds c's writer token.
func (p *poller) waitWritable(c *conn) bool {
	if p == nil || c.raw == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped || c.cut {
		return false
	}
	if err := p.out.armOut(c.raw, c.id, !c.registeredOut); err != nil {
		return false
	}
	c.registeredOut = true
	p.full[c.id] = c
	return true
}

// wake starts the reader of the connection parked under id, if any (an
// event may arrive for a connection that was woken otherwise).
func (p *poller) wake(id uint64) {
	p.mu.Lock()
	c := p.parked[id]
	delete(p.parked, id)
	p.mu.Unlock()
	if c != nil {
		go c.readFrames()
	}
}

// park registers c's socket, to start a reader when it turns readable. It
// reports whether it did; the calling reader must then end at once. It
// parks nothing once c is cut off or the poller closed.
func (p *poller) park(c *conn) bool {
	if p == nil || c.raw == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped || c.cut {
		return false
	}
	if err := p.ep.arm(c.raw, c.id, !c.registered); err != nil {
		return false
	}
	c.registered = true
	p.parked[c.id] = c
	return true
}

// closed is called once c's socket is closed, or being closed, outside
// its reader: it parks no more, and a parked reader is started to end c.
func (p *poller) closed(c *conn) {
	if p == nil {
		return
	}
	p.mu.Lock()
	c.cut = true
	parked := p.parked[c.id] == c
	if parked {
		delete(p.parked, c.id)
	}
	// A closed socket leaves the epoll sets without an event: a writer
	// waiting for room is handed back, and fails.
	full := p.full[c.id] == c
	if full {
		delete(p.full, c.id)
	}
	p.mu.Unlock()
	if parked {
		go c.readFrames()
	}
	if full {
		c.sender().add(c)
	}
}

// parkedConns is how many connections have no reader.
func (p *poller) parkedConns() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.parked)
}

// close stops the poller and waits for its loop to end; a connection
// still parked gets its reader back. Safe to call twice.
func (p *poller) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.stopped = true // arm uses the epoll fd only while not closed
	p.mu.Unlock()
	p.ep.close()
	p.out.close()
	<-p.done
}

// rawConn returns what the poller needs of a socket, or nil when it is not
// one (then the connection never parks).
func rawConn(nc any) syscall.RawConn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return raw
}
