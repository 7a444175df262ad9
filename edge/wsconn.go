package edge

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/corral-rt/corral/internal/mono"
	"github.com/corral-rt/corral/internal/safetext"
	"github.com/corral-rt/corral/internal/wsframe"
)

// A client's WebSocket after the upgrade, which the edge does itself
// (handshake.go; coder/websocket did it until 2026-12-06): the edge writes its data messages framed by itself (wsframe.Frame), and
// reads the client's frames here, straight from sock, answering a ping
// and a close on the way. Keeping the library's Conn for the reads and
// the close cost ~1.5 KiB per idle connection (the Conn with its
// mutexes' channels, its reader and writer, and a bufio pair in front of
// the socket), more than a tenth of what an idle connection held
// (docs/benchmarks/2026-12-06-1234-idle-memory-2.md).
//
// Concurrency: readMessage is the connection's reader's alone, as sock
// is. Control frames go through the connection's wire, one at a time with
// the writer's data; conn.closeSent (under wire.mu) makes sure one close
// frame is sent, whichever of the reader (answering the client's close)
// and the writer (closeSocket) comes first.

// closeWait bounds how long a close the edge sent waits for the client's
// reply before the socket is cut, as coder/websocket's close handshake
// did.
const closeWait = 5 * time.Second

// Close codes of RFC 6455 the edge sends or reads itself.
const (
	closeNormal    = 1000
	closeGoingAway = 1001
	closeProtocol  = 1002
	closeNoStatus  = 1005 // in a close frame without a payload
)

// wsClosed is the close frame a client sent: its code (closeNoStatus
// when it had none).
type wsClosed struct{ code uint16 }

func (e wsClosed) Error() string { return fmt.Sprintf("edge: the client closed with %d", e.code) }

// clean reports whether the client closed as a client leaving does.
func (e wsClosed) clean() bool { return e.code == closeNormal || e.code == closeGoingAway }

// errWSProtocol is a client frame that breaks RFC 6455: the edge closes
// with 1002.
var errWSProtocol = errors.New("edge: WebSocket protocol error")

// readMessage reads the client's next data message, whole (a fresh slice:
// the decoded frame may keep parts of it), answering pings and ignoring
// pongs on the way. A message over limit bytes is errTooLarge (read no
// further); the client's close frame is wsClosed, answered with a close
// of the same code unless one was sent already. A read that lingered and
// read nothing returns its deadline error (see sock).
func (c *conn) readMessage(limit int64) ([]byte, error) {
	var msg []byte
	inMsg := false
	for {
		fin, op, n, key, err := c.readHeader()
		if err != nil {
			return nil, err
		}
		switch op {
		case wsframe.OpPing, wsframe.OpPong, wsframe.OpClose:
			if n > 125 || !fin {
				return nil, fmt.Errorf("%w: control frame fragmented or over 125 bytes", errWSProtocol)
			}
			var b [125]byte
			p := b[:n]
			if _, err := io.ReadFull(c.sock, p); err != nil {
				return nil, err
			}
			unmask(p, key)
			if err := c.control(op, p); err != nil {
				return nil, err
			}
			continue
		case wsframe.OpText, wsframe.OpBinary:
			if inMsg {
				return nil, fmt.Errorf("%w: a new message inside a fragmented one", errWSProtocol)
			}
			inMsg = true
		case wsframe.OpContinuation:
			if !inMsg {
				return nil, fmt.Errorf("%w: continuation outside a message", errWSProtocol)
			}
		default:
			return nil, fmt.Errorf("%w: unknown opcode %d", errWSProtocol, op)
		}
		if n > uint64(limit) || uint64(len(msg))+n > uint64(limit) {
			c.sock.skip = n // unread: awaitCloseReply discards it
			return nil, errTooLarge
		}
		start := len(msg)
		msg = append(msg, make([]byte, n)...)
		if _, err := io.ReadFull(c.sock, msg[start:]); err != nil {
			return nil, err
		}
		unmask(msg[start:], key)
		if fin {
			if msg == nil {
				msg = []byte{}
			}
			return msg, nil
		}
	}
}

// readHeader reads one frame's header: a client's frames are masked
// (RFC 6455 §5.1), and no extension is negotiated, so no reserved bit is
// set.
func (c *conn) readHeader() (fin bool, op byte, n uint64, key [4]byte, err error) {
	var h [8]byte
	if err = c.sock.readFull(h[:2]); err != nil {
		return
	}
	fin, op = h[0]&0x80 != 0, h[0]&0x0F
	if h[0]&0x70 != 0 {
		err = fmt.Errorf("%w: reserved bits set", errWSProtocol)
		return
	}
	if h[1]&0x80 == 0 {
		err = fmt.Errorf("%w: unmasked frame from the client", errWSProtocol)
		return
	}
	switch n = uint64(h[1] & 0x7F); n {
	case 126:
		if err = c.sock.readFull(h[:2]); err != nil {
			return
		}
		n = uint64(binary.BigEndian.Uint16(h[:2]))
	case 127:
		if err = c.sock.readFull(h[:8]); err != nil {
			return
		}
		n = binary.BigEndian.Uint64(h[:8])
	}
	err = c.sock.readFull(key[:])
	return
}

// control answers a control frame of the client: a ping with its pong, a
// close with a close (then the connection ends: wsClosed).
func (c *conn) control(op byte, p []byte) error {
	switch op {
	case wsframe.OpPing:
		return c.writeControl(wsframe.OpPong, p)
	case wsframe.OpPong:
		return nil
	}
	code := uint16(closeNoStatus)
	switch {
	case len(p) == 1:
		return fmt.Errorf("%w: a close payload of one byte", errWSProtocol)
	case len(p) >= 2:
		code = binary.BigEndian.Uint16(p)
		if !validCloseCode(code) {
			return fmt.Errorf("%w: close code %d", errWSProtocol, code)
		}
	}
	// The reply echoes the code (RFC 6455 §5.5.1), as coder/websocket's did.
	c.writeClose(code, "")
	c.closeRead = true
	return wsClosed{code: code}
}

// awaitCloseReply ends the close handshake of a close the edge sent, on
// the reader as the connection finishes: it reads (and drops) what the
// client still sends until its close frame comes, for at most closeWait.
// Cutting the socket with unread bytes in it would reset the connection
// (RST), and the client could lose the close frame that says why, as a
// client whose frame was too large would (the rest of that frame is
// still on its way).
func (c *conn) awaitCloseReply() {
	if c.stream != nil || c.closeRead {
		return
	}
	c.wire.mu.Lock()
	sent := c.closeSent
	c.wire.mu.Unlock()
	if !sent {
		return
	}
	c.sock.lingering = false
	c.nc.SetReadDeadline(time.Now().Add(closeWait))
	for !c.closeRead {
		if n := c.sock.skip; n > 0 {
			c.sock.skip = 0
			if _, err := io.CopyN(io.Discard, c.sock, int64(min(n, 1<<62))); err != nil {
				return
			}
		}
		if _, err := c.readMessage(c.e.cfg.ReadLimit); err != nil && !errors.Is(err, errTooLarge) {
			return
		}
	}
}

// validCloseCode reports whether a close frame may carry code (RFC 6455
// §7.4: not the reserved ones, and not the ones never sent on the wire).
func validCloseCode(code uint16) bool {
	switch {
	case code < 1000, code == 1004, code == 1005, code == 1006, code == 1015, code >= 5000:
		return false
	}
	return true
}

// unmask unmasks p, a whole frame's payload, with key.
func unmask(p []byte, key [4]byte) {
	for i := range p {
		p[i] ^= key[i&3]
	}
}

// writeControl writes one control frame (payload at most 125 bytes) after
// any tail, blocking. A close is writeClose's.
func (c *conn) writeControl(op byte, p []byte) error {
	var b [2 + 125]byte
	b[0], b[1] = 0x80|op, byte(len(p))
	n := copy(b[2:], p)
	w := c.wire
	w.mu.Lock()
	defer w.mu.Unlock()
	if c.closeSent {
		return nil // nothing follows a close (RFC 6455 §5.5.1)
	}
	return c.writeControlLocked(b[:2+n])
}

// writeControlLocked writes frame after any tail, blocking, under the
// sweeper's write watchdog (conn.writeStart): a client that sends pings
// and reads nothing fills its socket, and the write is cut past
// Config.WriteTimeout as a data write would be. wire.mu must be held.
func (c *conn) writeControlLocked(frame []byte) error {
	start := mono.Now()
	watched := c.writeStart.CompareAndSwap(0, start)
	defer func() {
		if watched {
			c.writeStart.CompareAndSwap(start, 0)
		}
	}()
	if err := c.wire.flushLocked(); err != nil {
		return err
	}
	_, err := c.wire.nc.Write(frame)
	return err
}

// writeClose writes the close frame with code and reason (cut to what a
// control frame holds, on a character boundary), unless one was sent.
// closeNoStatus sends a close without a payload.
func (c *conn) writeClose(code uint16, reason string) error {
	var b [2 + 125]byte
	b[0] = 0x80 | wsframe.OpClose
	n := 2
	if code != closeNoStatus {
		reason = safetext.Truncate(reason, 123)
		binary.BigEndian.PutUint16(b[2:], code)
		n += 2 + copy(b[4:], reason)
	}
	b[1] = byte(n - 2)
	w := c.wire
	w.mu.Lock()
	defer w.mu.Unlock()
	if c.closeSent {
		return nil
	}
	c.closeSent = true
	return c.writeControlLocked(b[:n])
}

// errCloseSent is a data write after the close frame: refused, and the
// writer cuts the socket (nothing follows a close, RFC 6455 §5.5.1).
var errCloseSent = errors.New("edge: the close frame was sent")

// sendLocked is wire.sendLocked for the connection's writer, which
// writes nothing once a close frame was sent (the reader answered the
// client's close, or refused a frame with 1002). wire.mu must be held.
func (c *conn) sendLocked(p []byte) writeResult {
	if c.closeSent {
		return writeFailed
	}
	return c.wire.sendLocked(p)
}

// writeData writes p after any tail, blocking (the writer off its
// shard), unless a close frame was sent.
func (c *conn) writeData(p []byte) error {
	w := c.wire
	w.mu.Lock()
	defer w.mu.Unlock()
	if c.closeSent {
		return errCloseSent
	}
	if err := w.flushLocked(); err != nil || len(p) == 0 {
		return err
	}
	_, err := w.nc.Write(p)
	return err
}
