package edge

import (
	"net"
	"sync"
	"syscall"
)

// wire is the one way bytes reach a client's socket: coder/websocket's
// control frames (pong, close) and the edge's data messages both go
// through it, one at a time.
//
// A data message may be written without blocking, straight from the
// goroutine that fans a room out (see conn.push): most sockets have room,
// and the write then costs no writer goroutine and no wake-up. When the
// socket takes only part of it, the rest is kept as tail, and whoever
// writes next (the connection's writer, or a control frame) writes tail
// first, so frames never interleave on the wire.
type wire struct {
	nc  net.Conn
	raw syscall.RawConn // nil: no write without blocking (tryWrite fails)

	mu   sync.Mutex // held across every write to nc
	tail []byte     // the unwritten end of a message written without blocking
}

func newWire(nc net.Conn) *wire {
	return &wire{nc: nc, raw: rawConn(nc)}
}

// Write writes p in full, after any tail. It serves coder/websocket's
// writer (control frames) and the connection's writer goroutine.
func (w *wire) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.flushLocked(); err != nil {
		return 0, err
	}
	return w.nc.Write(p)
}

// flush writes the tail, if any.
func (w *wire) flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flushLocked()
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

// writeResult is what tryWrite did.
type writeResult int

const (
	writeNone   writeResult = iota // nothing written: queue the frame
	writeDone                      // written in full
	writeTail                      // partly written: the wire keeps the rest
	writeFailed                    // the socket failed
)

// tryWrite writes p without blocking: writeNone, having written nothing,
// when another write is in progress, a tail is waiting, or the socket has
// no room (the caller then queues p); writeDone; writeTail when the socket
// took part of p and the rest became the tail (the caller must see it
// written, e.g. by starting the writer); writeFailed when the socket
// failed.
func (w *wire) tryWrite(p []byte) writeResult {
	if w.raw == nil || !w.mu.TryLock() {
		return writeNone
	}
	defer w.mu.Unlock()
	if len(w.tail) > 0 {
		return writeNone
	}
	n, err := writeNonblock(w.raw, p)
	switch {
	case err != nil:
		return writeFailed
	case n == 0:
		return writeNone
	case n < len(p):
		w.tail = append([]byte(nil), p[n:]...)
		return writeTail
	}
	return writeDone
}
