package edge

import (
	"errors"
	"github.com/corral-rt/corral/internal/heldpool"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/corral-rt/corral/internal/peek"
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

var readBufs = heldpool.New(func() *[readBufferSize]byte { return new([readBufferSize]byte) })

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
	// raw reads the socket without a buffer while it waits (readReady);
	// nil where it cannot (not a socket, not Linux): a read then holds
	// its buffer while it blocks.
	raw syscall.RawConn
	// readFn is readNow, bound once; got, gotN and gotErr are what its
	// last call read.
	readFn func(fd uintptr) bool
	got    *[readBufferSize]byte
	gotN   int
	gotErr error
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
	var b *[readBufferSize]byte
	var m int
	var err error
	if s.raw != nil {
		b, m, err = s.readReady()
	} else {
		b = readBufs.Get()
		m, err = s.Conn.Read(b[:])
	}
	n := 0
	if b != nil {
		n = copy(p, b[:m])
		if n < m {
			s.buf, s.r, s.w, s.err = b, n, m, err
			err = nil
		} else {
			readBufs.Put(b)
		}
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

// readReady reads the socket into a buffer it borrows only once the
// socket has bytes (peek.ReadNow): a reader waiting for its next frame, or
// for the hello (a reconnect herd's thousands), holds none, and a read of
// bytes already there is one read(2), the wait included. b is nil when
// nothing was read (a read deadline passed, the socket closed).
func (s *sock) readReady() (b *[readBufferSize]byte, n int, err error) {
	if s.readFn == nil {
		s.readFn = s.readNow
	}
	err = s.raw.Read(s.readFn)
	b, n, rerr := s.got, s.gotN, s.gotErr
	s.got, s.gotN, s.gotErr = nil, 0, nil
	if err != nil {
		return nil, 0, err
	}
	return b, n, rerr
}

// readNow is readReady's callback: one read(2) into a borrowed buffer,
// given back when there was nothing to read (then the poller waits).
func (s *sock) readNow(fd uintptr) bool {
	b := readBufs.Get()
	n, again, err := peek.ReadNow(fd, b[:])
	if again {
		readBufs.Put(b)
		return false
	}
	s.got, s.gotN, s.gotErr = b, n, err
	return true
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
