package wsframe

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// serverFrame is a frame as a server sends it: unmasked.
func serverFrame(fin bool, op byte, payload []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	out := []byte{b0}
	switch n := len(payload); {
	case n <= 125:
		out = append(out, byte(n))
	case n <= 0xFFFF:
		out = append(out, 126)
		out = binary.BigEndian.AppendUint16(out, uint16(n))
	default:
		out = append(out, 127)
		out = binary.BigEndian.AppendUint64(out, uint64(n))
	}
	return append(out, payload...)
}

// TestReader: whole and fragmented messages, control frames between
// fragments, all three length forms, read one byte at a time.
func TestReader(t *testing.T) {
	big := bytes.Repeat([]byte("b"), 70000)
	mid := bytes.Repeat([]byte("m"), 300)
	var stream []byte
	stream = append(stream, serverFrame(true, OpText, []byte(`{"a":1}`))...)
	stream = append(stream, serverFrame(false, OpBinary, []byte("frag1-"))...)
	stream = append(stream, serverFrame(true, OpPing, []byte("p"))...)
	stream = append(stream, serverFrame(false, OpContinuation, []byte("frag2-"))...)
	stream = append(stream, serverFrame(true, OpContinuation, []byte("end"))...)
	stream = append(stream, serverFrame(true, OpText, mid)...)
	stream = append(stream, serverFrame(true, OpText, big)...)
	stream = append(stream, serverFrame(true, OpText, nil)...)
	stream = append(stream, serverFrame(true, OpClose, append([]byte{0x0F, 0xA0}, "bye"...))...)
	type msg struct {
		op byte
		p  string
	}
	want := []msg{
		{OpText, `{"a":1}`}, {OpPing, "p"}, {OpBinary, "frag1-frag2-end"},
		{OpText, string(mid)}, {OpText, string(big)}, {OpText, ""}, {OpClose, "\x0f\xa0bye"},
	}
	for _, r := range []io.Reader{bytes.NewReader(stream), iotest.OneByteReader(bytes.NewReader(stream))} {
		fr := NewReader(r, 1<<20)
		for i, w := range want {
			op, p, err := fr.Message()
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			if op != w.op || string(p) != w.p {
				t.Fatalf("message %d: op %d %.20q, want op %d %.20q", i, op, p, w.op, w.p)
			}
		}
		if _, _, err := fr.Message(); err != io.EOF {
			t.Fatalf("after the last frame: %v, want EOF", err)
		}
	}
}

// TestReaderRefuses: what a server must not send is an error of the
// right kind, never a panic or a huge allocation.
func TestReaderRefuses(t *testing.T) {
	masked := serverFrame(true, OpText, []byte("x"))
	masked[1] |= 0x80
	huge := []byte{0x81, 127, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"masked", masked, ErrProtocol},
		{"reserved bits", append([]byte{0xC1, 1}, 'x'), ErrProtocol},
		{"long control", serverFrame(true, OpPing, bytes.Repeat([]byte("p"), 126)), ErrProtocol},
		{"fragmented control", serverFrame(false, OpClose, nil), ErrProtocol},
		{"continuation first", serverFrame(true, OpContinuation, []byte("x")), ErrProtocol},
		{"message inside message", append(serverFrame(false, OpText, []byte("a")), serverFrame(true, OpText, []byte("b"))...), ErrProtocol},
		{"unknown opcode", serverFrame(true, 0x3, nil), ErrProtocol},
		{"over the limit", serverFrame(true, OpText, bytes.Repeat([]byte("x"), 1025)), ErrTooBig},
		{"fragments over the limit", append(serverFrame(false, OpText, bytes.Repeat([]byte("x"), 600)), serverFrame(true, OpContinuation, bytes.Repeat([]byte("x"), 600))...), ErrTooBig},
		{"huge length", huge, ErrTooBig},
		{"cut short", serverFrame(true, OpText, []byte("abc"))[:3], io.ErrUnexpectedEOF},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fr := NewReader(bytes.NewReader(c.in), 1024)
			_, _, err := fr.Message()
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

// FuzzReader: any bytes from a server give messages within the limit
// (control frames within 125 bytes) or an error, never a panic.
func FuzzReader(f *testing.F) {
	f.Add(serverFrame(true, OpText, []byte(`{"message":{}}`)))
	f.Add(append(serverFrame(false, OpText, []byte("a")), serverFrame(true, OpContinuation, []byte("b"))...))
	f.Add(serverFrame(true, OpClose, []byte{0x03, 0xE8}))
	f.Add([]byte{0x81, 126, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, in []byte) {
		const limit = 4096
		fr := NewReader(bytes.NewReader(in), limit)
		for range 1000 {
			op, p, err := fr.Message()
			if err != nil {
				return
			}
			if len(p) > limit {
				t.Fatalf("a %d-byte message past the %d limit", len(p), limit)
			}
			if op >= OpClose && len(p) > 125 {
				t.Fatalf("a %d-byte control frame", len(p))
			}
		}
	})
}

// TestFrameRoundTrip: what Frame writes, Reader reads back, for every
// length form.
func TestFrameRoundTrip(t *testing.T) {
	var stream []byte
	sizes := []int{0, 125, 126, 0xFFFF, 0x10000}
	for i, n := range sizes {
		buf := append(make([]byte, MaxHeader), bytes.Repeat([]byte{byte('a' + i)}, n)...)
		stream = append(stream, Frame(buf, OpBinary)...)
	}
	fr := NewReader(bytes.NewReader(stream), 1<<20)
	for i, n := range sizes {
		op, p, err := fr.Message()
		if err != nil || op != OpBinary || len(p) != n || (n > 0 && p[n-1] != byte('a'+i)) {
			t.Fatalf("message %d: op %d, %d bytes, %v; want a binary message of %d", i, op, len(p), err, n)
		}
	}
}
