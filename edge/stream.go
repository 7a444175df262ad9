package edge

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/mono"
	"github.com/corral-rt/corral/protocol"
)

// The HTTP fallbacks' requests (docs/TRANSPORTS.md): GET /rt/sse and
// POST /rt/stream open a stream, a connection whose frames the edge
// writes on the response (carrier.go); POST /rt/send carries the
// client's frames to it.

// The paths of the HTTP fallbacks, on the public listener.
const (
	SSEPath    = "/rt/sse"
	StreamPath = "/rt/stream"
	SendPath   = "/rt/send"
)

// The headers of a stream's POSTs and of an HTTP streaming response.
const (
	headerStream = "X-Corral-Stream"
	headerSecret = "X-Corral-Secret"
)

// The Content-Types of POST bodies and of HTTP streaming responses.
const (
	typeJSON        = "application/json"
	typeProto       = "application/x-protobuf"
	typeStreamJSON  = "application/x-corral-stream+json"
	typeStreamProto = "application/x-corral-stream+proto"
)

// StreamHandler serves the HTTP fallbacks' paths (SSEPath, StreamPath,
// SendPath; the caller mounts it under "/rt/"). Safe for concurrent use.
func (e *Edge) StreamHandler() http.Handler {
	return http.HandlerFunc(e.serveRT)
}

func (e *Edge) serveRT(w http.ResponseWriter, r *http.Request) {
	if !e.cors(w, r) {
		return
	}
	if r.Method == http.MethodOptions {
		h := w.Header()
		h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Corral-Stream, X-Corral-Secret, Last-Event-ID")
		h.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	switch {
	case r.URL.Path == SSEPath && r.Method == http.MethodGet:
		e.serveOpen(w, r, carrierSSE)
	case r.URL.Path == StreamPath && r.Method == http.MethodPost:
		e.serveOpen(w, r, carrierStream)
	case r.URL.Path == SendPath && (r.Method == http.MethodPost || r.Method == http.MethodDelete):
		e.serveSend(w, r)
	case r.URL.Path == SSEPath || r.URL.Path == StreamPath || r.URL.Path == SendPath:
		httpError(w, http.StatusMethodNotAllowed, "method not allowed")
	default:
		http.NotFound(w, r)
	}
}

// httpError answers a refused request of a stream (docs/TRANSPORTS.md):
// the status is what a program reads, the message is for people.
func httpError(w http.ResponseWriter, status int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"message": msg}})
}

// cors checks a cross-origin request's Origin as the WebSocket's is
// checked (the same host, Config.OriginPatterns, or AnyOrigin) and adds
// the headers that let the browser read the answer. A refused origin is
// answered 403 (false).
func (e *Edge) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if !e.cfg.AnyOrigin && !originAllowed(origin, r.Host, e.cfg.OriginPatterns) {
		e.metrics.refuse(refusedOrigin)
		httpError(w, http.StatusForbidden, "origin not allowed")
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Add("Vary", "Origin")
	h.Set("Access-Control-Expose-Headers", headerStream+", "+headerSecret)
	return true
}

// originAllowed reports whether origin passes the rule an upgrade's
// passes (matchOrigin, handshake.go).
func originAllowed(origin, host string, patterns []string) bool {
	if sameHost(origin, host) {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	ok, err := matchOrigin(u, host, patterns)
	return ok && err == nil
}

// validStreamID reports whether id is a stream id a client may choose:
// 16 to 64 characters of [A-Za-z0-9_-].
func validStreamID(id string) bool {
	if len(id) < 16 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// encodingOfType is the encoding of a POST body's Content-Type.
func encodingOfType(ct string) (protocol.Encoding, bool) {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return 0, false
	}
	switch mt {
	case typeJSON:
		return protocol.JSON, true
	case typeProto, "application/protobuf", "application/proto":
		return protocol.Proto, true
	}
	return 0, false
}

// readBody reads r's body up to limit bytes; past it, ok is false.
func readBody(r *http.Request, limit int64) (body []byte, ok bool, err error) {
	if r.ContentLength > limit {
		return nil, false, nil
	}
	body, err = io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, true, err
	}
	return body, int64(len(body)) <= limit, nil
}

func newSecret() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// serveOpen opens a stream: admission control and a pending handshake,
// as for a WebSocket upgrade; then the response head (and for SSE the
// corral-open event), written before the connection is visible to any
// other goroutine. Over HTTP/1.1 the connection is hijacked and written
// by the edge's non-blocking writer; over HTTP/2 the handler stays until
// the stream ends (httpOut).
func (e *Edge) serveOpen(w http.ResponseWriter, r *http.Request, kind carrierKind) {
	id := r.URL.Query().Get("stream")
	if !validStreamID(id) {
		e.metrics.refuse(refusedStreamID)
		httpError(w, http.StatusBadRequest, "stream: the stream parameter must be 16 to 64 characters of A-Z a-z 0-9 _ -")
		return
	}
	if kind == carrierSSE && r.Header.Get("Last-Event-ID") != "" {
		// EventSource's own reconnect: the stream is not kept across
		// carriers. 204 ends the EventSource; the SDK resumes the
		// session on a new stream (docs/TRANSPORTS.md).
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	enc := protocol.JSON
	var hello []byte
	if kind == carrierStream {
		var ok bool
		if enc, ok = encodingOfType(r.Header.Get("Content-Type")); !ok {
			e.metrics.refuse(refusedPostType)
			httpError(w, http.StatusUnsupportedMediaType, "stream: Content-Type must be application/json or application/x-protobuf")
			return
		}
		body, ok, err := readBody(r, e.cfg.MaxPostBytes)
		if err != nil {
			return // the client went away
		}
		if !ok {
			e.metrics.refuse(refusedPostTooLarge)
			httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("stream: body larger than %d bytes", e.cfg.MaxPostBytes))
			return
		}
		hello = body
	}

	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusServiceUnavailable, "corral edge is shutting down")
		return
	}
	e.connWG.Add(1)
	e.mu.Unlock()
	served := false
	defer func() {
		if !served {
			e.connWG.Done()
		}
	}()
	admitKind, wait := e.admit.admit(r)
	if wait > 0 {
		e.metrics.admissions.WithLabelValues(admitKind, "deferred").Inc()
		refuse(w, wait)
		return
	}
	e.metrics.admissions.WithLabelValues(admitKind, "accepted").Inc()
	if !e.pendingAdd() {
		e.refusePending(w)
		return
	}
	var pendingOnce sync.Once
	release := func() { pendingOnce.Do(e.pendingDone) }
	defer func() {
		if !served {
			release()
		}
	}()
	if !e.reserveStream(id) {
		e.metrics.refuse(refusedStreamID)
		httpError(w, http.StatusConflict, "stream: this stream id is in use; make a new one")
		return
	}
	defer func() {
		if !served {
			e.unreserveStream(id)
		}
	}()

	s := &stream{id: id, secret: newSecret(), kind: kind}
	h := w.Header()
	h.Set("Cache-Control", "no-cache, no-store")
	h.Set("X-Accel-Buffering", "no")
	switch {
	case kind == carrierSSE:
		h.Set("Content-Type", "text/event-stream")
	case enc == protocol.Proto:
		h.Set("Content-Type", typeStreamProto)
	default:
		h.Set("Content-Type", typeStreamJSON)
	}
	if kind == carrierStream {
		h.Set(headerStream, s.id)
		h.Set(headerSecret, s.secret)
	}
	var first []byte
	if kind == carrierSSE {
		open, _ := json.Marshal(map[string]any{
			"stream": s.id, "secret": s.secret, "heartbeatMs": e.cfg.StreamHeartbeat.Milliseconds(),
		})
		first = append(append([]byte("event: corral-open\ndata: "), open...), "\n\n"...)
	}

	c := &conn{
		e:      e,
		enc:    enc,
		remote: r.RemoteAddr,
		id:     e.nextID.Add(1),
		limits: newLimiter(e.rules),
		stream: s,
	}
	c.handshakeDone = release
	c.hook = e.captureHook(r)
	// The carrier; its head is written below, once the stream is
	// published, holding the writer token: a POST may come as soon as
	// the client reads the secret, and a close (a drain) waits for it.
	nc, brw, err := http.NewResponseController(w).Hijack()
	switch {
	case err == nil:
		// HTTP/1.1: the edge's own writer, on the socket. The body
		// ends with the connection (Connection: close).
		if brw.Writer.Buffered() > 0 {
			_ = brw.Writer.Flush()
		}
		h.Set("Connection", "close")
		s.nc = nc
		c.nc = nc
		c.wire = newWire(nc)
		if e.poller != nil {
			c.raw = rawConn(nc)
		}
	case errors.Is(err, http.ErrNotSupported):
		// HTTP/2: blocking writes through the ResponseWriter.
		s.out = newHTTPOut(w, e.cfg.WriteTimeout)
		c.wire = &wire{nc: s.out}
	default:
		return
	}
	c.link = e.linkFor(c.id)
	c.lastRead.Store(mono.Now())
	s.lastWrite.Store(mono.Now())
	if !e.track(c) {
		if s.nc != nil {
			s.nc.Close()
		}
		return
	}
	s.helloTimer = time.AfterFunc(e.cfg.HelloTimeout, func() {
		c.closeWith(corralv1.Code_CODE_HELLO_REQUIRED, "no hello within the timeout", 0, false)
		c.handshakeDone()
	})
	// An HTTP stream holds the reader token until the hello in its body
	// is read: a POST before the Welcome is refused (409).
	if hello != nil {
		s.opening = make(chan struct{})
		s.post.Lock()
	}
	unlock := func() {
		if hello != nil {
			s.post.Unlock()
			close(s.opening)
			hello = nil
		}
	}
	defer unlock()
	c.mu.Lock()
	c.startWriterLocked()
	c.mu.Unlock()
	e.metrics.accepted.Inc()
	e.settle.accepted(mono.Now())
	e.metrics.streams.WithLabelValues(kind.String()).Inc()
	e.publishStream(c)
	served = true
	if s.nc != nil {
		var head bytes.Buffer
		head.WriteString("HTTP/1.1 200 OK\r\n")
		_ = h.Write(&head)
		head.WriteString("\r\n")
		head.Write(first)
		_ = nc.SetWriteDeadline(time.Now().Add(e.cfg.WriteTimeout))
		_, err = nc.Write(head.Bytes())
		_ = nc.SetWriteDeadline(time.Time{})
	} else {
		w.WriteHeader(http.StatusOK)
		_, err = s.out.Write(first)
	}
	if afterStreamHead != nil {
		afterStreamHead(c)
	}
	// What was queued meanwhile (a close, when a hello POSTed as soon as
	// the client read the secret was refused) goes to the sender with
	// the token still held: released and taken again, the reader's
	// finish could end the connection in between, and its close would
	// never be written (the client would see a stream without a close).
	c.mu.Lock()
	keep := err == nil && (len(c.queue) > 0 || c.closing)
	if !keep {
		c.writing = false
		c.writers.Done()
	}
	c.mu.Unlock()
	if err != nil {
		unlock()
		c.cutOff()
		return
	}
	if keep {
		c.sender().add(c)
	}
	if s.nc != nil {
		go s.watch(c)
	}
	if hello != nil {
		e.deliver(c, enc, hello, r.Header.Get("Authorization"))
		unlock()
	}
	if s.out != nil {
		s.out.wait(r.Context().Done())
		c.cutOff()
	}
}

// afterStreamHead, when set (by tests), runs once a stream's head is
// written, while serveOpen still holds the writer token.
var afterStreamHead func(c *conn)

// serveSend reads a POST's frames into its stream's connection, or ends
// the stream for a DELETE.
func (e *Edge) serveSend(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("stream")
	if !validStreamID(id) || r.Header.Get(headerStream) != id {
		e.metrics.refuse(refusedStreamID)
		httpError(w, http.StatusBadRequest, "stream: the stream parameter and the X-Corral-Stream header must name the same stream")
		return
	}
	c := e.streamConn(id)
	if c == nil {
		e.metrics.refuse(refusedStreamUnknown)
		httpError(w, http.StatusNotFound, "stream: no such stream here; open a new stream and resume")
		return
	}
	s := c.stream
	if subtle.ConstantTimeCompare([]byte(r.Header.Get(headerSecret)), []byte(s.secret)) != 1 {
		e.metrics.refuse(refusedStreamSecret)
		httpError(w, http.StatusForbidden, "stream: wrong X-Corral-Secret")
		return
	}
	if r.Method == http.MethodDelete {
		// The client is leaving: the stream ends as a WebSocket closed
		// normally (the session's presence goes at once).
		if !s.lockPost(r.Context(), e.cfg.HelloTimeout) {
			e.metrics.refuse(refusedPostBusy)
			httpError(w, http.StatusConflict, "stream: one POST at a time per stream")
			return
		}
		s.finishLocked(c, true)
		s.post.Unlock()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	enc, ok := encodingOfType(r.Header.Get("Content-Type"))
	if !ok {
		e.metrics.refuse(refusedPostType)
		httpError(w, http.StatusUnsupportedMediaType, "stream: Content-Type must be application/json or application/x-protobuf")
		return
	}
	body, ok, err := readBody(r, e.cfg.MaxPostBytes)
	if err != nil {
		return
	}
	if !ok {
		e.metrics.refuse(refusedPostTooLarge)
		httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("stream: body larger than %d bytes", e.cfg.MaxPostBytes))
		return
	}
	if !s.lockPost(r.Context(), e.cfg.HelloTimeout) {
		e.metrics.refuse(refusedPostBusy)
		httpError(w, http.StatusConflict, "stream: one POST at a time per stream")
		return
	}
	status := e.deliver(c, enc, body, r.Header.Get("Authorization"))
	s.post.Unlock()
	switch status {
	case http.StatusNoContent:
		w.WriteHeader(status)
	case http.StatusNotFound:
		e.metrics.refuse(refusedStreamUnknown)
		httpError(w, status, "stream: the stream has ended; open a new stream and resume")
	case http.StatusRequestEntityTooLarge:
		httpError(w, status, fmt.Sprintf("stream: a frame larger than %d bytes", e.cfg.ReadLimit))
	default:
		httpError(w, status, "stream: a frame could not be read")
	}
}

// deliver hands a POST body's frames to c, in order, as readFrames hands
// a WebSocket's: the hello first, the read limit, the rate limits, the
// frames the edge answers itself. It answers the POST's status. The
// caller holds c.stream.post (it is c's reader).
func (e *Edge) deliver(c *conn, enc protocol.Encoding, body []byte, authz string) int {
	s := c.stream
	if s.ended {
		return http.StatusNotFound
	}
	frames, err := splitFrames(enc, body)
	for _, raw := range frames {
		if int64(len(raw)) > e.cfg.ReadLimit {
			c.readFailed(errTooLarge, false)
			s.finishLocked(c, false)
			return http.StatusRequestEntityTooLarge
		}
		c.lastRead.Store(mono.Now())
		f := new(corralv1.ClientFrame)
		derr := protocol.DecodeClient(enc, raw, f)
		if errors.Is(derr, protocol.ErrUnknownFrame) && s.helloed {
			if !c.welcomed.Load() && !c.awaitWelcome() {
				s.finishLocked(c, false)
				return http.StatusNoContent
			}
			if c.check(nil) {
				c.sendError(corralv1.Code_CODE_UNKNOWN_FRAME, derr.Error())
			}
			continue
		}
		if derr != nil {
			c.readFailed(fmt.Errorf("%w: %w", protocol.ErrBadFrame, derr), !s.helloed)
			s.finishLocked(c, false)
			return http.StatusBadRequest
		}
		if !s.helloed {
			s.helloed = true
			if !s.helloTimer.Stop() {
				s.finishLocked(c, false) // timed out: the close is queued
				return http.StatusNoContent
			}
			hello := f.GetHello()
			if hello != nil && hello.GetToken() == "" {
				hello.Token = bearer(authz)
			}
			if !c.attachHello(hello) {
				s.finishLocked(c, false)
				return http.StatusNoContent
			}
			continue
		}
		if !c.handleFrame(f) {
			s.finishLocked(c, false)
			return http.StatusNoContent
		}
	}
	if err != nil {
		c.readFailed(err, !s.helloed)
		s.finishLocked(c, false)
		return http.StatusBadRequest
	}
	return http.StatusNoContent
}

// bearer is the token of an "Authorization: Bearer TOKEN" header.
func bearer(authz string) string {
	const p = "Bearer "
	if len(authz) > len(p) && strings.EqualFold(authz[:len(p)], p) {
		return strings.TrimSpace(authz[len(p):])
	}
	return ""
}

// errBadBody is a POST body that does not split into frames.
var errBadBody = fmt.Errorf("%w: a POST body must be JSON lines or length-prefixed protobuf records", protocol.ErrBadFrame)

// splitFrames splits a POST body into its frames: JSON lines, or
// records of a 4-byte big-endian length and that many bytes. The frames
// before a malformed end are returned with errBadBody.
func splitFrames(enc protocol.Encoding, body []byte) ([][]byte, error) {
	var out [][]byte
	if enc == protocol.JSON {
		for line := range bytes.SplitSeq(body, []byte("\n")) {
			line = bytes.TrimSpace(line)
			if len(line) > 0 {
				out = append(out, line)
			}
		}
		return out, nil
	}
	for len(body) > 0 {
		if len(body) < 4 {
			return out, errBadBody
		}
		n := binary.BigEndian.Uint32(body)
		if uint64(n) > uint64(len(body)-4) {
			return out, errBadBody
		}
		out = append(out, body[4:4+n])
		body = body[4+n:]
	}
	return out, nil
}

// reserveStream claims id for a stream being opened (nil in streams:
// not yet served); false when id is in use.
func (e *Edge) reserveStream(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.streams[id]; ok {
		return false
	}
	if e.streams == nil {
		e.streams = make(map[string]*conn)
	}
	e.streams[id] = nil
	return true
}

func (e *Edge) unreserveStream(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c, ok := e.streams[id]; ok && c == nil {
		delete(e.streams, id)
	}
}

// publishStream makes c's stream reachable by its POSTs.
func (e *Edge) publishStream(c *conn) {
	e.mu.Lock()
	e.streams[c.stream.id] = c
	e.mu.Unlock()
}

// streamConn is the open stream id's connection, or nil.
func (e *Edge) streamConn(id string) *conn {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.streams[id]
}

// dropStream forgets a finished stream's id.
func (e *Edge) dropStream(c *conn) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.streams[c.stream.id] == c {
		delete(e.streams, c.stream.id)
	}
}

// beatStreams queues a heartbeat for every stream with nothing written
// for Config.StreamHeartbeat (the sweeper).
func (e *Edge) beatStreams(conns []*conn, now int64) {
	every := int64(e.cfg.StreamHeartbeat)
	for _, c := range conns {
		if s := c.stream; s != nil && now-s.lastWrite.Load() >= every {
			s.lastWrite.Store(now)
			c.push(encoded{b: heartbeatEntry}, pushLive, "", nil, nil)
		}
	}
}
