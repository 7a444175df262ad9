package server

import (
	"bufio"
	"bytes"
	"errors"
	"github.com/corral-rt/corral/internal/heldpool"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/corral-rt/corral/internal/peek"
)

// This file holds the WebSocket listener: the public listener's
// connections whose first request is a WebSocket upgrade to the edge go
// straight to the edge, without net/http's connection machinery.
//
// Why by hand: net/http serves each connection with a context, a 4 KiB
// read buffer, a 4 KiB write buffer and a 2 KiB response buffer; a
// hijacked connection never returns them to net/http's pools, so each
// upgrade leaves ~14 KiB of garbage (30% of the bytes a rejoin storm
// allocates), and the connection's serving machinery, the HTTP/2 preface
// check included, costs ~5% of the server's CPU in the storm (docs/
// BENCHMARKS.md, "the WebSocket listener"). What is hand-written is only
// the decision and the response: the request head is parsed by net/http's
// own http.ReadRequest, and everything that is not a plain upgrade goes to
// net/http as if it had never been read.

// headBufferSize is the buffer a connection's first request head is read
// into, borrowed from headReaders until the upgrade is answered. A head
// that does not fit (large cookies, say) goes to net/http, which reads it
// under Options.MaxHeaderBytes.
const headBufferSize = 4 << 10

// wsPath is where the edge answers WebSocket upgrades, on the public
// listener: the listener's fast path and net/http's mux both route it.
const wsPath = "/ws"

var headReaders = heldpool.New(newHeadReader)

// headReader is a pooled head reader and what it reads: the socket
// itself, with one non-blocking read(2), for the read that finds whether
// the head has begun to arrive (headSrc.ready), the connection after it.
type headReader struct {
	br  *bufio.Reader
	src headSrc
}

func newHeadReader() *headReader {
	hr := new(headReader)
	hr.br = bufio.NewReaderSize(&hr.src, headBufferSize)
	return hr
}

// release empties hr and gives it back to headReaders.
func (hr *headReader) release() {
	hr.src = headSrc{}
	hr.br.Reset(&hr.src)
	headReaders.Put(hr)
}

// headSrc is a headReader's source: the connection nc; with ready set,
// its next read is peek.ReadNow's of the socket fd, which reports
// errNotReady when nothing has arrived.
type headSrc struct {
	nc    net.Conn
	fd    uintptr
	ready bool
}

// errNotReady: headSrc's ready read found nothing to read.
var errNotReady = errors.New("server: nothing to read yet")

func (s *headSrc) Read(p []byte) (int, error) {
	if s.ready {
		s.ready = false
		n, again, err := peek.ReadNow(s.fd, p)
		if again {
			return 0, errNotReady
		}
		return n, err
	}
	if s.nc == nil {
		return 0, net.ErrClosed
	}
	return s.nc.Read(p)
}

// readyHead returns a head reader for nc once the head has begun to
// arrive (or the connection ended): the read that finds it so borrows the
// reader and reads the socket into it, and gives it back when nothing was
// there, so a connection waiting for its client holds none (a reconnect
// herd has thousands). With the head already there that is one read(2).
// nil: the wait ended first (the head deadline passed, nc was closed).
func readyHead(nc net.Conn) *headReader {
	var rc syscall.RawConn
	if sc, ok := nc.(syscall.Conn); ok && peek.CanRead {
		rc, _ = sc.SyscallConn()
	}
	if rc == nil {
		hr := headReaders.Get()
		hr.src = headSrc{nc: nc}
		return hr
	}
	var hr *headReader
	err := rc.Read(func(fd uintptr) bool {
		hr = headReaders.Get()
		hr.src = headSrc{nc: nc, fd: fd, ready: true}
		if _, err := hr.br.Peek(1); errors.Is(err, errNotReady) {
			hr.release()
			hr = nil
			return false // the poller waits, without a reader
		}
		return true
	})
	if err != nil {
		return nil
	}
	return hr
}

// wsListener is the public listener of a node with an edge. Its accept
// loop hands every connection to a goroutine that reads the first request
// head (see serve): a GET of path (the edge's, "/ws") is parsed and
// served by ws, the edge, with a ResponseWriter that answers on the
// connection itself (upgradeResponse); anything else is handed, with the
// bytes read so far, to the net/http server that accepts from this
// listener (Accept), which serves it as before: pages, probes, a
// WebSocket upgrade with a head too large for the buffer.
type wsListener struct {
	ln      net.Listener
	ws      http.Handler
	path    string
	timeout time.Duration // for the first request head (ReadHeaderTimeout)
	log     *slog.Logger

	conns     chan net.Conn // for net/http
	done      chan struct{} // closed when accepting stops (stop)
	closeOnce sync.Once

	// direct and handedOff count the connections served each way.
	direct, handedOff atomic.Uint64
}

func newWSListener(ln net.Listener, ws http.Handler, path string, timeout time.Duration, log *slog.Logger) *wsListener {
	l := &wsListener{
		ln: ln, ws: noBody(ws), path: path, timeout: timeout, log: log,
		conns: make(chan net.Conn), done: make(chan struct{}),
	}
	go l.acceptLoop()
	return l
}

// Accept returns the next connection for net/http.
func (l *wsListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting; connections already accepted are not closed.
func (l *wsListener) Close() error {
	err := l.ln.Close()
	l.stop()
	return err
}

// Addr is the listening address.
func (l *wsListener) Addr() net.Addr { return l.ln.Addr() }

func (l *wsListener) stop() { l.closeOnce.Do(func() { close(l.done) }) }

// acceptLoop accepts until the listener is closed. An error that is not
// the listener's end (too many open files, say) is retried after a pause
// that doubles up to a second, as net/http does.
func (l *wsListener) acceptLoop() {
	var pause time.Duration
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				l.stop()
				return
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			l.log.Warn("accept failed; retrying", "err", err, "pause", pause)
			select {
			case <-time.After(pause):
				continue
			case <-l.done:
				return
			}
		}
		pause = 0
		go l.serveConn(nc)
	}
}

// serveConn serves nc's first request (serve), then runs on the same
// goroutine what the handler left to run after it (upgradeResponse.Then:
// the edge's connection, its hello and its first frames), once the head's
// reader is back in its pool. One goroutine from the accept to the
// connection's first park: its stack, grown by the head's parse, is not
// grown again from 2 KiB by a new goroutine for the hello (runtime
// copystack was 8% of the herd's reconnect CPU).
func (l *wsListener) serveConn(nc net.Conn) {
	if then := l.serve(nc); then != nil {
		then()
	}
}

// serve reads nc's first request head and serves it, recovering
// a panic of the handler as net/http does: it ends the connection, not
// the process. It returns what the handler left to run after it (nil:
// nothing).
func (l *wsListener) serve(nc net.Conn) (then func()) {
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				l.log.Error("panic serving a WebSocket upgrade", "remote", nc.RemoteAddr().String(), "panic", p)
			}
			nc.Close()
		}
	}()
	if l.timeout > 0 {
		_ = nc.SetReadDeadline(time.Now().Add(l.timeout))
	}
	// Borrow the 4 KiB head reader only once the head has begun to
	// arrive: in a reconnect herd thousands of accepted connections wait
	// for their client's head at once, and each held a reader of its own
	// (the largest allocation of the herd's reconnect phase, 22% of its
	// bytes; docs/benchmarks/2026-12-06-1341-issue34-herd-cuts.md).
	hr := readyHead(nc)
	if hr == nil {
		nc.Close() // no byte before the head deadline
		return
	}
	defer hr.release()
	br := hr.br
	switch headOf(br, l.path) {
	case headFailed:
		nc.Close()
	case headOther:
		l.handOff(nc, br)
	case headUpgrade:
		l.direct.Add(1)
		return l.upgrade(nc, br)
	}
	return nil
}

// handOff gives nc to net/http with what br read of it, with the TCP
// keep-alive Go's listener would have set (Go's defaults), which the
// public listener leaves off for the WebSockets (listenTCP).
func (l *wsListener) handOff(nc net.Conn, br *bufio.Reader) {
	_ = nc.SetReadDeadline(time.Time{}) // net/http sets its own
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true})
	}
	var c net.Conn = nc
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		c = &prefixConn{Conn: nc, prefix: bytes.Clone(b)}
	}
	l.handedOff.Add(1)
	select {
	case l.conns <- c:
	case <-l.done:
		nc.Close()
	}
}

// upgrade parses the head br holds and serves it with the edge. It
// returns what the edge left to run after it (upgradeResponse.Then).
func (l *wsListener) upgrade(nc net.Conn, br *bufio.Reader) func() {
	w := &upgradeResponse{nc: nc, br: br}
	r, err := http.ReadRequest(br)
	if err != nil {
		// What net/http answers to a head it cannot parse.
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte("400 Bad Request"))
		w.finish()
		return nil
	}
	r.RemoteAddr = nc.RemoteAddr().String()
	l.ws.ServeHTTP(w, r)
	if !w.hijacked {
		w.finish()
		return nil
	}
	return w.then
}

// noBody refuses, with 400 and the connection closed, an upgrade request
// that says it has a body (Content-Length other than 0, or a
// Transfer-Encoding). A WebSocket handshake is a GET without one (RFC
// 6455 §4.1), and after the 101 the connection's next bytes are read as
// WebSocket frames: a body would be taken for the client's first frames,
// bytes an intermediary that honours Content-Length forwarded as a body,
// not as frames (request smuggling into the socket).
func noBody(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
			w.Header().Set("Connection", "close")
			http.Error(w, "a WebSocket upgrade request has no body", http.StatusBadRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// headKind is what a connection's first request head is.
type headKind uint8

const (
	headFailed  headKind = iota // the connection ended or timed out first
	headOther                   // anything but a GET of the path: net/http's
	headUpgrade                 // a whole head, a GET of the path, in br
)

// headOf reads from br until it holds the whole first request head (up to
// the empty line) or it is clear the head is not a GET of path: a request
// line that does not begin "GET path " or "GET path?", or a head larger
// than br's buffer. It never consumes: br still holds every byte read.
func headOf(br *bufio.Reader, path string) headKind {
	for {
		b, _ := br.Peek(br.Buffered())
		if !upgradePrefix(b, path) {
			return headOther
		}
		if headEnd(b) { // a GET of path so far: its request line is whole
			return headUpgrade
		}
		if len(b) == br.Size() {
			return headOther // too large for the fast path
		}
		// Wait for at least one more byte (fill reads what is there); an
		// error (the client gone, the head's deadline) ends it.
		if _, err := br.Peek(len(b) + 1); err != nil {
			return headFailed
		}
	}
}

// headEnd reports whether b holds a request head's end, the empty line
// (net/http accepts bare LF line ends too).
func headEnd(b []byte) bool {
	return bytes.Contains(b, []byte("\n\r\n")) || bytes.Contains(b, []byte("\n\n"))
}

// upgradePrefix reports whether b, the first bytes of a connection, may
// still begin a request line "GET path?..." or "GET path HTTP/...".
func upgradePrefix(b []byte, path string) bool {
	want := "GET " + path
	if len(b) <= len(want) {
		return string(b) == want[:len(b)]
	}
	return string(b[:len(want)]) == want && (b[len(want)] == ' ' || b[len(want)] == '?')
}

// upgradeResponse is the ResponseWriter of a request served by the
// WebSocket listener. Its Hijack (and HijackEarly, the edge's) writes the
// response head if the handler set a status (the edge sets none: it
// writes its 101 itself) and hands the connection over, with what the
// client sent past the head still in br. Any other response is written, with its body, once the
// handler returns (finish), and the connection is closed after it: an
// upgrade request that was refused has no next request.
type upgradeResponse struct {
	nc       net.Conn
	br       *bufio.Reader
	header   http.Header
	status   int
	body     []byte
	hijacked bool
	then     func() // see Then
}

// Then has the listener's goroutine run f once the handler has returned
// and the head's reader is back in its pool, if the handler hijacked the
// connection (f is the connection's then; without a hijack it is not
// run). The edge runs a connection this way rather than on a goroutine
// of its own (edge.thenRunner).
func (w *upgradeResponse) Then(f func()) { w.then = f }

func (w *upgradeResponse) Header() http.Header {
	if w.header == nil {
		w.header = make(http.Header)
	}
	return w.header
}

func (w *upgradeResponse) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *upgradeResponse) Write(p []byte) (int, error) {
	if w.hijacked {
		return 0, http.ErrHijacked
	}
	w.WriteHeader(http.StatusOK)
	if len(w.body)+len(p) > 64<<10 {
		return 0, errors.New("server: response too large for an upgrade refusal")
	}
	w.body = append(w.body, p...)
	return len(p), nil
}

// Hijack writes the response head, if a status was set (the 101), and
// hands the connection over. The returned reader holds what the client
// sent past the request head, in a buffer of its own (just that size):
// br goes back to headReaders when the handler returns.
func (w *upgradeResponse) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, early, err := w.HijackEarly()
	if err != nil {
		return nil, nil, err
	}
	var rd io.Reader = nc
	n := len(early)
	if n > 0 {
		rd = io.MultiReader(bytes.NewReader(early), nc)
	}
	br := bufio.NewReaderSize(rd, n) // bufio's minimum is 16 bytes
	if n > 0 {
		_, _ = br.Peek(n) // buffered, as net/http's reader has them
	}
	return nc, bufio.NewReadWriter(br, bufio.NewWriterSize(nc, 16)), nil
}

// HijackEarly is Hijack without the bufio pair: it returns a copy of what
// the client sent past the request head (nil: nothing) instead. The edge
// hijacks this way when it can (edge/handshake.go, earlyHijacker): it
// reads and writes the connection itself, and Hijack's reader and writer
// were two copies of the early bytes and five allocations dropped at once.
func (w *upgradeResponse) HijackEarly() (net.Conn, []byte, error) {
	if w.hijacked {
		return nil, nil, http.ErrHijacked
	}
	w.hijacked = true
	_ = w.nc.SetReadDeadline(time.Time{})
	if w.status != 0 {
		if _, err := w.nc.Write(w.head(nil)); err != nil {
			w.nc.Close()
			return nil, nil, err
		}
	}
	var early []byte
	if n := w.br.Buffered(); n > 0 {
		b, _ := w.br.Peek(n)
		early = bytes.Clone(b)
	}
	return w.nc, early, nil
}

// head is the response's status line and header fields.
func (w *upgradeResponse) head(b []byte) []byte {
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(w.status), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(w.status)...)
	b = append(b, "\r\n"...)
	buf := bytes.NewBuffer(b)
	_ = w.header.Write(buf) // newlines in values become spaces
	buf.WriteString("\r\n")
	return buf.Bytes()
}

// finish writes a response that was not a hijack, then closes the
// connection.
func (w *upgradeResponse) finish() {
	defer w.nc.Close()
	w.WriteHeader(http.StatusOK)
	h := w.Header()
	h.Set("Content-Length", strconv.Itoa(len(w.body)))
	h.Set("Connection", "close")
	if len(w.body) > 0 && h.Get("Content-Type") == "" {
		h.Set("Content-Type", "text/plain; charset=utf-8")
	}
	_ = w.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, _ = w.nc.Write(append(w.head(nil), w.body...))
}

// prefixConn is a connection handed to net/http with the bytes already
// read from it, which its first reads return.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// CloseWrite half-closes a TCP connection, as net/http does before it
// closes one it refused.
func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
