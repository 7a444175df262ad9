package edge

import (
	"io"
	"net"
	"sync"
	"syscall"
)

// wire is the one way bytes reach a client's socket: the control frames
// (pong, close: wsconn.go) and the edge's data messages both go through
// it, one at a time.
//
// The connection's writer (conn.send, on its sender shard) writes data
// without blocking, holding mu: what the socket does not take is kept as
// tail, and the writer waits for room (EPOLLOUT, poller.waitWritable)
// before it writes again. Whoever writes next, the writer or a control
// frame, writes tail first, so frames never interleave on the wire.
type wire struct {
	nc  io.Writer       // the socket, or an HTTP/2 response (httpOut)
	raw syscall.RawConn // nil: no write without blocking (the writer blocks)

	mu   sync.Mutex // held across every write to nc (and guards conn.closeSent)
	tail []byte     // the unwritten end of a message written without blocking
}

func newWire(nc net.Conn) *wire {
	return &wire{nc: nc, raw: rawConn(nc)}
}

// Write writes p in full, after any tail: the 101 response of the
// upgrade, and the connection's writer when it writes blocking.
func (w *wire) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.flushLocked(); err != nil {
		return 0, err
	}
	return w.nc.Write(p)
}

func (w *wire) flushLocked() error {
	if len(w.tail) > 0 {
		if _, err := w.nc.Write(w.tail); err != nil {
			return err
		}
		w.tail = nil
	}
	return nil
}

// writeResult is what sendLocked did.
type writeResult int

const (
	writeDone   writeResult = iota // written in full, no tail left
	writeTail                      // the socket is full: the wire keeps the rest
	writeFull                      // the tail is not all written: nothing else was
	writeFailed                    // the socket failed
)

// sendLocked writes the tail, then p, without blocking. When the socket
// does not take the whole tail it returns writeFull: nothing of p is
// written or kept, the caller still holds it (a connection's frames stay
// in its queue, counted against its bounds, while its socket is full).
// Otherwise whatever the socket does not take of p becomes the tail (a
// copy: p is the caller's), writeTail. An empty p writes only the tail.
// Without a raw socket it writes nothing and fails (the connection's
// writer then writes blocking, off its sender). mu must be held.
func (w *wire) sendLocked(p []byte) writeResult {
	if w.raw == nil {
		return writeFailed
	}
	for len(w.tail) > 0 {
		n, err := writeNonblock(w.raw, w.tail)
		switch {
		case err != nil:
			return writeFailed
		case n == 0:
			return writeFull
		}
		w.tail = w.tail[n:]
	}
	w.tail = nil
	if len(p) == 0 {
		return writeDone
	}
	n, err := writeNonblock(w.raw, p)
	switch {
	case err != nil:
		return writeFailed
	case n < len(p):
		w.tail = append([]byte(nil), p[n:]...)
		return writeTail
	}
	return writeDone
}
