package protocol_test

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
)

// The fuzz targets check that decoders never panic, fail only with the
// package's sentinels, and that whatever they accept re-encodes, in both
// encodings, to bytes that decode to the same frame.

var jsonGarbage = []string{
	``, `[]`, `{}`, `null`, `{"nope":{}}`, `{"join":{"room":5}}`,
	`{"join":{},"leave":{}}`, `{"publish":{"payload":{"a":[1,{"b":"}"}]}}}`,
	`{"publish":{"payloadBase64":"_-8"}}`, `{"ack":{"seq":"1e3"}}`,
	`{"error":{"code":"CODE_FORBIDDEN"}}`, `{"batch":{"frames":[{"x":1},{"pong":{}}]}}`,
	`{"\u0070ing":{"id":"18446744073709551615"}}`, "{\"leave\":{\"room\":\"\xff\"}}",
	`{"hello":{"resume":{"rooms":[{"seq":-0}]}}}`,
}

var protoGarbage = []string{"", "\x00", "\xff\xff\xff\xff\xff", "\x0a\x05", "\x5a\x02\x0a\x00", "\xf8\x06\x01"}

func FuzzDecodeClientJSON(f *testing.F) {
	for _, c := range clientFrames() {
		b, _ := protocol.AppendClient(protocol.JSON, nil, c)
		f.Add(b)
	}
	for _, s := range jsonGarbage {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got corralv1.ClientFrame
		if err := protocol.DecodeClient(protocol.JSON, data, &got); err != nil {
			checkDecodeErr(t, err)
			return
		}
		checkClient(t, &got)
	})
}

func FuzzDecodeClientProto(f *testing.F) {
	for _, c := range clientFrames() {
		b, _ := protocol.AppendClient(protocol.Proto, nil, c)
		f.Add(b)
	}
	for _, s := range protoGarbage {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got corralv1.ClientFrame
		if err := protocol.DecodeClient(protocol.Proto, data, &got); err != nil {
			checkDecodeErr(t, err)
			return
		}
		checkClient(t, &got)
	})
}

func FuzzDecodeServerJSON(f *testing.F) {
	for _, s := range serverFrames() {
		b, _ := protocol.AppendServer(protocol.JSON, nil, s)
		f.Add(b)
	}
	for _, s := range jsonGarbage {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got corralv1.ServerFrame
		if err := protocol.DecodeServer(protocol.JSON, data, &got); err != nil {
			checkDecodeErr(t, err)
			return
		}
		checkServer(t, &got)
	})
}

func FuzzDecodeServerProto(f *testing.F) {
	for _, s := range serverFrames() {
		b, _ := protocol.AppendServer(protocol.Proto, nil, s)
		f.Add(b)
	}
	for _, s := range protoGarbage {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got corralv1.ServerFrame
		if err := protocol.DecodeServer(protocol.Proto, data, &got); err != nil {
			checkDecodeErr(t, err)
			return
		}
		checkServer(t, &got)
	})
}

func checkDecodeErr(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, protocol.ErrBadFrame) && !errors.Is(err, protocol.ErrUnknownFrame) {
		t.Fatalf("error wraps no sentinel: %v", err)
	}
}

// checkClient re-encodes a decoded frame in both encodings and decodes it
// again. Unknown protobuf fields have no JSON form, so they are left out of
// the comparison.
func checkClient(t *testing.T, f *corralv1.ClientFrame) {
	t.Helper()
	want := withoutUnknown(t, f)
	for _, enc := range encodings {
		b, err := protocol.AppendClient(enc, nil, f)
		if err != nil {
			t.Fatalf("re-encode %v in %v: %v", f, enc, err)
		}
		var got corralv1.ClientFrame
		if err := protocol.DecodeClient(enc, b, &got); err != nil {
			t.Fatalf("decode re-encoded %q in %v: %v", b, enc, err)
		}
		if !proto.Equal(withoutUnknown(t, &got), want) {
			t.Fatalf("%v: re-encoded %q decodes to\n%v\nwant\n%v", enc, b, &got, want)
		}
	}
}

func checkServer(t *testing.T, f *corralv1.ServerFrame) {
	t.Helper()
	want := withoutUnknown(t, f)
	for _, enc := range encodings {
		b, err := protocol.AppendServer(enc, nil, f)
		if err != nil {
			t.Fatalf("re-encode %v in %v: %v", f, enc, err)
		}
		var got corralv1.ServerFrame
		if err := protocol.DecodeServer(enc, b, &got); err != nil {
			t.Fatalf("decode re-encoded %q in %v: %v", b, enc, err)
		}
		if !proto.Equal(withoutUnknown(t, &got), want) {
			t.Fatalf("%v: re-encoded %q decodes to\n%v\nwant\n%v", enc, b, &got, want)
		}
	}
}

func withoutUnknown[M proto.Message](t *testing.T, m M) M {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := m.ProtoReflect().New().Interface().(M)
	if err := (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}
