package protocol

import (
	"errors"
	"fmt"
	"strconv"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// The WebSocket subprotocol names a client offers in
// Sec-WebSocket-Protocol.
const (
	SubprotocolJSON  = "corral.v1.json"
	SubprotocolProto = "corral.v1.proto"
)

// Encoding is the encoding of frames on one connection, chosen by its
// subprotocol.
type Encoding uint8

const (
	// JSON frames travel as text WebSocket messages.
	JSON Encoding = iota
	// Proto frames travel as binary WebSocket messages.
	Proto
)

// EncodingOf returns the Encoding of a subprotocol name, and false when the
// name is not one of corral's.
func EncodingOf(subprotocol string) (Encoding, bool) {
	switch subprotocol {
	case SubprotocolJSON:
		return JSON, true
	case SubprotocolProto:
		return Proto, true
	}
	return 0, false
}

// String returns the subprotocol name of e.
func (e Encoding) String() string {
	switch e {
	case JSON:
		return SubprotocolJSON
	case Proto:
		return SubprotocolProto
	}
	return "Encoding(" + strconv.Itoa(int(e)) + ")"
}

var (
	// ErrBadFrame means a message could not be decoded: it is not valid
	// JSON or protobuf, or a field has the wrong type.
	ErrBadFrame = errors.New("protocol: bad frame")
	// ErrUnknownFrame means a message is well formed but sets no kind of
	// frame this version knows.
	ErrUnknownFrame = errors.New("protocol: unknown frame")
)

// frameError is a decode or encode error: a sentinel, the path of the field
// concerned (may be empty) and what was wrong.
type frameError struct {
	sentinel error
	path     string
	msg      string
}

func (e *frameError) Error() string {
	if e.path == "" {
		return e.sentinel.Error() + ": " + e.msg
	}
	return e.sentinel.Error() + ": " + e.path + ": " + e.msg
}

func (e *frameError) Unwrap() error { return e.sentinel }

// badFrame makes a decode or encode error. A part of the frame it echoes
// goes through safetext.Quote: bounded and quoted, since the message
// reaches the client (and logs) as a close reason.
func badFrame(path, format string, args ...any) error {
	return &frameError{ErrBadFrame, path, fmt.Sprintf(format, args...)}
}

func unknownFrame(msg string) error {
	return &frameError{sentinel: ErrUnknownFrame, msg: msg}
}

func invalidEncoding(e Encoding) error {
	return fmt.Errorf("protocol: invalid encoding %v", e)
}

// DecodeClient decodes one WebSocket message as a ClientFrame into dst,
// which is reset first. dst does not keep a reference to data. The error
// wraps [ErrBadFrame] or [ErrUnknownFrame] and says what was wrong.
func DecodeClient(enc Encoding, data []byte, dst *corralv1.ClientFrame) error {
	switch enc {
	case JSON:
		return decodeClientJSON(data, dst)
	case Proto:
		return decodeClientProto(data, dst)
	}
	return invalidEncoding(enc)
}

// DecodeServer decodes one WebSocket message as a ServerFrame into dst,
// which is reset first. A batch stays a batch; callers flatten it, skipping
// frames with no kind set (kinds unknown to this version). dst does not keep
// a reference to data. The error wraps [ErrBadFrame] or [ErrUnknownFrame].
func DecodeServer(enc Encoding, data []byte, dst *corralv1.ServerFrame) error {
	switch enc {
	case JSON:
		return decodeServerJSON(data, dst)
	case Proto:
		return decodeServerProto(data, dst)
	}
	return invalidEncoding(enc)
}

// AppendClient appends the encoding of f to buf. It is what Go clients and
// tests send. The error wraps [ErrUnknownFrame] when f sets no kind, or
// [ErrBadFrame] when f cannot be encoded (invalid UTF-8 in a string, in
// the proto encoding).
func AppendClient(enc Encoding, buf []byte, f *corralv1.ClientFrame) ([]byte, error) {
	if f.GetKind() == nil {
		return buf, unknownFrame("encode: no kind set")
	}
	switch enc {
	case JSON:
		return appendJSONClientFrame(buf, f), nil
	case Proto:
		return appendProto(buf, f)
	}
	return buf, invalidEncoding(enc)
}

// AppendServer appends the encoding of one ServerFrame to buf. Encode a
// room's message once per encoding and splice the result into batches with
// [AppendBatch]. The error wraps [ErrUnknownFrame] when f sets no kind, or
// [ErrBadFrame] when f cannot be encoded (invalid UTF-8 in a string, in the
// proto encoding).
func AppendServer(enc Encoding, buf []byte, f *corralv1.ServerFrame) ([]byte, error) {
	if f.GetKind() == nil {
		return buf, unknownFrame("encode: no kind set")
	}
	switch enc {
	case JSON:
		return appendJSONServerFrame(buf, f), nil
	case Proto:
		return appendProto(buf, f)
	}
	return buf, invalidEncoding(enc)
}
