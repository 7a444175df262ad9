package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/coder/websocket"
	"github.com/corral-rt/corral/protocol"
)

// Transport is how a connection reaches the server: a WebSocket, or one of
// the HTTP fallbacks for networks that strip Upgrade (docs/TRANSPORTS.md).
// The session is the same on every transport: the same frames, resume and
// guarantees.
type Transport int

const (
	// WebSocket: one socket both ways (the default).
	WebSocket Transport = iota
	// SSE: server frames on a text/event-stream response, client frames
	// by POST. JSON only.
	SSE
	// HTTPStream: server frames as length-prefixed records on a streaming
	// response (HTTP/1.1 or HTTP/2), client frames by POST. JSON or proto.
	HTTPStream
)

func (t Transport) String() string {
	switch t {
	case SSE:
		return "sse"
	case HTTPStream:
		return "stream"
	}
	return "websocket"
}

// ParseTransport is the Transport of a name: "ws" or "websocket", "sse",
// "stream".
func ParseTransport(s string) (Transport, error) {
	switch s {
	case "", "ws", "websocket":
		return WebSocket, nil
	case "sse":
		return SSE, nil
	case "stream", "http-stream":
		return HTTPStream, nil
	}
	return 0, fmt.Errorf("client: unknown transport %q (ws, sse, stream)", s)
}

// httpCarrier is a connection's HTTP fallback: the response it reads the
// server's frames from, and the POSTs it sends its own with. next is
// called by one reader at a time; post by one writer (Conn.writeMu).
type httpCarrier struct {
	kind   Transport
	hc     *http.Client
	base   string // scheme://host[/prefix], without /rt/...
	query  string // the dial URL's query, for the opening request
	header http.Header
	enc    protocol.Encoding
	limit  int64
	id     string

	ctx    context.Context // the stream's: cancel ends the response
	cancel context.CancelFunc

	opened bool // the stream's response is open (HTTPStream: after the hello)
	secret string
	body   io.ReadCloser
	br     *bufio.Reader
}

// httpBase maps a dial URL (ws://host/ws) to the HTTP fallbacks' base
// (http://host) and the URL's query.
func httpBase(raw string) (base, query string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", err
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	}
	query = u.RawQuery
	u.RawQuery, u.Fragment = "", ""
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/ws")
	return u.String(), query, nil
}

// fallbackClient is the HTTP client of the fallbacks when Options has
// none: http.DefaultTransport's settings, but keeping more idle
// connections per host, since every connection POSTs while its stream
// holds one (the default keeps 2: a process with many connections would
// dial a socket per POST).
var fallbackClient = func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 256
	return &http.Client{Transport: t}
}()

func newStreamID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// dialHTTP opens an SSE stream at once (it waits for corral-open); an
// HTTP stream opens with its first POST, the hello (post).
func dialHTTP(ctx context.Context, rawURL string, opts Options, limit int64) (*httpCarrier, error) {
	base, query, err := httpBase(rawURL)
	if err != nil {
		return nil, fmt.Errorf("client: dial %s: %w", rawURL, err)
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = fallbackClient
	}
	h := &httpCarrier{
		kind: opts.Transport, hc: hc, base: base, query: query, header: opts.Header,
		enc: opts.Encoding, limit: limit, id: newStreamID(),
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	if h.kind == SSE {
		if h.enc != protocol.JSON {
			return nil, errors.New("client: SSE carries JSON only")
		}
		if err := h.open(ctx, nil); err != nil {
			h.cancel()
			return nil, err
		}
	}
	return h, nil
}

func (h *httpCarrier) url(path string, open bool) string {
	u := h.base + path + "?stream=" + h.id
	if open && h.query != "" {
		u += "&" + h.query
	}
	return u
}

func (h *httpCarrier) contentType() string {
	if h.enc == protocol.Proto {
		return "application/x-protobuf"
	}
	return "application/json"
}

// open makes the stream's request: GET /rt/sse, or POST /rt/stream with
// the hello as its body. ctx bounds it until the response's head (and for
// SSE its corral-open event); the response lives on in h.ctx.
func (h *httpCarrier) open(ctx context.Context, hello []byte) error {
	var req *http.Request
	var err error
	if h.kind == SSE {
		req, err = http.NewRequestWithContext(h.ctx, http.MethodGet, h.url("/rt/sse", true), nil)
	} else {
		req, err = http.NewRequestWithContext(h.ctx, http.MethodPost, h.url("/rt/stream", true), bytes.NewReader(hello))
	}
	if err != nil {
		return err
	}
	for k, v := range h.header {
		req.Header[k] = v
	}
	if h.kind == SSE {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Content-Type", h.contentType())
	}
	stop := context.AfterFunc(ctx, h.cancel)
	defer stop()
	resp, err := h.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("client: dial %s: %w", req.URL.Redacted(), err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		return fmt.Errorf("client: dial %s: %s: %s", req.URL.Redacted(), resp.Status, bytes.TrimSpace(b))
	}
	h.body, h.br = resp.Body, bufio.NewReaderSize(resp.Body, 4<<10)
	h.opened = true
	if h.kind == HTTPStream {
		h.secret = resp.Header.Get("X-Corral-Secret")
		return nil
	}
	ev, data, err := h.event()
	if err != nil {
		return fmt.Errorf("client: dial %s: %w", req.URL.Redacted(), err)
	}
	var o struct{ Secret string }
	if ev != "corral-open" || json.Unmarshal(data, &o) != nil || o.Secret == "" {
		return fmt.Errorf("client: dial %s: no corral-open event", req.URL.Redacted())
	}
	h.secret = o.Secret
	return nil
}

// post sends one frame: the hello that opens an HTTP stream, or a
// POST /rt/send.
func (h *httpCarrier) post(ctx context.Context, frame []byte) error {
	var body []byte
	if h.enc == protocol.Proto {
		body = binary.BigEndian.AppendUint32(nil, uint32(len(frame)))
		body = append(body, frame...)
	} else {
		body = append(append(body, frame...), '\n')
	}
	if !h.opened {
		return h.open(ctx, body)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url("/rt/send", false), bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range h.header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", h.contentType())
	req.Header.Set("X-Corral-Stream", h.id)
	req.Header.Set("X-Corral-Secret", h.secret)
	resp, err := h.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("client: POST: %s: %s", resp.Status, bytes.TrimSpace(b))
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

// errStreamEnded is a stream's response that ended without a close: the
// network's doing (as WebSocket's 1006), so the session resumes.
var errStreamEnded = errors.New("client: the stream ended without a close")

// next reads the next server message: one ServerFrame (or Batch). At the
// stream's end it returns a *websocket.CloseError for an SSE stream's
// corral-close, or errStreamEnded.
func (h *httpCarrier) next() ([]byte, error) {
	if h.kind == SSE {
		for {
			ev, data, err := h.event()
			if err != nil {
				return nil, err
			}
			switch ev {
			case "", "message":
				return data, nil
			case "corral-close":
				var cl struct {
					Code   int
					Reason string
				}
				_ = json.Unmarshal(data, &cl)
				return nil, websocket.CloseError{Code: websocket.StatusCode(cl.Code), Reason: cl.Reason}
			}
		}
	}
	var n [4]byte
	for {
		if _, err := io.ReadFull(h.br, n[:]); err != nil {
			return nil, h.ended(err)
		}
		l := binary.BigEndian.Uint32(n[:])
		if l == 0 {
			continue // heartbeat
		}
		if int64(l) > h.limit {
			return nil, fmt.Errorf("client: a record of %d bytes, over the read limit", l)
		}
		p := make([]byte, l)
		if _, err := io.ReadFull(h.br, p); err != nil {
			return nil, h.ended(err)
		}
		return p, nil
	}
}

func (h *httpCarrier) ended(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errStreamEnded
	}
	return err
}

// event reads one SSE event (comments skipped): its type and data.
func (h *httpCarrier) event() (string, []byte, error) {
	var ev string
	var data []byte
	has := false
	for {
		line, err := h.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A long line: gather it whole, within the read limit.
			buf := append([]byte(nil), line...)
			for err == bufio.ErrBufferFull {
				if int64(len(buf)) > h.limit+64 {
					return "", nil, errors.New("client: an event over the read limit")
				}
				line, err = h.br.ReadSlice('\n')
				buf = append(buf, line...)
			}
			line = buf
		}
		if err != nil {
			return "", nil, h.ended(err)
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if has {
				return ev, data, nil
			}
			continue
		case line[0] == ':':
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev, has = string(value), true
		case "data":
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, value...)
			if data == nil {
				data = []byte{}
			}
			if int64(len(data)) > h.limit {
				return "", nil, errors.New("client: an event over the read limit")
			}
			has = true
		}
	}
}

// leave tells the server the client is leaving (DELETE /rt/send), so
// that the session's presence goes at once, as after a WebSocket's
// normal close. Best effort, bounded by ctx.
func (h *httpCarrier) leave(ctx context.Context) {
	if !h.opened {
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, h.url("/rt/send", false), nil)
	if err != nil {
		return
	}
	for k, v := range h.header {
		req.Header[k] = v
	}
	req.Header.Set("X-Corral-Stream", h.id)
	req.Header.Set("X-Corral-Secret", h.secret)
	if resp, err := h.hc.Do(req); err == nil {
		resp.Body.Close()
	}
}

// closeNow ends the stream's response.
func (h *httpCarrier) closeNow() {
	h.cancel()
	if h.body != nil {
		h.body.Close()
	}
}
