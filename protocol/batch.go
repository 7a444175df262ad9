package protocol

import (
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of ServerFrame.batch and Batch.frames in client.proto.
const (
	serverFrameBatchField protowire.Number = 11
	batchFramesField      protowire.Number = 1
)

// AppendBatch appends one ServerFrame{batch} whose frames are the given
// already-encoded ServerFrames, each produced by [AppendServer] with the
// same enc. It copies the bytes of frames without decoding or re-encoding
// them and does not check them. It panics if enc is not JSON or Proto.
func AppendBatch(enc Encoding, buf []byte, frames [][]byte) []byte {
	switch enc {
	case JSON:
		return appendBatchJSON(buf, frames)
	case Proto:
		return appendBatchProto(buf, frames)
	}
	panic(invalidEncoding(enc))
}

// appendBatchJSON writes {"batch":{"frames":[f1,f2]}}, or {"batch":{}}
// for no frames, as the JSON encoder writes an empty Batch.
func appendBatchJSON(buf []byte, frames [][]byte) []byte {
	const head, framesKey, tail = `{"batch":{`, `"frames":[`, `]}}`
	n := len(head) + len(framesKey) + len(tail) + len(frames)
	for _, f := range frames {
		n += len(f)
	}
	buf = slices.Grow(buf, n)
	buf = append(buf, head...)
	if len(frames) == 0 {
		return append(buf, "}}"...)
	}
	buf = append(buf, framesKey...)
	for i, f := range frames {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, f...)
	}
	return append(buf, tail...)
}

// appendBatchProto writes tag(11, bytes) len(body) body, where body is
// tag(1, bytes) len(f) f for each frame: the wire form of
// ServerFrame{batch: Batch{frames}}.
func appendBatchProto(buf []byte, frames [][]byte) []byte {
	body := 0
	for _, f := range frames {
		body += protowire.SizeTag(batchFramesField) + protowire.SizeBytes(len(f))
	}
	n := protowire.SizeTag(serverFrameBatchField) + protowire.SizeBytes(body)
	buf = slices.Grow(buf, n)
	buf = protowire.AppendTag(buf, serverFrameBatchField, protowire.BytesType)
	buf = protowire.AppendVarint(buf, uint64(body))
	for _, f := range frames {
		buf = protowire.AppendTag(buf, batchFramesField, protowire.BytesType)
		buf = protowire.AppendBytes(buf, f)
	}
	return buf
}
