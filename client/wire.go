package client

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/coder/websocket"
)

// Reading without coder/websocket. A connection reads every server frame
// (one per message, several per socket read when they are queued) through
// coder/websocket's reader, which takes a lock, resets two readers and
// goes through net/http's reader and a bufio.Reader of its own per
// message: on a client that holds thousands of connections, such as corral
// bench, about a third of the time it spends per message. So for a ws://
// URL, Dial takes the TCP connection as the HTTP transport dials it, and
// once the upgrade is done reads the server's frames from it itself
// (frameReader): unmasked, as RFC 6455 §5.1 has a server send them.
// coder/websocket still does the handshake and writes the client's
// (masked) data frames; the connection writes its control frames (close,
// pong) itself, under the same lock as its data frames. For wss:// (TLS
// below the frames) and for an HTTPClient whose transport is not an
// *http.Transport, the connection reads through coder/websocket as before.

// upgradeConn is the TCP connection of one upgrade. Until the end of the
// response's header it hands net/http what it reads, but never a byte
// past it: what follows the header (frames the server sent at once) waits
// in early, for the frame reader. net/http reads nothing after a 101.
type upgradeConn struct {
	net.Conn
	matched int    // how much of "\r\n\r\n" the bytes read so far end with
	done    bool   // the header has been read
	early   []byte // read past the header
}

func (u *upgradeConn) Read(p []byte) (int, error) {
	if u.done {
		if len(u.early) > 0 {
			n := copy(p, u.early)
			u.early = u.early[n:]
			return n, nil
		}
		return u.Conn.Read(p)
	}
	n, err := u.Conn.Read(p)
	for i := range n {
		switch {
		case p[i] == "\r\n\r\n"[u.matched]:
			u.matched++
		case p[i] == '\r':
			u.matched = 1
		default:
			u.matched = 0
		}
		if u.matched == 4 {
			u.done = true
			if i+1 < n {
				u.early = append([]byte(nil), p[i+1:n]...)
				return i + 1, nil // err comes again on the next read
			}
			return n, err
		}
	}
	return n, err
}

// rawClient returns the client to upgrade url with so that its connection
// can be read directly, or nil when it cannot be: a copy of hc (nil is
// http.DefaultClient, as for coder/websocket) whose transport, made for
// this one upgrade, hands the connection it dials to *dialed. A fresh
// transport also never takes a kept-alive connection instead of dialing.
func rawClient(url string, hc *http.Client, dialed **upgradeConn) *http.Client {
	if !strings.HasPrefix(url, "ws://") && !strings.HasPrefix(url, "http://") {
		return nil // TLS below the frames
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	t, ok := base.(*http.Transport)
	if !ok {
		return nil
	}
	t = t.Clone()
	dial := t.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		u := &upgradeConn{Conn: c}
		*dialed = u
		return u, nil
	}
	return &http.Client{Transport: t, CheckRedirect: hc.CheckRedirect, Jar: hc.Jar, Timeout: hc.Timeout}
}

// WebSocket opcodes (RFC 6455 §5.2).
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xA
)

// errProtocol is a frame that breaks RFC 6455: the connection is closed
// with 1002.
var errProtocol = errors.New("client: websocket protocol error")

// errTooBig is a message over the read limit: closed with 1009.
var errTooBig = errors.New("client: message over the read limit")

// frameReader reads the frames a server sends from r. Not safe for
// concurrent use: the connection's reader owns it.
type frameReader struct {
	r     io.Reader
	limit int64
	buf   []byte // buf[off:] is read and not yet parsed
	off   int
	msg   []byte // a fragmented message's payload so far
	msgOp byte   // and its opcode
	inMsg bool   // a fragmented message is open
}

// frameReaderSize is a frame reader's buffer at first: a header and a
// typical message, several when they arrive together. It grows for a
// larger frame and shrinks back after one over maxKeptBuffer.
const (
	frameReaderSize = 2 << 10
	maxKeptBuffer   = 64 << 10
)

func newFrameReader(r io.Reader, limit int64) *frameReader {
	return &frameReader{r: r, limit: limit}
}

// fill makes at least k bytes available at buf[off:], reading as much as
// the socket has (up to the buffer's room) in each read.
func (fr *frameReader) fill(k int) error {
	if len(fr.buf)-fr.off >= k {
		return nil
	}
	if fr.off > 0 {
		n := copy(fr.buf, fr.buf[fr.off:])
		fr.buf, fr.off = fr.buf[:n], 0
	}
	if cap(fr.buf) < k {
		nb := make([]byte, len(fr.buf), max(k, frameReaderSize, 2*cap(fr.buf)))
		copy(nb, fr.buf)
		fr.buf = nb
	}
	for len(fr.buf) < k {
		n, err := fr.r.Read(fr.buf[len(fr.buf):cap(fr.buf)])
		fr.buf = fr.buf[:len(fr.buf)+n]
		if err != nil {
			if len(fr.buf) >= k {
				return nil // err comes again on the next read
			}
			if err == io.EOF && len(fr.buf) > 0 {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// frame reads one frame. payload is valid until the next call.
func (fr *frameReader) frame() (fin bool, op byte, payload []byte, err error) {
	if fr.off == len(fr.buf) && cap(fr.buf) > maxKeptBuffer {
		fr.buf, fr.off = nil, 0 // do not pin a large buffer
	}
	if err := fr.fill(2); err != nil {
		return false, 0, nil, err
	}
	b0, b1 := fr.buf[fr.off], fr.buf[fr.off+1]
	fin, op = b0&0x80 != 0, b0&0x0F
	if b0&0x70 != 0 {
		return false, 0, nil, fmt.Errorf("%w: reserved bits set", errProtocol)
	}
	if b1&0x80 != 0 {
		return false, 0, nil, fmt.Errorf("%w: masked frame from the server", errProtocol)
	}
	n, hl := uint64(b1&0x7F), 2
	switch n {
	case 126:
		if err := fr.fill(4); err != nil {
			return false, 0, nil, err
		}
		n, hl = uint64(binary.BigEndian.Uint16(fr.buf[fr.off+2:])), 4
	case 127:
		if err := fr.fill(10); err != nil {
			return false, 0, nil, err
		}
		n, hl = binary.BigEndian.Uint64(fr.buf[fr.off+2:]), 10
	}
	if op >= opClose && (n > 125 || !fin) {
		return false, 0, nil, fmt.Errorf("%w: control frame fragmented or over 125 bytes", errProtocol)
	}
	if n > uint64(fr.limit) || (op == opContinuation && uint64(len(fr.msg))+n > uint64(fr.limit)) {
		return false, 0, nil, errTooBig
	}
	if err := fr.fill(hl + int(n)); err != nil {
		return false, 0, nil, err
	}
	start := fr.off + hl
	fr.off = start + int(n)
	return fin, op, fr.buf[start:fr.off:fr.off], nil
}

// message reads frames until a whole data message, which it returns
// (valid until the next call), or a control frame, which it returns as is
// (op is opClose, opPing or opPong).
func (fr *frameReader) message() (op byte, payload []byte, err error) {
	for {
		fin, op, p, err := fr.frame()
		if err != nil {
			return 0, nil, err
		}
		switch op {
		case opClose, opPing, opPong:
			return op, p, nil
		case opText, opBinary:
			if fr.inMsg {
				return 0, nil, fmt.Errorf("%w: a new message inside a fragmented one", errProtocol)
			}
			if fin {
				return op, p, nil
			}
			fr.msg, fr.msgOp, fr.inMsg = append(fr.msg[:0], p...), op, true
		case opContinuation:
			if !fr.inMsg {
				return 0, nil, fmt.Errorf("%w: continuation outside a message", errProtocol)
			}
			fr.msg = append(fr.msg, p...)
			if fin {
				fr.inMsg = false
				msg := fr.msg
				if cap(msg) > maxKeptBuffer {
					fr.msg = nil
				}
				return fr.msgOp, msg, nil
			}
		default:
			return 0, nil, fmt.Errorf("%w: unknown opcode %d", errProtocol, op)
		}
	}
}

// parseClose reads a close frame's payload: no payload is 1005 (no status
// received).
func parseClose(p []byte) (websocket.CloseError, error) {
	if len(p) == 0 {
		return websocket.CloseError{Code: websocket.StatusNoStatusRcvd}, nil
	}
	if len(p) == 1 || !utf8.Valid(p[2:]) {
		return websocket.CloseError{}, fmt.Errorf("%w: malformed close frame", errProtocol)
	}
	return websocket.CloseError{Code: websocket.StatusCode(binary.BigEndian.Uint16(p)), Reason: string(p[2:])}, nil
}

// appendControl appends a masked control frame (RFC 6455 §5.3) of op with
// payload (at most 125 bytes).
func appendControl(dst []byte, op byte, payload []byte) []byte {
	var key [4]byte
	rand.Read(key[:])
	dst = append(dst, 0x80|op, 0x80|byte(len(payload)))
	dst = append(dst, key[:]...)
	for i, b := range payload {
		dst = append(dst, b^key[i&3])
	}
	return dst
}

// closePayload is a close frame's payload for code and reason.
func closePayload(code websocket.StatusCode, reason string) []byte {
	if code == websocket.StatusNoStatusRcvd {
		return nil
	}
	if len(reason) > 123 {
		reason = strings.ToValidUTF8(reason[:123], "")
	}
	p := binary.BigEndian.AppendUint16(nil, uint16(code))
	return append(p, reason...)
}
