package edge

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/corral-rt/corral/internal/wsframe"
)

// clientFrame is one masked client frame (RFC 6455 §5.3).
func clientFrame(fin bool, op byte, p []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	key := [4]byte{1, 2, 3, 4}
	var out []byte
	switch {
	case len(p) <= 125:
		out = append(out, b0, 0x80|byte(len(p)))
	case len(p) <= 0xFFFF:
		out = append(out, b0, 0x80|126)
		out = binary.BigEndian.AppendUint16(out, uint16(len(p)))
	default:
		out = append(out, b0, 0x80|127)
		out = binary.BigEndian.AppendUint64(out, uint64(len(p)))
	}
	out = append(out, key[:]...)
	for i, c := range p {
		out = append(out, c^key[i&3])
	}
	return out
}

// pipeConn is a conn reading and writing one end of a pipe: the test
// holds the client's end.
func pipeConn(t *testing.T) (*conn, net.Conn) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return &conn{nc: a, sock: &sock{Conn: a}, wire: newWire(a)}, b
}

// serverFrame reads one unmasked frame the edge wrote.
func serverFrame(t *testing.T, r io.Reader) (op byte, p []byte) {
	t.Helper()
	fr := wsframe.NewReader(r, 1<<20)
	op, p, err := fr.Message()
	if err != nil {
		t.Fatal(err)
	}
	return op, append([]byte(nil), p...)
}

// TestReadMessage: the edge reads a client's messages itself: a whole
// frame, a fragmented message with a ping between its fragments (answered
// with a pong of the same payload), a 16-bit length; pongs are ignored.
func TestReadMessage(t *testing.T) {
	c, client := pipeConn(t)
	big := make([]byte, 300)
	for i := range big {
		big[i] = byte(i)
	}
	go func() {
		client.Write(clientFrame(true, wsframe.OpText, []byte(`{"ping":{}}`)))
		client.Write(clientFrame(false, wsframe.OpText, []byte("hel")))
		client.Write(clientFrame(true, wsframe.OpPing, []byte("p1")))
		client.Write(clientFrame(true, wsframe.OpPong, []byte("x")))
		client.Write(clientFrame(true, wsframe.OpContinuation, []byte("lo")))
		client.Write(clientFrame(true, wsframe.OpBinary, big))
	}()
	for _, want := range [][]byte{[]byte(`{"ping":{}}`), nil, big} {
		if want == nil {
			// The pong comes while the fragmented message is read.
			done := make(chan []byte, 1)
			go func() {
				m, err := c.readMessage(1 << 10)
				if err != nil {
					t.Error(err)
				}
				done <- m
			}()
			if op, p := serverFrame(t, client); op != wsframe.OpPong || string(p) != "p1" {
				t.Fatalf("answer to a ping: op %d %q, want a pong p1", op, p)
			}
			if m := <-done; string(m) != "hello" {
				t.Fatalf("fragmented message %q, want hello", m)
			}
			continue
		}
		m, err := c.readMessage(1 << 10)
		if err != nil || string(m) != string(want) {
			t.Fatalf("read %q, %v; want %q", m, err, want)
		}
	}
}

// TestReadMessageRefuses: a message over the limit (whole or in
// fragments), an unmasked frame, a control frame over 125 bytes, reserved
// bits and a continuation out of place end the read with the error that
// picks the close (errTooLarge: corral's 4413; errWSProtocol: 1002).
func TestReadMessageRefuses(t *testing.T) {
	unmasked := clientFrame(true, wsframe.OpText, []byte("hi"))
	unmasked[1] &^= 0x80
	rsv := clientFrame(true, wsframe.OpText, []byte("hi"))
	rsv[0] |= 0x40
	for name, tc := range map[string]struct {
		frames [][]byte
		want   error
	}{
		"over the limit":           {[][]byte{clientFrame(true, wsframe.OpText, make([]byte, 101))}, errTooLarge},
		"fragments over the limit": {[][]byte{clientFrame(false, wsframe.OpText, make([]byte, 60)), clientFrame(true, wsframe.OpContinuation, make([]byte, 60))}, errTooLarge},
		"unmasked":                 {[][]byte{unmasked}, errWSProtocol},
		"reserved bits":            {[][]byte{rsv}, errWSProtocol},
		"long ping":                {[][]byte{clientFrame(true, wsframe.OpPing, make([]byte, 126))}, errWSProtocol},
		"stray continuation":       {[][]byte{clientFrame(true, wsframe.OpContinuation, []byte("x"))}, errWSProtocol},
		"unknown opcode":           {[][]byte{clientFrame(true, 0x3, []byte("x"))}, errWSProtocol},
		"close with one byte":      {[][]byte{clientFrame(true, wsframe.OpClose, []byte{3})}, errWSProtocol},
	} {
		t.Run(name, func(t *testing.T) {
			c, client := pipeConn(t)
			go func() {
				for _, f := range tc.frames {
					if _, err := client.Write(f); err != nil {
						return
					}
				}
			}()
			if _, err := c.readMessage(100); !errors.Is(err, tc.want) {
				t.Fatalf("read: %v, want %v", err, tc.want)
			}
		})
	}
}

// TestClientClose: the client's close is answered with a close of the
// same code, once, and reads as a clean end for 1000 and 1001 only; after
// the edge sent its own close, the client's reply is not answered again.
func TestClientClose(t *testing.T) {
	for _, tc := range []struct {
		code  uint16
		clean bool
	}{{closeNormal, true}, {closeGoingAway, true}, {4000, false}} {
		c, client := pipeConn(t)
		p := binary.BigEndian.AppendUint16(nil, tc.code)
		go client.Write(clientFrame(true, wsframe.OpClose, append(p, "bye"...)))
		errc := make(chan error, 1)
		go func() {
			_, err := c.readMessage(100)
			errc <- err
		}()
		op, reply := serverFrame(t, client)
		if op != wsframe.OpClose || binary.BigEndian.Uint16(reply) != tc.code {
			t.Fatalf("answer to a close %d: op %d %v", tc.code, op, reply)
		}
		var closed wsClosed
		if err := <-errc; !errors.As(err, &closed) || closed.code != tc.code || closed.clean() != tc.clean {
			t.Fatalf("read after close %d: %v, want wsClosed clean=%v", tc.code, err, tc.clean)
		}
	}

	// The edge closes first (its writer): the client's reply is not
	// answered, and nothing follows the edge's close on the wire.
	c, client := pipeConn(t)
	go c.writeClose(4400, "the first frame must be hello")
	if op, p := serverFrame(t, client); op != wsframe.OpClose || binary.BigEndian.Uint16(p) != 4400 || string(p[2:]) != "the first frame must be hello" {
		t.Fatalf("the edge's close: op %d %q", op, p)
	}
	go client.Write(clientFrame(true, wsframe.OpClose, binary.BigEndian.AppendUint16(nil, 4400)))
	if _, err := c.readMessage(100); !errors.As(err, new(wsClosed)) {
		t.Fatalf("read of the reply: %v", err)
	}
	if err := c.writeControl(wsframe.OpPong, nil); err != nil {
		t.Fatal(err) // nothing written: the pipe would block
	}
}

// TestCloseReasonBounded: a close reason is cut to what a control frame
// holds, on a character boundary.
func TestCloseReasonBounded(t *testing.T) {
	c, client := pipeConn(t)
	reason := ""
	for range 70 { // 140 bytes
		reason += "é"
	}
	go c.writeClose(4000, reason)
	_, p := serverFrame(t, client)
	if len(p) > 125 || string(p[2:]) == reason {
		t.Fatalf("close payload of %d bytes: %q", len(p), p[2:])
	}
}

// TestControlWriteWatched: a pong the client does not read blocks on its
// socket under the sweeper's write watchdog (writeStart), as a data
// write does, and leaves it clear once written.
func TestControlWriteWatched(t *testing.T) {
	c, client := pipeConn(t)
	done := make(chan error, 1)
	go func() { done <- c.writeControl(wsframe.OpPong, []byte("p")) }()
	waitFor(t, "the blocked pong to be watched", func() bool { return c.writeStart.Load() != 0 })
	if op, p := serverFrame(t, client); op != wsframe.OpPong || string(p) != "p" {
		t.Fatalf("op %d %q, want the pong", op, p)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if c.writeStart.Load() != 0 {
		t.Fatal("writeStart left set after the pong was written")
	}
}

// TestNoDataAfterClose: once the client's close was answered, the
// connection's writer writes no data message after it.
func TestNoDataAfterClose(t *testing.T) {
	c, client := pipeConn(t)
	go client.Write(clientFrame(true, wsframe.OpClose, binary.BigEndian.AppendUint16(nil, closeNormal)))
	errc := make(chan error, 1)
	go func() {
		_, err := c.readMessage(100)
		errc <- err
	}()
	if op, _ := serverFrame(t, client); op != wsframe.OpClose {
		t.Fatalf("op %d, want the close's answer", op)
	}
	<-errc
	if err := c.writeData([]byte("late")); !errors.Is(err, errCloseSent) {
		t.Fatalf("a data write after the close: %v, want errCloseSent", err)
	}
	c.wire.mu.Lock()
	r := c.sendLocked([]byte("late"))
	c.wire.mu.Unlock()
	if r != writeFailed {
		t.Fatalf("a write without blocking after the close: %v, want writeFailed", r)
	}
}

// TestAwaitCloseReply: after the edge refused a frame as too large and
// sent its close, the reader drops the rest of that frame and what
// follows until the client's close reply, so the socket is not cut with
// unread bytes in it (a reset, which could lose the close frame).
func TestAwaitCloseReply(t *testing.T) {
	c, client := pipeConn(t)
	c.e = &Edge{}
	c.e.cfg.ReadLimit = 100
	sent := make(chan error, 1)
	go func() {
		for _, f := range [][]byte{
			clientFrame(true, wsframe.OpText, make([]byte, 300)),
			clientFrame(true, wsframe.OpText, []byte("after")),
			clientFrame(true, wsframe.OpClose, binary.BigEndian.AppendUint16(nil, 4413)),
		} {
			if _, err := client.Write(f); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	if _, err := c.readMessage(c.e.cfg.ReadLimit); !errors.Is(err, errTooLarge) {
		t.Fatalf("read: %v, want errTooLarge", err)
	}
	go c.writeClose(4413, "frame larger than 100 bytes") // the writer
	if op, p := serverFrame(t, client); op != wsframe.OpClose || binary.BigEndian.Uint16(p) != 4413 {
		t.Fatalf("op %d %q, want the close", op, p)
	}
	c.awaitCloseReply()
	if !c.closeRead {
		t.Fatal("the client's close reply was not read")
	}
	if err := <-sent; err != nil {
		t.Fatalf("the client's writes: %v (the edge stopped reading)", err)
	}
}

// FuzzReadMessage feeds arbitrary bytes from a client to the edge's
// WebSocket reader: it must not crash, must return no message over the
// limit, and must end (the bytes end in EOF).
func FuzzReadMessage(f *testing.F) {
	f.Add(clientFrame(true, wsframe.OpText, []byte(`{"ping":{}}`)))
	f.Add(append(clientFrame(false, wsframe.OpText, []byte("a")), clientFrame(true, wsframe.OpContinuation, []byte("b"))...))
	f.Add(clientFrame(true, wsframe.OpPing, []byte("p")))
	f.Add(clientFrame(true, wsframe.OpClose, []byte{0x03, 0xe8}))
	f.Add(clientFrame(true, wsframe.OpBinary, make([]byte, 200)))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, b := net.Pipe()
		defer a.Close()
		go func() {
			b.Write(data)
			b.Close()
		}()
		go io.Copy(io.Discard, b) // the edge's pongs and closes
		c := &conn{nc: a, sock: &sock{Conn: a}, wire: newWire(a)}
		for range 64 {
			m, err := c.readMessage(128)
			if err != nil {
				return
			}
			if len(m) > 128 {
				t.Fatalf("a message of %d bytes past a limit of 128", len(m))
			}
		}
	})
}
