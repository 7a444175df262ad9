package edge

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Buffers of a client connection. net/http hands a hijacked connection a
// 4 KiB reader and a 4 KiB writer, which coder/websocket kept for the
// connection's whole life: most of what an idle connection used to cost.
// The edge lets both go at the upgrade (handshake.go) and reads sock.
//
// readBufferSize is the read buffer a connection borrows from readBufs
// while it has bytes waiting (see sock): it holds a frame header and a
// typical client frame (a hello, a join, a publish); a larger payload is
// read straight into its destination. A connection between frames holds
// none. The upgrade borrows one to write its 101 from.
const readBufferSize = 1 << 10

var readBufs = sync.Pool{New: func() any { return new([readBufferSize]byte) }}

// sock is the hijacked connection as the connection's reader reads it. A read
// smaller than readBufferSize borrows a buffer from readBufs, reads the
// socket into it and keeps what the caller did not take until the next
// reads take it; then the buffer goes back. So a connection between frames
// holds no read buffer.
//
// A read may linger (see conn.readFrames): with a read deadline set, it
// lifts the deadline as soon as a byte arrives, so a deadline can only end
// a read that consumed nothing, at a frame boundary.
//
// sock is read by one goroutine at a time, the connection's reader; its
// fields are the reader's.
type sock struct {
	net.Conn
	early []byte                // read past the upgrade request by net/http
	buf   *[readBufferSize]byte // borrowed from readBufs; nil when empty
	r, w  int                   // buf[r:w] is unread
	err   error                 // the read error behind buf's bytes
	// lingering: a read deadline is set, to be lifted at the first byte.
	lingering bool
	// skip is the unread payload of a frame refused as too large, which
	// the wait for the client's close reply discards (wsconn.go).
	skip uint64
}

// Read reads from the connection, see sock.
func (s *sock) Read(p []byte) (int, error) {
	if len(p) >= readBufferSize && s.idle() {
		// Large enough: straight into p.
		n, err := s.Conn.Read(p)
		s.readDone(n, err)
		return n, err
	}
	return s.readSmall(p)
}

// readSmall is Read through a borrowed buffer, whatever p's size: p
// never reaches the connection's Read (an interface call), so an array
// of the caller's stack stays there (readFull).
func (s *sock) readSmall(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if s.buf != nil {
		n := copy(p, s.buf[s.r:s.w])
		s.r += n
		if s.r == s.w {
			readBufs.Put(s.buf)
			s.buf, s.r, s.w = nil, 0, 0
		}
		return n, nil
	}
	if len(s.early) > 0 {
		n := copy(p, s.early)
		s.early = s.early[n:]
		if len(s.early) == 0 {
			s.early = nil
		}
		return n, nil
	}
	if s.err != nil {
		err := s.err
		s.err = nil
		return 0, err
	}
	b := readBufs.Get().(*[readBufferSize]byte)
	m, err := s.Conn.Read(b[:])
	n := copy(p, b[:m])
	if n < m {
		s.buf, s.r, s.w, s.err = b, n, m, err
		err = nil
	} else {
		readBufs.Put(b)
	}
	s.readDone(n, err)
	return n, err
}

// readDone lifts a lingering read's deadline once a read took a byte or
// failed.
func (s *sock) readDone(n int, err error) {
	if s.lingering && (n > 0 || err != nil) {
		s.lingering = false
		s.Conn.SetReadDeadline(time.Time{})
	}
}

// readFull is io.ReadFull(s, p) for a small p (a frame header, a mask
// key) that stays on the caller's stack: through io.ReadFull, an
// interface, it escaped, two allocations per frame read.
func (s *sock) readFull(p []byte) error {
	n := 0
	for n < len(p) {
		m, err := s.readSmall(p[n:])
		n += m
		if err != nil {
			if n == len(p) {
				return nil
			}
			if err == io.EOF && n > 0 {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// idle reports whether sock holds no unread byte. The reader calls it
// between frames.
func (s *sock) idle() bool {
	return s.buf == nil && len(s.early) == 0 && s.err == nil
}

// linger makes the next read end with os.ErrDeadlineExceeded, having read
// nothing, if no byte arrives within d.
func (s *sock) linger(d time.Duration) {
	s.lingering = true
	s.Conn.SetReadDeadline(time.Now().Add(d))
}

// lingered reports whether err ended a lingering read: nothing was read.
func lingered(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
