package edge

import (
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/wsframe"
	"github.com/corral-rt/corral/protocol"
)

// A server frame as the edge sends it: encoded once per encoding for every
// recipient (encode, encoded).

// opcodeOf is the opcode of data messages in enc: text for JSON, binary
// for proto.
func opcodeOf(enc protocol.Encoding) byte {
	if enc == protocol.Proto {
		return wsframe.OpBinary
	}
	return wsframe.OpText
}

// The edge writes its data messages to the socket itself, each one final
// unmasked frame (wsframe.Frame) that the writer frames around what it
// took from the queue (conn.message). encoded is a server frame encoded for
// one encoding, made once for every recipient: b is the frame as queued
// (a writer may batch it with others); it is never modified.
type encoded struct{ b []byte }

// encode encodes f in enc.
func encode(enc protocol.Encoding, f *corralv1.ServerFrame) (encoded, error) {
	buf, err := protocol.AppendServer(enc, make([]byte, 0, 128), f)
	if err != nil {
		return encoded{}, err
	}
	return encoded{b: buf}, nil
}
