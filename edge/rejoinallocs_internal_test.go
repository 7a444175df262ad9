package edge

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/corral-rt/corral/auth"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// loopConn is a net.Conn whose reads return data over and over.
type loopConn struct {
	net.Conn
	data []byte
	off  int
}

func (c *loopConn) Read(p []byte) (int, error) {
	n := copy(p, c.data[c.off:])
	c.off = (c.off + n) % len(c.data)
	return n, nil
}

// TestReadHeaderAllocs: a frame's header and mask key are read into the
// reader's stack: no allocation per frame (2 on the old code, where both
// escaped through io.ReadFull).
func TestReadHeaderAllocs(t *testing.T) {
	frame := clientFrame(true, 0x1, []byte("hi"))
	frame = append(frame, clientFrame(true, 0x1, bytes.Repeat([]byte("x"), 300))...)
	c := &conn{sock: &sock{Conn: &loopConn{data: frame}}}
	var payload [300]byte
	read := func() {
		_, _, n, _, err := c.readHeader()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.sock.readFull(payload[:n]); err != nil {
			t.Fatal(err)
		}
	}
	if n := testing.AllocsPerRun(200, read); n != 0 {
		t.Fatalf("%v allocations per frame header read, want 0", n)
	}
}

// errConn's reads return data once, then err.
type errConn struct {
	net.Conn
	data []byte
	err  error
}

func (c *errConn) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, c.err
	}
	n := copy(p, c.data)
	c.data = c.data[n:]
	return n, nil
}

// TestSockReadFull: readFull is io.ReadFull: whole, EOF before a byte,
// ErrUnexpectedEOF after some, another error as it is.
func TestSockReadFull(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		early, data string
		err         error
		want        error
	}{
		{"", "abcd", io.EOF, nil},
		{"ab", "cd", io.EOF, nil},
		{"", "", io.EOF, io.EOF},
		{"a", "b", io.EOF, io.ErrUnexpectedEOF},
		{"", "ab", boom, boom},
	} {
		s := &sock{Conn: &errConn{data: []byte(tc.data), err: tc.err}, early: []byte(tc.early)}
		var p [4]byte
		err := s.readFull(p[:])
		if err != tc.want {
			t.Fatalf("%q+%q then %v: %v, want %v", tc.early, tc.data, tc.err, err, tc.want)
		}
		if err == nil && string(p[:]) != "abcd" {
			t.Fatalf("read %q", p)
		}
	}
}

// thenWriter is a ResponseWriter that hijacks with HijackEarly and keeps
// what the handler leaves to run after it (Then), as the server's
// WebSocket listener does.
type thenWriter struct {
	*httptest.ResponseRecorder
	nc   net.Conn
	then func()
}

func (w *thenWriter) HijackEarly() (net.Conn, []byte, error) { return w.nc, nil, nil }
func (w *thenWriter) Then(f func())                          { w.then = f }

// TestServeHTTPThen: given a ResponseWriter with Then, the edge leaves the
// connection to the caller's goroutine (no goroutine of its own), and
// running it there serves the connection to its end. On the old code a
// goroutine was started and Then never called.
func TestServeHTTPThen(t *testing.T) {
	te := startEdge(t, false, nil)
	srv, client := net.Pipe()
	t.Cleanup(func() { srv.Close(); client.Close() })
	go io.Copy(io.Discard, client) // the 101
	r := httptest.NewRequest(http.MethodGet, "/ws", nil)
	r.Header.Set("Connection", "Upgrade")
	r.Header.Set("Upgrade", "websocket")
	r.Header.Set("Sec-WebSocket-Version", "13")
	r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	w := &thenWriter{ResponseRecorder: httptest.NewRecorder(), nc: srv}
	te.e.ServeHTTP(w, r)
	if w.then == nil {
		t.Fatal("the edge did not leave the connection to the caller (Then)")
	}
	if n := te.conns(); n != 1 {
		t.Fatalf("%d connections tracked, want 1", n)
	}
	client.Close() // the hello's read fails: the connection ends
	w.then()
	if n := te.conns(); n != 0 {
		t.Fatalf("%d connections tracked after the connection's end, want 0", n)
	}
}

// TestFinishWithoutWriterAllocs: a connection whose client is gone before
// its hello (a reset herd's, once over) ends without a goroutine, channel
// and timer waiting for a writer when none holds the writer token: 5
// allocations fewer than the old code's (which this test's bound fails).
func TestFinishWithoutWriterAllocs(t *testing.T) {
	te := startEdge(t, false, nil)
	r := httptest.NewRequest(http.MethodGet, "/ws", nil)
	r.Header.Set("Connection", "Upgrade")
	r.Header.Set("Upgrade", "websocket")
	r.Header.Set("Sec-WebSocket-Version", "13")
	r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	const runs = 50
	var ends []func()
	for range runs + 1 {
		srv, client := net.Pipe()
		go func() { io.Copy(io.Discard, client); client.Close() }()
		w := &thenWriter{ResponseRecorder: httptest.NewRecorder(), nc: srv}
		te.e.ServeHTTP(w, r)
		if w.then == nil {
			t.Fatal("no connection to run")
		}
		ends = append(ends, func() { srv.Close(); w.then() })
	}
	i := 0
	n := testing.AllocsPerRun(runs, func() { ends[i](); i++ })
	// 4 here (the hello's timer among them), 9 on the old code.
	if n > 6 {
		t.Fatalf("%v allocations per connection ended before its hello, want at most 6", n)
	}
	if te.conns() != 0 {
		t.Fatalf("%d connections left", te.conns())
	}
}

// TestAuthNoWait: corral's own authenticators, which never wait, get no
// context with the hello's deadline (a context and a timer per hello); any
// other authenticator still does.
func TestAuthNoWait(t *testing.T) {
	for _, tc := range []struct {
		a    auth.Authenticator
		want bool
	}{
		{auth.Dev{}, true},
		{auth.None{}, true},
		{&auth.JWT{}, true},
		{deadlineAuth{}, false},
	} {
		if _, got := tc.a.(auth.Immediate); got != tc.want {
			t.Fatalf("%T is auth.Immediate: %v, want %v", tc.a, got, tc.want)
		}
	}
	var seen atomic.Bool
	te := startEdge(t, false, func(c *Config) { c.Auth = deadlineAuth{seen: &seen} })
	te.dialJoin(t, "u", "r")
	if !seen.Load() {
		t.Fatal("an authenticator of the application's got no deadline for the hello")
	}
}

// deadlineAuth is auth.Dev that records whether its context had a deadline.
type deadlineAuth struct{ seen *atomic.Bool }

func (a deadlineAuth) Authenticate(ctx context.Context, token string) (*corralv1.Identity, error) {
	if _, ok := ctx.Deadline(); ok && a.seen != nil {
		a.seen.Store(true)
	}
	return auth.Dev{}.Authenticate(ctx, token)
}
