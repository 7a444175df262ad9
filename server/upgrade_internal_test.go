package server

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"time"

	"github.com/coder/websocket"
)

// echoWS upgrades and echoes one message, then closes normally.
var echoWS = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	go func() {
		defer c.CloseNow()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		typ, b, err := c.Read(ctx)
		if err != nil {
			return
		}
		if c.Write(ctx, typ, b) == nil {
			c.Close(websocket.StatusNormalClosure, "")
		}
	}()
})

// startWS serves echoWS at /ws through a wsListener, and net/http's mux
// (/ws: echoWS too, /: a page) behind it.
func startWS(t *testing.T, timeout time.Duration) (*wsListener, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newWSListener(ln, echoWS, "/ws", timeout, slog.New(slog.NewTextHandler(io.Discard, nil)))
	mux := http.NewServeMux()
	mux.Handle("/ws", noBody(echoWS)) // as server.go mounts the edge
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "page") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: timeout}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l, ln.Addr().String()
}

func echo(t *testing.T, url string, opts *websocket.DialOptions) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if err := c.Write(ctx, websocket.MessageText, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	_, b, err := c.Read(ctx)
	if err != nil || string(b) != "hello" {
		t.Fatalf("echo: %q, %v", b, err)
	}
}

// TestUpgradeSkipsNetHTTP: an upgrade to /ws is served by the listener
// itself; a page and a keep-alive request after it go to net/http, on
// one connection.
func TestUpgradeSkipsNetHTTP(t *testing.T) {
	l, addr := startWS(t, 5*time.Second)
	echo(t, "ws://"+addr+"/ws?resume=1", nil)
	if d, h := l.direct.Load(), l.handedOff.Load(); d != 1 || h != 0 {
		t.Fatalf("upgrade: %d direct, %d handed off; want 1, 0", d, h)
	}
	cl := &http.Client{Transport: &http.Transport{}}
	for range 2 {
		resp, err := cl.Get("http://" + addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "page" {
			t.Fatalf("page: %d %q", resp.StatusCode, b)
		}
	}
	if h := l.handedOff.Load(); h != 1 {
		t.Fatalf("two requests on one connection: %d handed off, want 1", h)
	}
}

// TestUpgradeWaitingHoldsNoHeadReader: connections accepted before their
// client sends a byte (a reconnect herd's, by the thousand) hold no head
// reader while they wait; one that upgrades takes one. On the old code,
// which borrowed the reader at accept, this saw 41 of 41 taken.
func TestUpgradeWaitingHoldsNoHeadReader(t *testing.T) {
	held, stop := headReaders.Count()
	t.Cleanup(stop)
	l, addr := startWS(t, 10*time.Second)
	const waiting = 40
	for range waiting {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	// Each waiting connection's serve goroutine has run as far as it can
	// before its client's first byte well before this upgrade is echoed:
	// the echo takes several round trips through the same listener.
	echo(t, "ws://"+addr+"/ws", nil)
	if d := l.direct.Load(); d != 1 {
		t.Fatalf("%d upgrades served, want 1", d)
	}
	if n := held(); n > 1 {
		t.Fatalf("%d head readers held with %d connections waiting for their first byte and 1 upgraded; want at most 1", n, waiting)
	}
}

// TestUpgradeLargeHeadHandedOff: a head larger than the listener's buffer
// goes to net/http, which still upgrades it; so does a path that only
// begins like the edge's.
func TestUpgradeLargeHeadHandedOff(t *testing.T) {
	l, addr := startWS(t, 5*time.Second)
	h := http.Header{"Cookie": {"c=" + strings.Repeat("x", 2*headBufferSize)}}
	echo(t, "ws://"+addr+"/ws", &websocket.DialOptions{HTTPHeader: h})
	if d, h := l.direct.Load(), l.handedOff.Load(); d != 0 || h != 1 {
		t.Fatalf("large head: %d direct, %d handed off; want 0, 1", d, h)
	}
	rc := rawHead(t, addr, "GET /wsx HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp := readResponse(t, rc); resp.StatusCode != 200 {
		t.Fatalf("GET /wsx: %d, want the page (net/http's mux)", resp.StatusCode)
	}
}

// TestUpgradeEarlyFrame: a frame the client sends in the same packet as
// its head is read by the WebSocket after the upgrade.
func TestUpgradeEarlyFrame(t *testing.T) {
	l, addr := startWS(t, 5*time.Second)
	head := "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
	rc := rawHead(t, addr, head+string(maskedText("early")))
	br := bufio.NewReader(rc)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v, %v", resp, err)
	}
	if got := resp.Header.Get("Sec-WebSocket-Accept"); got != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("Sec-WebSocket-Accept %q", got)
	}
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, hdr[1]&0x7f)
	if _, err := io.ReadFull(br, p); err != nil || hdr[0] != 0x81 || string(p) != "early" {
		t.Fatalf("echo of the early frame: %x %q %v", hdr, p, err)
	}
	if d := l.direct.Load(); d != 1 {
		t.Fatalf("%d direct, want 1", d)
	}
}

// TestUpgradeRefusals: what the handler refuses, an unparsable head and a
// head that never ends get an HTTP answer or a close, and the connection
// ends either way.
func TestUpgradeRefusals(t *testing.T) {
	_, addr := startWS(t, 300*time.Millisecond)
	for _, tc := range []struct {
		name, head string
		status     int
	}{
		{"not an upgrade", "GET /ws HTTP/1.1\r\nHost: x\r\n\r\n", http.StatusUpgradeRequired},
		{"no key", "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n", http.StatusBadRequest},
		{"HTTP/1.0", "GET /ws HTTP/1.0\r\nHost: x\r\n\r\n", http.StatusUpgradeRequired},
		{"bad header line", "GET /ws HTTP/1.1\r\nHost x\r\n\r\n", http.StatusBadRequest},
		{"bad request line", "GET /ws?a HTTP/9\r\n\r\n", http.StatusBadRequest},
		// A body would be read as the client's first WebSocket frames.
		{"body", upgradeHead + "Content-Length: 11\r\n\r\n" + string(maskedText("hello")), http.StatusBadRequest},
		{"chunked body", upgradeHead + "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", http.StatusBadRequest},
		{"body, head through net/http", upgradeHead + "X-Pad: " + strings.Repeat("p", headBufferSize) + "\r\nContent-Length: 11\r\n\r\n" + string(maskedText("hello")), http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := rawHead(t, addr, tc.head)
			br := bufio.NewReader(rc)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if _, err := io.ReadAll(resp.Body); err != nil {
				t.Fatal(err)
			}
			if n, err := br.Read(make([]byte, 1)); n != 0 || err == nil {
				t.Fatalf("connection still open after the refusal (%d, %v)", n, err)
			}
		})
	}
	t.Run("head never ends", func(t *testing.T) {
		rc := rawHead(t, addr, "GET /ws HTTP/1.1\r\nHost: x\r\n")
		_ = rc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := rc.Read(make([]byte, 1)); n != 0 || err == nil || isTimeout(err) {
			t.Fatalf("a head that never ends: read %d, %v; want the connection closed after the head's timeout", n, err)
		}
	})
	t.Run("head never begins", func(t *testing.T) {
		rc := rawHead(t, addr, "")
		_ = rc.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := rc.Read(make([]byte, 1)); n != 0 || err == nil || isTimeout(err) {
			t.Fatalf("no head: read %d, %v; want the connection closed after the head's timeout", n, err)
		}
	})
}

// upgradeHead is a valid upgrade request's head without its end.
const upgradeHead = "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func rawHead(t *testing.T, addr, b string) net.Conn {
	t.Helper()
	rc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	if _, err := io.WriteString(rc, b); err != nil {
		t.Fatal(err)
	}
	return rc
}

func readResponse(t *testing.T, rc net.Conn) *http.Response {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(rc), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// maskedText is a client's text frame carrying p (< 126 bytes).
func maskedText(p string) []byte {
	key := [4]byte{1, 2, 3, 4}
	b := []byte{0x81, 0x80 | byte(len(p)), key[0], key[1], key[2], key[3]}
	for i := range len(p) {
		b = append(b, p[i]^key[i%4])
	}
	return b
}

// fakeConn reads in and records what is written.
type fakeConn struct {
	in     *bytes.Reader
	mu     sync.Mutex
	out    bytes.Buffer
	closed bool
}

func (c *fakeConn) Read(p []byte) (int, error) { return c.in.Read(p) }
func (c *fakeConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.Write(p)
}
func (c *fakeConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}
func (c *fakeConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *fakeConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *fakeConn) SetDeadline(time.Time) error      { return nil }
func (c *fakeConn) SetReadDeadline(time.Time) error  { return nil }
func (c *fakeConn) SetWriteDeadline(time.Time) error { return nil }

// FuzzFirstRequest: whatever a connection's first bytes are, the
// listener neither panics nor loses them: it hands net/http exactly the
// bytes the client sent, or answers the request itself (an upgrade, an
// HTTP error) and then holds nothing of it.
func FuzzFirstRequest(f *testing.F) {
	for _, s := range []string{
		"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n\x81\x85\x01\x02\x03\x04abcde",
		"GET /ws?resume=1 HTTP/1.1\nHost: x\n\n",
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
		"GET /ws HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
		"GET /ws",
		"GET /wsx HTTP/1.1\r\n\r\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		l := &wsListener{ws: echoWS, path: "/ws", log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			conns: make(chan net.Conn, 1), done: make(chan struct{})}
		c := &fakeConn{in: bytes.NewReader(in)}
		l.serve(c)
		select {
		case hc := <-l.conns:
			got, _ := io.ReadAll(hc)
			if !bytes.Equal(got, in) {
				t.Fatalf("handed net/http %q, the client sent %q", got, in)
			}
			if l.direct.Load() != 0 {
				t.Fatal("served and handed off")
			}
		default:
			if l.direct.Load() == 0 && len(in) > 0 && upgradePrefix(in, "/ws") && headEnd(in) && len(in) < headBufferSize {
				t.Fatalf("a whole head of /ws was neither served nor handed off: %q", in)
			}
		}
	})
}

// BenchmarkUpgrade: one WebSocket upgrade (a raw client writes the head
// and reads the 101, then closes), served by net/http or by the
// listener (with coder/websocket's Accept, or with only a hijack and a
// 101 written as the edge does, by Hijack or HijackEarly). B/op and
// allocs/op are the client's (the same in all) plus the server's.
//
//	go test ./server -run '^$' -bench Upgrade -benchmem -count 3
func BenchmarkUpgrade(b *testing.B) {
	accept := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err == nil {
			c.CloseNow()
		}
	})
	head := []byte("GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
	// As the edge hands over (edge/handshake.go): HijackEarly, then the
	// 101 written on the connection.
	// As the edge hands over (edge/handshake.go): HijackEarly (or Hijack,
	// to compare), then the 101 written on the connection.
	const resp101 = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n"
	early := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nc, _, err := w.(interface {
			HijackEarly() (net.Conn, []byte, error)
		}).HijackEarly()
		if err == nil {
			io.WriteString(nc, resp101)
			nc.Close()
		}
	})
	hijack := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nc, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			io.WriteString(nc, resp101)
			nc.Close()
		}
	})
	for _, tc := range []struct {
		name    string
		direct  bool
		handler http.Handler
	}{
		{"net_http", false, accept},
		{"listener", true, accept},
		{"listener_hijack", true, hijack},
		{"listener_hijack_early", true, early},
	} {
		direct, accept := tc.direct, tc.handler
		b.Run(tc.name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			addr := ln.Addr().String()
			if direct {
				ln = newWSListener(ln, accept, "/ws", 5*time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
			}
			mux := http.NewServeMux()
			mux.Handle("/ws", accept)
			srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
			go srv.Serve(ln)
			defer srv.Close()
			resp := make([]byte, 512)
			b.ReportAllocs()
			for b.Loop() {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := c.Write(head); err != nil {
					b.Fatal(err)
				}
				n, err := c.Read(resp)
				if err != nil || !bytes.HasPrefix(resp[:n], []byte("HTTP/1.1 101 ")) {
					b.Fatalf("%q %v", resp[:n], err)
				}
				c.Close()
			}
		})
	}
}

// TestUpgradeThenOnListenerGoroutine: what a handler that hijacked leaves
// to run (upgradeResponse.Then, the edge's connection) runs on the
// listener's goroutine once the handler has returned and the head reader
// is back in its pool, not on a goroutine of its own; a handler that did
// not hijack (a refusal) has nothing run. On the old code the
// ResponseWriter had no Then.
func TestUpgradeThenOnListenerGoroutine(t *testing.T) {
	head := "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
	for _, hijack := range []bool{true, false} {
		var returned, ran, readerBack bool
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() { returned = true }()
			th, ok := w.(interface{ Then(func()) })
			if !ok {
				t.Fatal("the listener's ResponseWriter has no Then")
			}
			br := w.(*upgradeResponse).br
			th.Then(func() {
				ran = true
				// Reset(nil) before the Put: the reader no longer reads the connection.
				readerBack = returned && br.Size() == headBufferSize && br.Buffered() == 0
			})
			if hijack {
				w.(interface {
					HijackEarly() (net.Conn, []byte, error)
				}).HijackEarly()
				return
			}
			http.Error(w, "no", http.StatusForbidden)
		})
		l := &wsListener{ws: h, path: "/ws", log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			conns: make(chan net.Conn, 1), done: make(chan struct{})}
		l.serveConn(&fakeConn{in: bytes.NewReader([]byte(head + "early"))})
		if ran != hijack {
			t.Fatalf("hijack %v: ran on the listener's goroutine %v, want %v", hijack, ran, hijack)
		}
		if hijack && !readerBack {
			t.Fatal("ran before the handler returned, or with the head reader still held")
		}
	}
}
