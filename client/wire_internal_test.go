package client

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"testing/iotest"

	"github.com/coder/websocket"
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

// TestFrameReader: whole and fragmented messages, control frames between
// fragments, all three length forms, read one byte at a time.
func TestFrameReader(t *testing.T) {
	big := bytes.Repeat([]byte("b"), 70000)
	mid := bytes.Repeat([]byte("m"), 300)
	var stream []byte
	stream = append(stream, serverFrame(true, opText, []byte(`{"a":1}`))...)
	stream = append(stream, serverFrame(false, opBinary, []byte("frag1-"))...)
	stream = append(stream, serverFrame(true, opPing, []byte("p"))...)
	stream = append(stream, serverFrame(false, opContinuation, []byte("frag2-"))...)
	stream = append(stream, serverFrame(true, opContinuation, []byte("end"))...)
	stream = append(stream, serverFrame(true, opText, mid)...)
	stream = append(stream, serverFrame(true, opText, big)...)
	stream = append(stream, serverFrame(true, opText, nil)...)
	stream = append(stream, serverFrame(true, opClose, append([]byte{0x0F, 0xA0}, "bye"...))...)
	type msg struct {
		op byte
		p  string
	}
	want := []msg{
		{opText, `{"a":1}`}, {opPing, "p"}, {opBinary, "frag1-frag2-end"},
		{opText, string(mid)}, {opText, string(big)}, {opText, ""}, {opClose, "\x0f\xa0bye"},
	}
	for _, r := range []io.Reader{bytes.NewReader(stream), iotest.OneByteReader(bytes.NewReader(stream))} {
		fr := newFrameReader(r, 1<<20)
		for i, w := range want {
			op, p, err := fr.message()
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			if op != w.op || string(p) != w.p {
				t.Fatalf("message %d: op %d %.20q, want op %d %.20q", i, op, p, w.op, w.p)
			}
		}
		if _, _, err := fr.message(); err != io.EOF {
			t.Fatalf("after the last frame: %v, want EOF", err)
		}
	}
	ce, err := parseClose([]byte{0x0F, 0xA0, 'b', 'y', 'e'})
	if err != nil || ce.Code != 4000 || ce.Reason != "bye" {
		t.Fatalf("parseClose: %v %v", ce, err)
	}
	if ce, _ := parseClose(nil); ce.Code != websocket.StatusNoStatusRcvd {
		t.Fatalf("empty close: %v", ce.Code)
	}
}

// TestFrameReaderRefuses: what a server must not send is an error of the
// right kind, never a panic or a huge allocation.
func TestFrameReaderRefuses(t *testing.T) {
	masked := serverFrame(true, opText, []byte("x"))
	masked[1] |= 0x80
	huge := []byte{0x81, 127, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"masked", masked, errProtocol},
		{"reserved bits", append([]byte{0xC1, 1}, 'x'), errProtocol},
		{"long control", serverFrame(true, opPing, bytes.Repeat([]byte("p"), 126)), errProtocol},
		{"fragmented control", serverFrame(false, opClose, nil), errProtocol},
		{"continuation first", serverFrame(true, opContinuation, []byte("x")), errProtocol},
		{"message inside message", append(serverFrame(false, opText, []byte("a")), serverFrame(true, opText, []byte("b"))...), errProtocol},
		{"unknown opcode", serverFrame(true, 0x3, nil), errProtocol},
		{"over the limit", serverFrame(true, opText, bytes.Repeat([]byte("x"), 1025)), errTooBig},
		{"fragments over the limit", append(serverFrame(false, opText, bytes.Repeat([]byte("x"), 600)), serverFrame(true, opContinuation, bytes.Repeat([]byte("x"), 600))...), errTooBig},
		{"huge length", huge, errTooBig},
		{"cut short", serverFrame(true, opText, []byte("abc"))[:3], io.ErrUnexpectedEOF},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fr := newFrameReader(bytes.NewReader(c.in), 1024)
			_, _, err := fr.message()
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
	if _, err := parseClose([]byte{0x03}); !errors.Is(err, errProtocol) {
		t.Fatalf("one-byte close payload: %v", err)
	}
	if _, err := parseClose([]byte{0x03, 0xE8, 0xFF}); !errors.Is(err, errProtocol) {
		t.Fatalf("close reason not UTF-8: %v", err)
	}
}

// TestUpgradeConnStopsAtHeader: net/http gets the response's header and
// not a byte more, wherever the reads split it; the frame reader gets the
// rest.
func TestUpgradeConnStopsAtHeader(t *testing.T) {
	header := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"
	frames := string(serverFrame(true, opText, []byte(`{"welcome":{}}`)))
	for split := 1; split < len(header)+len(frames); split++ {
		a, b := net.Pipe()
		go func() {
			all := header + frames
			b.Write([]byte(all[:split]))
			b.Write([]byte(all[split:]))
			b.Close()
		}()
		u := &upgradeConn{Conn: a}
		var got []byte
		buf := make([]byte, 4096)
		for !u.done {
			n, err := u.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				t.Fatalf("split %d: %v before the end of the header", split, err)
			}
		}
		if string(got) != header {
			t.Fatalf("split %d: net/http got %q", split, got)
		}
		rest, _ := io.ReadAll(u)
		if string(rest) != frames {
			t.Fatalf("split %d: the frame reader got %q, want %q", split, rest, frames)
		}
		a.Close()
	}
}

// FuzzFrameReader: any bytes from a server give messages within the limit
// or an error, never a panic.
func FuzzFrameReader(f *testing.F) {
	f.Add(serverFrame(true, opText, []byte(`{"message":{}}`)))
	f.Add(append(serverFrame(false, opText, []byte("a")), serverFrame(true, opContinuation, []byte("b"))...))
	f.Add(serverFrame(true, opClose, []byte{0x03, 0xE8}))
	f.Add([]byte{0x81, 126, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, in []byte) {
		const limit = 4096
		fr := newFrameReader(bytes.NewReader(in), limit)
		for range 1000 {
			op, p, err := fr.message()
			if err != nil {
				return
			}
			if len(p) > limit {
				t.Fatalf("a %d-byte message past the %d limit", len(p), limit)
			}
			if op == opClose {
				parseClose(p)
			}
		}
	})
}
