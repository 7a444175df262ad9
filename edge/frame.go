package edge

import (
	"encoding/binary"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
)

// The edge writes its data messages to the socket itself (RFC 6455 §5.2):
// a server's frames are unmasked, and each of corral's messages is one
// final frame, so the header is the opcode and the payload length.
const (
	opText   = 0x1
	opBinary = 0x2
	finBit   = 0x80

	// maxFrameHeader is the longest header of an unmasked frame: 2 bytes,
	// then 8 for a 64-bit length.
	maxFrameHeader = 10
)

// frameMessage turns buf, whose first maxFrameHeader bytes are reserved
// and followed by the payload, into one WebSocket frame: it writes the
// header just before the payload and returns the frame, a suffix of buf.
func frameMessage(buf []byte, opcode byte) []byte {
	n := len(buf) - maxFrameHeader
	var h [maxFrameHeader]byte
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
	start := maxFrameHeader - hl
	copy(buf[start:], h[:hl])
	return buf[start:]
}

// opcodeOf is the opcode of data messages in enc: text for JSON, binary
// for proto.
func opcodeOf(enc protocol.Encoding) byte {
	if enc == protocol.Proto {
		return opBinary
	}
	return opText
}

// encoded is a server frame encoded for one encoding, made once for every
// recipient: b is the frame as queued (a writer may batch it with others),
// msg the same bytes after their WebSocket header, ready for the socket.
// b is a suffix of msg; neither is ever modified.
type encoded struct{ b, msg []byte }

// encode encodes f in enc, with its WebSocket header.
func encode(enc protocol.Encoding, f *corralv1.ServerFrame) (encoded, error) {
	buf, err := protocol.AppendServer(enc, make([]byte, maxFrameHeader, 128), f)
	if err != nil {
		return encoded{}, err
	}
	return encoded{b: buf[maxFrameHeader:], msg: frameMessage(buf, opcodeOf(enc))}, nil
}
