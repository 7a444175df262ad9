package edge

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/mono"
	"github.com/corral-rt/corral/protocol"
)

// The HTTP carriers of a connection (docs/TRANSPORTS.md): a connection
// whose client has no WebSocket reads its frames from an SSE response or
// an HTTP streaming response, and sends its own by POST (stream.go). The
// connection is the same in every other way: the same queue, bounds,
// batching and writer (conn.send); only how a batch is framed differs
// (stream.message) and how the socket is closed (stream.close, cut).

// carrierKind is how a stream frames what the writer writes.
type carrierKind uint8

const (
	carrierSSE    carrierKind = iota // text/event-stream events, JSON
	carrierStream                    // length-prefixed records
)

func (k carrierKind) String() string {
	if k == carrierSSE {
		return "sse"
	}
	return "stream"
}

// heartbeatEntry is queued (by the sweeper) for a stream with nothing
// written for Config.StreamHeartbeat: the writer turns it into an SSE
// comment or an empty record, or drops it when frames go with it.
var heartbeatEntry = []byte{}

// stream is a connection's HTTP carrier. Its fields are set before the
// connection is visible to anyone else; events is the writer's (the
// holder of the writer token), helloed and ended the reader's: the holder
// of post.
type stream struct {
	id     string
	secret string
	kind   carrierKind
	// nc is the hijacked HTTP/1.1 connection; nil over HTTP/2, where out
	// writes through the handler's ResponseWriter.
	nc  net.Conn
	out *httpOut

	events    uint64       // SSE event ids: the last one written
	lastWrite atomic.Int64 // mono.Now of the last write (heartbeats)

	// post is the reader token: one POST at a time reads frames into the
	// connection, in order (a second is refused 409).
	post sync.Mutex
	// opening, for an HTTP stream whose hello is in its opening request's
	// body, is closed once that hello is delivered and post released: the
	// Welcome may reach the client before, and its next POST waits for
	// the hello instead of being refused (lockPost).
	opening    chan struct{}
	helloed    bool        // the first frame was taken
	ended      bool        // the connection is finished: POSTs get 404
	helloTimer *time.Timer // closes a stream without a hello in time
	endOnce    sync.Once
	cutOnce    sync.Once
}

// lockPost takes the reader token for a POST. Held by another POST it
// refuses (false: 409); held by the opening request's hello, it waits for
// the hello, at most wait (or until ctx ends).
func (s *stream) lockPost(ctx context.Context, wait time.Duration) bool {
	if s.post.TryLock() {
		return true
	}
	if s.opening == nil {
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-s.opening:
	case <-ctx.Done():
		return false
	case <-t.C:
		return false
	}
	return s.post.TryLock()
}

// message frames q, taken from the connection's queue, for the carrier:
// one SSE event or one record (the one frame, or a Batch of them). It
// runs on the connection's writer. *bp keeps the buffer.
func (s *stream) message(c *conn, bp *[]byte, q [][]byte) []byte {
	s.lastWrite.Store(mono.Now())
	n := 0
	for _, b := range q {
		if len(b) > 0 { // heartbeats go only when nothing else does
			q[n] = b
			n++
		}
	}
	q = q[:n]
	buf := (*bp)[:0]
	switch s.kind {
	case carrierSSE:
		if n == 0 {
			buf = append(buf, ":\n\n"...)
			break
		}
		s.events++
		buf = append(buf, "id: "...)
		buf = strconv.AppendUint(buf, s.events, 10)
		buf = append(buf, "\ndata: "...)
		start := len(buf)
		buf = appendFrames(c.enc, buf, q)
		if bytes.ContainsAny(buf[start:], "\r\n") {
			buf = append(buf[:start], sseData(buf[start:])...)
		}
		buf = append(buf, "\n\n"...)
	default:
		buf = append(buf, 0, 0, 0, 0)
		if n > 0 {
			buf = appendFrames(c.enc, buf, q)
			binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
		}
	}
	*bp = buf
	return buf
}

// appendFrames appends the one frame of q, or a Batch of them.
func appendFrames(enc protocol.Encoding, buf []byte, q [][]byte) []byte {
	if len(q) == 1 {
		return append(buf, q[0]...)
	}
	return protocol.AppendBatch(enc, buf, q)
}

// sseData splits p at its line breaks into SSE data lines: JSON the
// protocol makes has none, but an event must never end early.
func sseData(p []byte) []byte {
	p = bytes.ReplaceAll(p, []byte("\r\n"), []byte("\n"))
	p = bytes.ReplaceAll(p, []byte("\r"), []byte("\n"))
	return bytes.ReplaceAll(p, []byte("\n"), []byte("\ndata: "))
}

// close ends the carrier after the close frame was written (the writer's
// closeSocket, holding the writer token): an SSE stream also gets its
// corral-close event. The connection then finishes.
func (s *stream) close(c *conn, code corralv1.Code, reason string) {
	if s.kind == carrierSSE {
		data, _ := json.Marshal(struct {
			Code   int    `json:"code"`
			Reason string `json:"reason"`
		}{int(code), reason})
		ev := append([]byte("event: corral-close\ndata: "), data...)
		ev = append(ev, "\n\n"...)
		if s.nc != nil {
			_ = s.nc.SetWriteDeadline(time.Now().Add(c.e.cfg.WriteTimeout))
		}
		_, _ = c.wire.Write(ev)
	}
	s.cut(c)
}

// cut closes the carrier, at once, and finishes the connection (on a
// goroutine: finish waits for the writer, which may be the caller). Safe
// to call more than once and from anywhere.
func (s *stream) cut(c *conn) {
	s.cutOnce.Do(func() {
		if s.nc != nil {
			_ = s.nc.Close()
		} else {
			s.out.close()
		}
	})
	go s.end(c)
}

// watch ends the stream when its client closes the hijacked connection
// (or sends anything: nothing is expected after the request). A
// goroutine per HTTP/1.1 stream: unlike a WebSocket's reader it does not
// park (see docs/TRANSPORTS.md).
func (s *stream) watch(c *conn) {
	var b [1]byte
	_, _ = s.nc.Read(b[:])
	c.cutOff()
}

// end finishes the connection once, as its reader: it takes post.
func (s *stream) end(c *conn) {
	s.post.Lock()
	defer s.post.Unlock()
	s.finishLocked(c, false)
}

// finishLocked finishes the connection once; clean: the client said it
// is leaving (DELETE), as a WebSocket closed normally. post must be held.
func (s *stream) finishLocked(c *conn, clean bool) {
	s.endOnce.Do(func() {
		s.ended = true
		if s.helloTimer != nil {
			s.helloTimer.Stop()
		}
		c.finish(clean)
	})
}

// httpOut writes a stream through an http.ResponseWriter that cannot be
// hijacked (HTTP/2): blocking, each write flushed and bounded by the
// write timeout, on the connection's writer's fallback path
// (conn.sendBlocking: wire.raw is nil). The handler that made it waits
// for done, then takes mu for good: no write after it returned.
type httpOut struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	done    chan struct{}
	once    sync.Once

	mu     sync.Mutex // guards the following field, held across a write
	closed bool
}

func newHTTPOut(w http.ResponseWriter, timeout time.Duration) *httpOut {
	return &httpOut{w: w, rc: http.NewResponseController(w), timeout: timeout, done: make(chan struct{})}
}

func (o *httpOut) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return 0, net.ErrClosed
	}
	_ = o.rc.SetWriteDeadline(time.Now().Add(o.timeout))
	n, err := o.w.Write(p)
	if err == nil {
		err = o.rc.Flush()
	}
	return n, err
}

// close lets the handler return.
func (o *httpOut) close() { o.once.Do(func() { close(o.done) }) }

// wait holds the handler until the stream ends or its request does, then
// closes the writer for good.
func (o *httpOut) wait(stop <-chan struct{}) {
	select {
	case <-o.done:
	case <-stop:
	}
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
}
