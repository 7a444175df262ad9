package protocol

import (
	"bytes"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of ServerFrame.batch and Batch.frames in client.proto.
const (
	serverFrameBatchField protowire.Number = 11
	batchFramesField      protowire.Number = 1
)

// AppendBatch appends one ServerFrame{batch} whose frames are the given
// already-encoded ServerFrames, each produced by [AppendServer] or
// AppendBatch with the same enc. It copies the bytes of frames without
// decoding or re-encoding them and does not check them. A frame that is
// itself a batch is spliced in (its frames become frames of the result), so
// clients never see a batch inside a batch. It panics if enc is not JSON or
// Proto.
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
	start := len(buf)
	buf = append(buf, framesKey...)
	any := false
	for _, f := range frames {
		if bytes.HasPrefix(f, []byte(head)) {
			// A batch: {"batch":{}} or {"batch":{"frames":[...]}}.
			inner := f[len(head):]
			if !bytes.HasPrefix(inner, []byte(framesKey)) {
				continue // empty
			}
			f = inner[len(framesKey) : len(inner)-len(tail)]
		}
		if any {
			buf = append(buf, ',')
		}
		buf = append(buf, f...)
		any = true
	}
	if !any {
		return append(buf[:start], "}}"...)
	}
	return append(buf, tail...)
}

// batchBodyProto returns the body of an encoded ServerFrame{batch} (its
// frames, each tag(1) len f), or ok false when f is not a batch.
func batchBodyProto(f []byte) (body []byte, ok bool) {
	num, typ, n := protowire.ConsumeTag(f)
	if n < 0 || num != serverFrameBatchField || typ != protowire.BytesType {
		return nil, false
	}
	v, m := protowire.ConsumeBytes(f[n:])
	if m < 0 || n+m != len(f) {
		return nil, false
	}
	return v, true
}

// appendBatchProto writes tag(11, bytes) len(body) body, where body is
// tag(1, bytes) len(f) f for each frame: the wire form of
// ServerFrame{batch: Batch{frames}}.
func appendBatchProto(buf []byte, frames [][]byte) []byte {
	body := 0
	for _, f := range frames {
		if b, ok := batchBodyProto(f); ok {
			body += len(b)
			continue
		}
		body += protowire.SizeTag(batchFramesField) + protowire.SizeBytes(len(f))
	}
	n := protowire.SizeTag(serverFrameBatchField) + protowire.SizeBytes(body)
	buf = slices.Grow(buf, n)
	buf = protowire.AppendTag(buf, serverFrameBatchField, protowire.BytesType)
	buf = protowire.AppendVarint(buf, uint64(body))
	for _, f := range frames {
		if b, ok := batchBodyProto(f); ok {
			buf = append(buf, b...)
			continue
		}
		buf = protowire.AppendTag(buf, batchFramesField, protowire.BytesType)
		buf = protowire.AppendBytes(buf, f)
	}
	return buf
}
