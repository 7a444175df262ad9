// Package wsframe is the part of RFC 6455 framing that corral does by hand,
// on the per-message path: the edge writes each data message as one
// unmasked frame (Frame), and the Go client reads what a server sends
// (Reader) and writes its own control frames (AppendControl).
// The edge reads its clients' frames itself (edge/wsconn.go);
// coder/websocket does the rest: handshakes, the Go client's data frames.
package wsframe

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Opcodes (RFC 6455 §5.2).
const (
	OpContinuation = 0x0
	OpText         = 0x1
	OpBinary       = 0x2
	OpClose        = 0x8
	OpPing         = 0x9
	OpPong         = 0xA

	finBit = 0x80

	// MaxHeader is the longest header of an unmasked frame: 2 bytes, then
	// 8 for a 64-bit length.
	MaxHeader = 10
)

// Frame turns buf, whose first MaxHeader bytes are reserved and followed
// by the payload, into one final unmasked frame of opcode (how a server
// sends a message): it writes the header just before the payload and
// returns the frame, a suffix of buf.
func Frame(buf []byte, opcode byte) []byte {
	n := len(buf) - MaxHeader
	var h [MaxHeader]byte
	h[0] = finBit | opcode
	hl := 2
	switch {
	case n <= 125:
		h[1] = byte(n)
	case n <= 0xFFFF:
		h[1] = 126
		binary.BigEndian.PutUint16(h[2:], uint16(n))
		hl = 4
	default:
		h[1] = 127
		binary.BigEndian.PutUint64(h[2:], uint64(n))
		hl = 10
	}
	start := MaxHeader - hl
	copy(buf[start:], h[:hl])
	return buf[start:]
}

// AppendControl appends a masked control frame (RFC 6455 §5.3) of op with
// payload (at most 125 bytes).
func AppendControl(dst []byte, op byte, payload []byte) []byte {
	var key [4]byte
	rand.Read(key[:])
	dst = append(dst, finBit|op, 0x80|byte(len(payload)))
	dst = append(dst, key[:]...)
	for i, b := range payload {
		dst = append(dst, b^key[i&3])
	}
	return dst
}

// ErrProtocol is a frame that breaks RFC 6455: the connection is closed
// with 1002.
var ErrProtocol = errors.New("wsframe: protocol error")

// ErrTooBig is a message over the read limit: closed with 1009.
var ErrTooBig = errors.New("wsframe: message over the read limit")

// Reader reads the frames a server sends from r. Not safe for
// concurrent use: the connection's reader owns it.
type Reader struct {
	r     io.Reader
	limit int64
	buf   []byte // buf[off:] is read and not yet parsed
	off   int
	msg   []byte // a fragmented message's payload so far
	msgOp byte   // and its opcode
	inMsg bool   // a fragmented message is open
}

// readerSize is a frame reader's buffer at first: a header and a
// typical message, several when they arrive together. It grows for a
// larger frame and shrinks back after one over maxKeptBuffer.
const (
	readerSize    = 2 << 10
	maxKeptBuffer = 64 << 10
)

// NewReader reads frames from r; a message over limit bytes is ErrTooBig.
func NewReader(r io.Reader, limit int64) *Reader {
	return &Reader{r: r, limit: limit}
}

// fill makes at least k bytes available at buf[off:], reading as much as
// the socket has (up to the buffer's room) in each read.
func (fr *Reader) fill(k int) error {
	if len(fr.buf)-fr.off >= k {
		return nil
	}
	if fr.off > 0 {
		n := copy(fr.buf, fr.buf[fr.off:])
		fr.buf, fr.off = fr.buf[:n], 0
	}
	if cap(fr.buf) < k {
		nb := make([]byte, len(fr.buf), max(k, readerSize, 2*cap(fr.buf)))
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
func (fr *Reader) frame() (fin bool, op byte, payload []byte, err error) {
	if fr.off == len(fr.buf) && cap(fr.buf) > maxKeptBuffer {
		fr.buf, fr.off = nil, 0 // do not pin a large buffer
	}
	if err := fr.fill(2); err != nil {
		return false, 0, nil, err
	}
	b0, b1 := fr.buf[fr.off], fr.buf[fr.off+1]
	fin, op = b0&0x80 != 0, b0&0x0F
	if b0&0x70 != 0 {
		return false, 0, nil, fmt.Errorf("%w: reserved bits set", ErrProtocol)
	}
	if b1&0x80 != 0 {
		return false, 0, nil, fmt.Errorf("%w: masked frame from the server", ErrProtocol)
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
	if op >= OpClose && (n > 125 || !fin) {
		return false, 0, nil, fmt.Errorf("%w: control frame fragmented or over 125 bytes", ErrProtocol)
	}
	if n > uint64(fr.limit) || (op == OpContinuation && uint64(len(fr.msg))+n > uint64(fr.limit)) {
		return false, 0, nil, ErrTooBig
	}
	if err := fr.fill(hl + int(n)); err != nil {
		return false, 0, nil, err
	}
	start := fr.off + hl
	fr.off = start + int(n)
	return fin, op, fr.buf[start:fr.off:fr.off], nil
}

// Message reads frames until a whole data message, which it returns
// (valid until the next call), or a control frame, which it returns as is
// (op is OpClose, OpPing or OpPong).
func (fr *Reader) Message() (op byte, payload []byte, err error) {
	for {
		fin, op, p, err := fr.frame()
		if err != nil {
			return 0, nil, err
		}
		switch op {
		case OpClose, OpPing, OpPong:
			return op, p, nil
		case OpText, OpBinary:
			if fr.inMsg {
				return 0, nil, fmt.Errorf("%w: a new message inside a fragmented one", ErrProtocol)
			}
			if fin {
				return op, p, nil
			}
			fr.msg, fr.msgOp, fr.inMsg = append(fr.msg[:0], p...), op, true
		case OpContinuation:
			if !fr.inMsg {
				return 0, nil, fmt.Errorf("%w: continuation outside a message", ErrProtocol)
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
			return 0, nil, fmt.Errorf("%w: unknown opcode %d", ErrProtocol, op)
		}
	}
}
