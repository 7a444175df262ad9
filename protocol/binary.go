package protocol

import (
	"google.golang.org/protobuf/proto"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// The corral.v1.proto subprotocol: each binary message is the plain
// protobuf encoding of one frame.

func appendProto(buf []byte, m proto.Message) ([]byte, error) {
	out, err := proto.MarshalOptions{}.MarshalAppend(buf, m)
	if err != nil {
		return buf, badFrame("", "encode: %v", err)
	}
	return out, nil
}

func decodeClientProto(data []byte, dst *corralv1.ClientFrame) error {
	// Unmarshal resets dst and copies bytes fields out of data.
	if err := proto.Unmarshal(data, dst); err != nil {
		return badFrame("", "%v", err)
	}
	if dst.Kind == nil {
		return unknownFrame("no kind set")
	}
	return nil
}

func decodeServerProto(data []byte, dst *corralv1.ServerFrame) error {
	if err := proto.Unmarshal(data, dst); err != nil {
		return badFrame("", "%v", err)
	}
	if dst.Kind == nil {
		return unknownFrame("no kind set")
	}
	return nil
}
