package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/wsframe"
	"github.com/corral-rt/corral/protocol"
)

// Options configure Dial. The zero value speaks JSON without a token.
type Options struct {
	// Token is the connection token (JWT, or a user id with --insecure-dev).
	Token string
	// TokenProvider, when set, is called for the token of every hello in
	// place of Token, and by a Session before the token expires
	// (Welcome.expires_unix) to refresh it on the live connection. It
	// should return a token the backend issued just now. An error fails
	// the dial (a Session retries it with Backoff) or the refresh (the
	// server then closes the connection at the expiry with
	// CODE_TOKEN_EXPIRED, and the Session reconnects with a new token).
	TokenProvider func(ctx context.Context) (string, error)
	// Encoding picks the subprotocol. Default JSON.
	Encoding protocol.Encoding
	// Resume, when set, resumes an earlier session.
	Resume *corralv1.Resume
	// Header is sent with the upgrade request (e.g. Origin).
	Header http.Header
	// FrameBuffer is the capacity of Frames. Default 4096.
	FrameBuffer int
	// OnFrame, when set, receives every server frame in order on the
	// connection's read goroutine, in place of Frames (which then carries
	// nothing and is only closed when the connection ends). It saves a
	// channel hand-off and a goroutine wake-up per frame: for clients that
	// receive many frames and handle each quickly. While it runs nothing
	// more is read, so it must not block, and it must not wait on this
	// connection's requests (Join, Publish, ...).
	OnFrame func(*corralv1.ServerFrame)
	// ReadLimit bounds one server message. Default 16 MiB.
	ReadLimit int64
	// Transport picks the carrier: WebSocket (the default), or an HTTP
	// fallback, SSE or HTTPStream, at the same URL (ws://host/ws: the
	// fallbacks' paths are beside it, docs/TRANSPORTS.md).
	Transport Transport
	// HTTPClient makes the upgrade request (or a fallback's requests), e.g. to dial from a chosen
	// source address or with chosen socket options. Nil:
	// http.DefaultClient.
	HTTPClient *http.Client
}

// CloseError is why a connection ended: the WebSocket close code and
// reason, and the ReconnectHint the server sent before closing, if any.
type CloseError struct {
	Code   websocket.StatusCode
	Reason string
	// Hint is the ReconnectHint that came before a close of the resume or
	// retry class (code, full reason, delay).
	Hint *corralv1.ReconnectHint
	// Refusal is the Error frame (no room, no ref) that came before a
	// close of the stop class: its code and full message.
	Refusal *corralv1.Error
	Err     error
}

func (e *CloseError) Error() string {
	if e.Code != -1 {
		return fmt.Sprintf("client: closed with %d %q", e.Code, e.Reason)
	}
	return fmt.Sprintf("client: connection lost: %v", e.Err)
}

func (e *CloseError) Unwrap() error { return e.Err }

// Conn is one connection to corral. Methods are safe for concurrent use.
type Conn struct {
	ws      *websocket.Conn
	enc     protocol.Encoding
	typ     websocket.MessageType
	welcome *corralv1.Welcome
	frames  chan *corralv1.ServerFrame
	onFrame func(*corralv1.ServerFrame) // Options.OnFrame
	// raw is the TCP connection and fr reads frames from it, when the
	// connection reads without coder/websocket (see wire.go); nil
	// otherwise. closeSent: this side sent its close frame.
	raw *upgradeConn
	// http is the HTTP fallback carrying the connection (http.go); nil
	// for a WebSocket (ws).
	http      *httpCarrier
	fr        *wsframe.Reader
	closeSent atomic.Bool
	done      chan struct{}

	callID    atomic.Uint64 // the last Call's id
	stateRef  atomic.Uint64 // the last SetState/DeleteState ref
	writeMu   sync.Mutex    // one writer at a time
	refreshMu sync.Mutex    // one Refresh at a time

	mu       sync.Mutex                            // guards the following fields
	pubWait  map[string]chan *corralv1.ServerFrame // by pubKey(room, id)
	joinWait map[string]chan *corralv1.ServerFrame
	pageWait map[string]chan *corralv1.ServerFrame // by room
	// refreshWait is the pending Refresh's waiter (key ""), if any.
	refreshWait map[string]chan *corralv1.ServerFrame
	callWait    map[string]chan *corralv1.ServerFrame // by call id
	stateWait   map[string]chan *corralv1.ServerFrame // by SetState/DeleteState ref
	hint        *corralv1.ReconnectHint
	refusal     *corralv1.Error // the stop-class close's Error frame
	err         *CloseError
}

// Dial connects to url (ws://host:port/ws), says hello, and waits for
// Welcome. A refused hello returns a *CloseError.
func Dial(ctx context.Context, url string, opts Options) (*Conn, error) {
	// Before the upgrade: the server's hello timeout starts there.
	token := opts.Token
	if opts.TokenProvider != nil {
		var err error
		if token, err = opts.TokenProvider(ctx); err != nil {
			return nil, fmt.Errorf("client: token provider: %w", err)
		}
	}
	sub := opts.Encoding.String()
	if opts.Resume != nil {
		// Tells the server's admission control this is a resume.
		if strings.Contains(url, "?") {
			url += "&resume=1"
		} else {
			url += "?resume=1"
		}
	}
	limit := opts.ReadLimit
	if limit <= 0 {
		limit = 16 << 20
	}
	var ws *websocket.Conn
	var hcarrier *httpCarrier
	var dialed *upgradeConn
	if opts.Transport != WebSocket {
		var err error
		if hcarrier, err = dialHTTP(ctx, url, opts, limit); err != nil {
			return nil, err
		}
	} else {
		hc := opts.HTTPClient
		if rc := rawClient(url, opts.HTTPClient, &dialed); rc != nil {
			hc = rc
		}
		var err error
		ws, _, err = websocket.Dial(ctx, url, &websocket.DialOptions{
			Subprotocols: []string{sub},
			HTTPHeader:   opts.Header,
			HTTPClient:   hc,
		})
		if err != nil {
			return nil, fmt.Errorf("client: dial %s: %w", url, err)
		}
		ws.SetReadLimit(limit)
	}
	buf := opts.FrameBuffer
	if buf <= 0 {
		buf = 4096
	}
	if opts.OnFrame != nil {
		buf = 0
	}
	c := &Conn{
		ws:       ws,
		http:     hcarrier,
		enc:      opts.Encoding,
		typ:      websocket.MessageText,
		frames:   make(chan *corralv1.ServerFrame, buf),
		onFrame:  opts.OnFrame,
		done:     make(chan struct{}),
		pubWait:  make(map[string]chan *corralv1.ServerFrame),
		joinWait: make(map[string]chan *corralv1.ServerFrame),
		pageWait: make(map[string]chan *corralv1.ServerFrame),

		refreshWait: make(map[string]chan *corralv1.ServerFrame),
		stateWait:   make(map[string]chan *corralv1.ServerFrame),
		callWait:    make(map[string]chan *corralv1.ServerFrame),
	}
	if c.enc == protocol.Proto {
		c.typ = websocket.MessageBinary
	}
	var stopCut func() bool // ends Dial's hold of ctx over raw reads
	if dialed != nil && dialed.done {
		// The upgrade went over the connection rawClient dialed: read it
		// directly.
		c.raw, c.fr = dialed, wsframe.NewReader(dialed, limit)
		// Until the welcome, reads end with ctx.
		stopCut = context.AfterFunc(ctx, func() { c.raw.SetReadDeadline(time.Unix(1, 0)) })
		defer stopCut()
	}
	hello := &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Hello{Hello: &corralv1.Hello{
		Token: token, Client: "corral-go", Resume: opts.Resume,
	}}}
	if err := c.Send(ctx, hello); err != nil {
		c.cut()
		return nil, err
	}
	// The welcome (or the refusal) is the first thing the server says; it
	// may share a batch with the frames that follow it.
	var rest []*corralv1.ServerFrame
	for c.welcome == nil {
		f, err := c.readOne(ctx)
		if err != nil {
			c.cut()
			return nil, err
		}
		frames := []*corralv1.ServerFrame{f}
		if b := f.GetBatch(); b != nil {
			frames = b.GetFrames()
		}
		for i, f := range frames {
			if h := f.GetReconnect(); h != nil {
				c.hint = h
				continue
			}
			if e := f.GetError(); e != nil && e.GetRoom() == "" && e.GetRef() == "" {
				c.refusal = e // a refused hello; the close follows
				continue
			}
			if w := f.GetWelcome(); w != nil && c.welcome == nil {
				c.welcome = w
				rest = frames[i+1:]
				break
			}
			c.cut()
			return nil, fmt.Errorf("client: expected welcome, got %v", f)
		}
	}
	if stopCut != nil {
		if !stopCut() {
			// ctx ended as the welcome came: its deadline cuts reads.
			c.cut()
			return nil, ctx.Err()
		}
		c.raw.SetReadDeadline(time.Time{})
	}
	for _, f := range rest {
		c.deliver(f)
	}
	go c.readLoop()
	return c, nil
}

// Welcome is the server's answer to hello: session id and resume token.
func (c *Conn) Welcome() *corralv1.Welcome { return c.welcome }

// Frames delivers every server frame in order (unless Options.OnFrame
// takes them); it is closed when the connection ends (then Err says why).
func (c *Conn) Frames() <-chan *corralv1.ServerFrame { return c.frames }

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err reports why the connection ended, or nil while it is open.
func (c *Conn) Err() *CloseError {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Send writes one frame.
func (c *Conn) Send(ctx context.Context, f *corralv1.ClientFrame) error {
	b, err := protocol.AppendClient(c.enc, nil, f)
	if err != nil {
		return err
	}
	return c.SendRaw(ctx, b)
}

// SendRaw writes bytes as one message of the connection's type, unchecked
// (for tests of the server's handling of bad input).
func (c *Conn) SendRaw(ctx context.Context, b []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if c.http != nil {
		if err := c.http.post(ctx, b); err != nil {
			return fmt.Errorf("client: write: %w", err)
		}
		return nil
	}
	if err := c.ws.Write(ctx, c.typ, b); err != nil {
		return fmt.Errorf("client: write: %w", err)
	}
	return nil
}

// Join enters room and waits for Joined (or Reset, then Joined). With a
// position, since > 0 or a non-empty epoch (so since 0 of an epoch is "from
// the start of that epoch"), the messages after since are replayed first
// (Joined.replay, then a ReplayEnd frame) or, when the epoch is not the
// room's, a Reset comes first. Without, the join is live from now.
func (c *Conn) Join(ctx context.Context, room string, since uint64, epoch string) (*corralv1.Joined, error) {
	f, err := c.request(ctx, c.joinWait, room, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{
		Room: room, SinceSeq: since, Epoch: epoch, FromPosition: epoch != "",
	}}})
	return f.GetJoined(), err
}

// Publish sends a reliable message and waits for its seq. id must be unique
// within the session (a retry with the same id is applied once).
func (c *Conn) Publish(ctx context.Context, room, id string, payload []byte) (*corralv1.Published, error) {
	return c.PublishSeq(ctx, room, id, 0, payload)
}

// PublishSeq is Publish at place seq of the session's sequence of
// publishes to room (corralv1.Publish.seq; 0: none). The server stores it
// only after place seq-1; otherwise it answers a *ServerError with
// CODE_OUT_OF_ORDER. A Session numbers its publishes itself.
func (c *Conn) PublishSeq(ctx context.Context, room, id string, seq uint64, payload []byte) (*corralv1.Published, error) {
	if id == "" {
		return nil, errors.New("client: publish needs an id")
	}
	f, err := c.request(ctx, c.pubWait, pubKey(room, id), &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{
		Room: room, Id: id, Payload: payload, Seq: seq,
	}}})
	return f.GetPublished(), err
}

// Refresh replaces the connection's token with token (of the same user)
// and waits for Refreshed, which carries the new expiry. By then the rooms
// the new token does not grant have been left (Left frames, code
// CODE_FORBIDDEN). A refusal is a *ServerError and changes nothing:
// CODE_UNAUTHENTICATED for a token that is invalid, expired or another
// user's; CODE_RATE_LIMITED or CODE_UNAVAILABLE to retry after
// retry_after_ms.
func (c *Conn) Refresh(ctx context.Context, token string) (*corralv1.Refreshed, error) {
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	f, err := c.request(ctx, c.refreshWait, "", &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Refresh{Refresh: &corralv1.Refresh{
		Token: token,
	}}})
	return f.GetRefreshed(), err
}

// Call asks the application's backend through corral (its Call hook,
// docs/HOOKS.md) and waits for the answer's payload. A refusal, or a
// backend that could not answer (CODE_UNAVAILABLE: retry after
// retry_after_ms), is a *ServerError.
func (c *Conn) Call(ctx context.Context, method string, payload []byte) ([]byte, error) {
	id := c.callID.Add(1)
	f, err := c.request(ctx, c.callWait, strconv.FormatUint(id, 10), &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Call{Call: &corralv1.Call{
		Id: id, Method: method, Payload: payload,
	}}})
	if err != nil {
		return nil, err
	}
	if e := f.GetCallResult().GetError(); e != nil {
		return nil, &ServerError{Err: e}
	}
	return f.GetCallResult().GetPayload(), nil
}

// ErrInFlight is a request refused by the client itself: one with the
// same key is still waiting for its answer on the Conn (a Join or a
// presence query of the same room, a Publish or an Append with the same
// room and id), and the two answers could not be told apart.
var ErrInFlight = errors.New("client: a request with the same room and id is still waiting for its answer on this connection")

// request sends f and waits for the answer that deliver routes to
// waiters[key]: the expected frame, or an Error frame (a *ServerError).
// A request whose key is already waiting is refused (ErrInFlight) without
// being sent: it took the first one's place and its answer, and left the
// first waiting until its context ended.
func (c *Conn) request(ctx context.Context, waiters map[string]chan *corralv1.ServerFrame, key string, f *corralv1.ClientFrame) (*corralv1.ServerFrame, error) {
	ch := make(chan *corralv1.ServerFrame, 1)
	c.mu.Lock()
	if _, busy := waiters[key]; busy {
		c.mu.Unlock()
		return nil, ErrInFlight
	}
	waiters[key] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(waiters, key)
		c.mu.Unlock()
	}()
	if err := c.Send(ctx, f); err != nil {
		return nil, err
	}
	select {
	case f := <-ch:
		if e := f.GetError(); e != nil {
			return nil, &ServerError{Err: e}
		}
		return f, nil
	case <-c.done:
		if err := c.Err(); err != nil {
			return nil, err
		}
		return nil, errors.New("client: connection closed")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ServerError is an Error frame the server answered a request with.
type ServerError struct{ Err *corralv1.Error }

func (e *ServerError) Error() string {
	return fmt.Sprintf("client: server refused: %d %s", e.Err.GetCode(), e.Err.GetMessage())
}

// Close closes the connection normally.
func (c *Conn) Close() error {
	if c.http != nil {
		// No close handshake on HTTP: say leaving, then end the
		// response.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c.writeMu.Lock()
		c.http.leave(ctx)
		c.writeMu.Unlock()
		cancel()
		c.http.closeNow()
		<-c.done
		return nil
	}
	if c.raw == nil {
		err := c.ws.Close(websocket.StatusNormalClosure, "")
		<-c.done
		return err
	}
	// Say close, wait (at most 5 s) for the server's, which ends the
	// reader, then close the socket.
	err := c.closeWith(websocket.StatusNormalClosure, "")
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
		err = errors.New("client: no close frame from the server within 5s")
	}
	c.ws.CloseNow()
	<-c.done
	return err
}

// writeControl writes a control frame on the raw connection, between the
// data frames coder/websocket writes.
func (c *Conn) writeControl(op byte, payload []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.raw.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := c.raw.Write(wsframe.AppendControl(nil, op, payload))
	c.raw.SetWriteDeadline(time.Time{})
	return err
}

// CloseNow drops the connection without a close handshake (like a crash).
func (c *Conn) CloseNow() {
	c.cut()
	<-c.done
}

// cut drops the carrier, without waiting for the reader.
func (c *Conn) cut() {
	if c.http != nil {
		c.http.closeNow()
		return
	}
	c.ws.CloseNow()
}

func (c *Conn) readOne(ctx context.Context) (*corralv1.ServerFrame, error) {
	var data []byte
	var err error
	if c.http != nil {
		if data, err = c.http.next(); err != nil {
			c.http.closeNow()
			err = c.httpCloseError(err)
		}
	} else if c.fr != nil {
		data, err = c.readRaw()
	} else if _, data, err = c.ws.Read(ctx); err != nil {
		err = c.closeError(err)
	}
	if err != nil {
		return nil, err
	}
	f := new(corralv1.ServerFrame)
	if err := protocol.DecodeServer(c.enc, data, f); err != nil {
		return nil, err
	}
	return f, nil
}

// readRaw reads the next data message from the raw connection (valid
// until the next call: decoding copies what it keeps), answering pings and
// the server's close on the way. Its errors are *CloseError; on one the
// socket is closed.
func (c *Conn) readRaw() ([]byte, error) {
	for {
		op, p, err := c.fr.Message()
		switch {
		case err != nil:
		case op == wsframe.OpPing:
			err = c.writeControl(wsframe.OpPong, p)
		case op == wsframe.OpClose:
			var ce websocket.CloseError
			if ce, err = parseClose(p); err == nil {
				// Echo it (unless this side closed first): the close
				// handshake is done.
				c.closeWith(ce.Code, "")
				err = ce
			}
		case op != wsframe.OpPong:
			return p, nil
		}
		if err != nil {
			switch {
			case errors.Is(err, wsframe.ErrProtocol):
				c.closeWith(websocket.StatusProtocolError, err.Error())
			case errors.Is(err, wsframe.ErrTooBig):
				c.closeWith(websocket.StatusMessageTooBig, "message over the read limit")
			}
			c.ws.CloseNow()
			return nil, c.closeError(err)
		}
	}
}

// closeWith sends a close frame on the raw connection, unless this side
// already did.
func (c *Conn) closeWith(code websocket.StatusCode, reason string) error {
	if !c.closeSent.CompareAndSwap(false, true) {
		return nil
	}
	return c.writeControl(wsframe.OpClose, closePayload(code, reason))
}

func (c *Conn) closeError(err error) *CloseError {
	c.mu.Lock()
	defer c.mu.Unlock()
	code := websocket.CloseStatus(err)
	refusal := c.refusal
	if refusal != nil && int(refusal.GetCode()) != int(code) {
		refusal = nil // an earlier refused frame, not this close's
	}
	return &CloseError{Code: code, Reason: closeReason(err), Hint: c.hint, Refusal: refusal, Err: err}
}

// httpCloseError is why an HTTP stream ended: the SSE stream's
// corral-close, or for a record stream the code of the reconnect hint or
// refusal that came last; else the network (-1: resume).
func (c *Conn) httpCloseError(err error) *CloseError {
	if errors.Is(err, errStreamEnded) {
		c.mu.Lock()
		var code corralv1.Code
		var reason string
		switch {
		case c.hint != nil:
			code, reason = c.hint.GetCode(), c.hint.GetReason()
		case c.refusal != nil:
			code, reason = c.refusal.GetCode(), c.refusal.GetMessage()
		}
		c.mu.Unlock()
		if code != 0 {
			err = websocket.CloseError{Code: websocket.StatusCode(code), Reason: reason}
		}
	}
	return c.closeError(err)
}

func closeReason(err error) string {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Reason
	}
	return ""
}

func (c *Conn) readLoop() {
	defer close(c.done)
	defer close(c.frames)
	ctx := context.Background()
	for {
		f, err := c.readOne(ctx)
		if err != nil {
			ce, ok := err.(*CloseError)
			if !ok {
				ce = &CloseError{Code: -1, Err: err}
				c.cut()
			}
			c.mu.Lock()
			c.err = ce
			c.mu.Unlock()
			return
		}
		if b := f.GetBatch(); b != nil {
			for _, inner := range b.GetFrames() {
				c.deliver(inner)
			}
			continue
		}
		c.deliver(f)
	}
}

func (c *Conn) deliver(f *corralv1.ServerFrame) {
	switch f.GetKind().(type) {
	case *corralv1.ServerFrame_Message, *corralv1.ServerFrame_Signal:
		// Never an answer to a request: no lock.
		c.hand(f)
		return
	}
	c.mu.Lock()
	var waiter chan *corralv1.ServerFrame
	switch k := f.GetKind().(type) {
	case *corralv1.ServerFrame_Published:
		waiter = take(c.pubWait, pubKey(k.Published.GetRoom(), k.Published.GetId()))
	case *corralv1.ServerFrame_Joined:
		waiter = c.joinWait[k.Joined.GetRoom()]
		delete(c.joinWait, k.Joined.GetRoom())
	case *corralv1.ServerFrame_Error:
		e := k.Error
		waiter = c.refusedLocked(e)
		if waiter == nil && e.GetRoom() == "" && e.GetRef() == "" && protocol.AdviceOf(e.GetCode()) == protocol.AdviceStop {
			c.refusal = e // may come before a stop-class close
		}
	case *corralv1.ServerFrame_StateUpdated:
		waiter = c.stateWait[k.StateUpdated.GetRef()]
		delete(c.stateWait, k.StateUpdated.GetRef())
	case *corralv1.ServerFrame_Refreshed:
		waiter = c.refreshWait[""]
		delete(c.refreshWait, "")
	case *corralv1.ServerFrame_CallResult:
		key := strconv.FormatUint(k.CallResult.GetId(), 10)
		waiter = c.callWait[key]
		delete(c.callWait, key)
	case *corralv1.ServerFrame_PresencePage:
		waiter = c.pageWait[k.PresencePage.GetRoom()]
		delete(c.pageWait, k.PresencePage.GetRoom())
	case *corralv1.ServerFrame_Reconnect:
		c.hint = k.Reconnect
	}
	c.mu.Unlock()
	if waiter != nil {
		waiter <- f
	}
	c.hand(f)
}

// refusedLocked takes the waiter of the pending request that e refuses,
// or returns nil when e refuses none of them. The request is named by
// the kind of frame e refuses (Error.frame) with its room or ref: a
// refused signal or presence query in a room leaves a Join of that room
// waiting. An Error that names no frame, from a server older than the
// field, is matched by ref and room alone, as it always was. Lock (mu)
// must be held.
func (c *Conn) refusedLocked(e *corralv1.Error) chan *corralv1.ServerFrame {
	ref, room := e.GetRef(), e.GetRoom()
	switch e.GetFrame() {
	case "":
		switch {
		case ref != "" && c.stateWait[ref] != nil:
			return take(c.stateWait, ref)
		case ref != "":
			return take(c.pubWait, pubKey(room, ref))
		case room != "":
			return take(c.joinWait, room)
		case refreshRefusal(e.GetCode()):
			return take(c.refreshWait, "")
		}
	case "publish", "append":
		if ref != "" {
			return take(c.pubWait, pubKey(room, ref))
		}
	case "setState", "deleteState":
		if ref != "" {
			return take(c.stateWait, ref)
		}
	case "join":
		return take(c.joinWait, room)
	case "presenceQuery":
		return take(c.pageWait, room)
	case "refresh":
		return take(c.refreshWait, "")
	}
	return nil // a signal's, a leave's, a setPresence's...: no waiter
}

// pubKey is a publish's or an append's key among the waiters: its room
// and id (ids are the client's, and one id may be used in two rooms).
func pubKey(room, id string) string { return room + "\x00" + id }

// take removes waiters[key] and returns it (nil when there is none).
func take(waiters map[string]chan *corralv1.ServerFrame, key string) chan *corralv1.ServerFrame {
	w, ok := waiters[key]
	if ok {
		delete(waiters, key)
	}
	return w
}

// refreshRefusal reports whether an Error without room or ref with code
// can be the answer to a Refresh.
func refreshRefusal(code corralv1.Code) bool {
	switch code {
	case corralv1.Code_CODE_UNAUTHENTICATED, corralv1.Code_CODE_RATE_LIMITED, corralv1.Code_CODE_UNAVAILABLE:
		return true
	}
	return false
}

// hand gives f to Options.OnFrame, or to Frames.
func (c *Conn) hand(f *corralv1.ServerFrame) {
	if c.onFrame != nil {
		c.onFrame(f)
		return
	}
	c.frames <- f
}
