package edge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/corral-rt/corral/auth"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/mono"
	"github.com/corral-rt/corral/internal/safetext"
	"github.com/corral-rt/corral/internal/wsframe"
	"github.com/corral-rt/corral/protocol"
)

// conn is one client WebSocket. It has at most one reader goroutine at a
// time: the first runs serve, later ones readFrames after a park (see
// park.go), and at most one writer at a time: whoever holds its writer
// token (writing), see send.
type conn struct {
	e *Edge
	// wire carries every write to nc (see wire.go).
	wire *wire
	// nc is the client's network connection (nil for an HTTP carrier).
	// The writer writes data messages to it, framed by the edge (see
	// wsframe.Frame), each in one Write; the reader writes control frames
	// (pong, close: wsconn.go), each also in one Write, so frames never
	// interleave.
	nc net.Conn
	// sock is what the reader reads (see buffers.go, wsconn.go); raw is
	// nc for the poller (nil: never parks).
	sock   *sock
	raw    syscall.RawConn
	enc    protocol.Encoding
	remote string
	id     uint64
	link   *link
	// handshakeDone ends the pending handshake (limits.go); safe to call
	// more than once and from any goroutine (the hello timer's).
	handshakeDone func()
	// Used by the reader only: limits; the user counted in Edge.users.
	limits      *limiter
	user        string
	userCounted bool
	// expiry closes the connection when its token expires (refresh.go);
	// expires is that token's exp (unix seconds, 0: none).
	expiry  *time.Timer
	expires int64
	// hook: the request's part the Connect hook sees (nil: the hook is
	// off); calls: Call frames in flight (hooks.go).
	hook  *hookRequest
	calls atomic.Int32
	// stream: the connection's HTTP carrier (SSE or HTTP streaming,
	// stream.go); nil for a WebSocket.
	stream *stream

	// Guarded by the poller's mu: the socket is in the poller's set (armed
	// or not), and cut: closed outside the reader, never to park again.
	registered, cut bool
	// closeSent: a close frame was written to the socket; no control
	// frame follows it (wsconn.go). Guarded by wire.mu.
	closeSent bool
	// closeRead: the client's close frame was read, or none is awaited
	// (wsconn.go). The reader's.
	closeRead bool

	// welcomed: the client's Welcome is queued. Until then a ping goes to
	// the core, which answers after the Welcome (client.proto: Welcome
	// comes first); after, the edge answers it.
	welcomed atomic.Bool
	lastRead atomic.Int64 // mono.Now nanoseconds of the last frame read
	// writeStart is when the socket was found full by a write not yet
	// finished (0: none): a blocking write began, or a write without
	// blocking left a tail. The edge's sweeper cuts writes that pass
	// Config.WriteTimeout: one watchdog for every connection instead of a
	// timer per write.
	writeStart atomic.Int64
	// writers counts the writer token (0 or 1; see startWriterLocked):
	// finish waits for a queued close to be written.
	writers sync.WaitGroup

	// Guarded by the poller's mu: the socket is in the poller's set of
	// sockets waiting for room (armed or not).
	registeredOut bool

	mu       sync.Mutex // guards the following fields
	queue    [][]byte   // encoded frames; shared, never modified
	spare    [][]byte   // the writer's previous queue, reused
	queued   int        // bytes in queue, replays included (see addQueuedLocked)
	replayed int        // replay entries in queue (outside the frame bound)
	// replayBytes is the part of queued that replays hold: bounded apart
	// from live traffic (replayBytesFor), so a replay neither pushes live
	// frames past their bound nor grows without one.
	replayBytes int
	// pages are the rooms of the paged replays in progress (nil until
	// the first; a pointer, so an idle connection holds 8 bytes for them).
	pages *pageAcks
	// sigAt finds the signal batch of a room still waiting in queue, so a
	// newer one merges into it: a slow reader gets the latest values, not
	// a backlog.
	sigAt   map[string]queuedSignals
	closing bool // a close is queued; nothing more is accepted
	// writing: the writer token is held, by the connection's sender shard
	// (due, or in its pass), the wait for room, a blocking writer
	// goroutine, or the close; only its holder writes data to the socket.
	// It stays set once the socket failed or closed: no writer again.
	writing bool
	// stalled: the writer holds frames it took from queue that the
	// socket has not taken whole (for corral_edge_queued_frames).
	stalled     bool
	ended       bool // the reader is done: no writer starts any more
	closeCode   corralv1.Code
	closeReason string
	// welcome is made by a reader that waits for the Welcome
	// (awaitWelcome) and closed by markWelcomed, which then leaves
	// welcomeDone in its place; nil until one of them runs. Made only when
	// needed: most connections never wait, and a channel is ~100 bytes
	// each of them would keep.
	welcome chan struct{}

	// Guarded by link.mu, not mu:
	// attach is what the core was told when the connection attached, and
	// session/token and rooms (positions, epochs) what the core answered
	// since; with them the edge resumes the session itself when its link
	// to the core is re-opened, and the browser notices nothing.
	attach  *linkv1.Attach
	session string
	token   string
	rooms   []connRoom // see rooms.go
	// unanswered: the requests passed to the core it has not answered
	// yet, in order (answers.go).
	unanswered []request
}

func newConn(e *Edge, u upgraded, enc protocol.Encoding, remote string) *conn {
	c := &conn{
		e:      e,
		nc:     u.nc,
		wire:   u.wire,
		sock:   u.sock,
		enc:    enc,
		remote: remote,
		id:     e.nextID.Add(1),
		limits: newLimiter(e.rules),
		// Edge.serveWS sets the real one.
		handshakeDone: func() {},
	}
	if e.poller != nil {
		c.raw = u.wire.raw
	}
	c.link = e.linkFor(c.id)
	c.lastRead.Store(mono.Now())
	return c
}

// serve runs the connection on its first reader goroutine: hello, attach,
// then frames until it ends or parks.
func (c *conn) serve() {
	if ok, clean := c.hello(); !ok {
		c.finish(clean)
		return
	}
	c.readFrames()
}

// finish ends the connection, on its last reader goroutine: it detaches
// it, lets the writer flush a queued close, closes the socket, and
// releases what the connection counted.
func (c *conn) finish(clean bool) {
	c.stopExpiry()
	if c.userCounted {
		c.e.userDone(c.user, c.limits.bucket(bucketMessages))
	}
	c.link.detach(c, clean)
	c.mu.Lock()
	c.ended = true
	writing := c.writing
	c.mu.Unlock()
	if !writing {
		// No writer holds the token and none takes it now (ended): one
		// that let it go is at most about to say so (writers.Done). No
		// goroutine, channel and timer to wait for it (a connection's
		// end in a reset herd's every rejoin).
		c.awaitCloseReply()
		c.cutOff()
		c.writers.Wait()
	} else {
		// Give the running writer a moment to flush a queued close,
		// then cut.
		writerDone := make(chan struct{})
		go func() {
			c.writers.Wait()
			close(writerDone)
		}()
		select {
		case <-writerDone:
		case <-time.After(c.e.cfg.WriteTimeout):
		}
		// The client's reply to a close the edge sent, then the cut (a
		// writer waiting for room is woken, and fails).
		c.awaitCloseReply()
		c.cutOff()
		<-writerDone
	}
	// What no writer will send is dropped, and its bytes leave the
	// link's count; closing: nothing more is queued.
	c.mu.Lock()
	c.closing = true
	clear(c.takeLocked())
	c.mu.Unlock()
	c.handshakeDone()
	if c.stream != nil {
		c.e.dropStream(c)
	}
	c.e.untrack(c)
	c.e.connWG.Done()
}

// cutOff closes the socket without a close frame, from outside the
// reader; a parked reader is started to end the connection.
func (c *conn) cutOff() {
	if c.stream != nil {
		c.stream.cut(c)
	} else {
		c.nc.Close()
	}
	c.e.poller.closed(c)
}

// writeBufs holds the writers' message buffers between writes.
var writeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// putWriteBuf returns a buffer to writeBufs, unless it grew large.
func putWriteBuf(bp *[]byte) {
	if cap(*bp) <= 64<<10 { // do not pin a large buffer
		*bp = (*bp)[:0]
		writeBufs.Put(bp)
	}
}

// message frames q as one WebSocket message in *bp: the header, then the
// one frame or a batch of them. *bp keeps the buffer (see putWriteBuf).
func (c *conn) message(bp *[]byte, q [][]byte) []byte {
	if c.stream != nil {
		return c.stream.message(c, bp, q) // carrier.go
	}
	buf := appendFrames(c.enc, (*bp)[:wsframe.MaxHeader], q) // carrier.go
	*bp = buf
	return wsframe.Frame(buf, opcodeOf(c.enc))
}

// sender is the connection's shard of the edge's writers (sender.go).
func (c *conn) sender() *sender { return c.e.senders[c.shard()] }

// shard indexes the connection's sender in Edge.senders.
func (c *conn) shard() int { return int(c.id % uint64(len(c.e.senders))) }

// hello reads and authenticates the hello and attaches the connection. It
// reports whether it did, and if not whether the client closed cleanly.
func (c *conn) hello() (ok, clean bool) {
	// Not a read deadline: a read whose context ends cuts the socket
	// without a close frame. The timer closes with corral's own code, and
	// the pending read then ends.
	helloTimer := time.AfterFunc(c.e.cfg.HelloTimeout, func() {
		c.closeWith(corralv1.Code_CODE_HELLO_REQUIRED, "no hello within the timeout", 0, false)
		// The handshake is over now, not once the close handshake is
		// (the close waits up to closeWait for a silent peer's reply):
		// Config.MaxPending counts sockets within their hello deadline.
		c.handshakeDone()
	})
	defer func() {
		if !ok {
			c.handshakeDone() // refused: a close is queued
		}
	}()
	// The read borrows a buffer only once the hello begins to arrive
	// (sock.readReady): in a reconnect herd thousands of connections wait
	// for their client's hello at once (docs/benchmarks/
	// 2026-12-06-1341-issue34-herd-cuts.md). The hello timer's close ends
	// the wait as it ends a read.
	var f corralv1.ClientFrame
	err := c.readFrame(context.Background(), &f)
	if !helloTimer.Stop() {
		return false, false // timed out; the close is queued
	}
	if err != nil {
		return false, c.readFailed(err, true)
	}
	return c.attachHello(f.GetHello()), false
}

// attachHello authenticates the client's hello (nil: the first frame was
// not one) and attaches the connection to the core. It reports whether
// it did; if not, a close is queued.
func (c *conn) attachHello(hello *corralv1.Hello) (ok bool) {
	defer func() {
		if !ok {
			c.handshakeDone() // refused: a close is queued
		}
	}()
	ctx := c.e.ctx
	if hello == nil {
		c.closeWith(corralv1.Code_CODE_HELLO_REQUIRED, "the first frame must be hello", 0, false)
		return false
	}
	actx, cancel := ctx, context.CancelFunc(nop)
	if _, now := c.e.cfg.Auth.(auth.Immediate); c.hook != nil || !now {
		actx, cancel = context.WithTimeout(ctx, c.e.cfg.HelloTimeout)
	}
	id, initial, info, err := c.authenticate(actx, hello)
	cancel()
	if err != nil {
		if c.helloRefused(err) {
			return false
		}
		if !errors.Is(err, auth.ErrUnauthenticated) {
			// The authenticator failed, not the token: the client
			// retries, the log keeps why.
			c.e.cfg.Logger.Warn("authenticator failed", "remote", c.remote, "err", err)
			c.closeWith(corralv1.Code_CODE_UNAVAILABLE, "authentication unavailable: retry later", 1000, false)
			return false
		}
		c.closeWith(corralv1.Code_CODE_UNAUTHENTICATED, err.Error(), 0, false)
		return false
	}
	if err := safetext.CheckName("user id", id.GetUserId(), maxUserID); err != nil {
		// Whatever the authenticator, a user id obeys the rule for names:
		// it is shown to other users and written in logs.
		c.e.cfg.Logger.Warn("authenticator returned an invalid user id", "remote", c.remote, "err", err)
		c.closeWith(corralv1.Code_CODE_UNAUTHENTICATED, "the token's user id is not a valid name", 0, false)
		return false
	}
	ok, spent := c.e.userAdd(id.GetUserId())
	if !ok {
		c.e.metrics.refuse(refusedConnsPerUser)
		c.closeWith(corralv1.Code_CODE_LIMIT_EXCEEDED,
			fmt.Sprintf("more than %d connections of this user", c.e.cfg.MaxConnsPerUser), 0, false)
		return false
	}
	c.user, c.userCounted = id.GetUserId(), true
	if spent.rate > 0 {
		c.limits.setBucket(bucketMessages, spent)
	}
	c.handshakeDone()
	hello.Token = ""
	if !c.link.attach(c, &linkv1.Attach{
		Hello:      hello,
		Identity:   id,
		RemoteAddr: c.remote,
		Protocol:   c.protocolName(),
		Info:       info,
	}) {
		return false
	}
	if !c.joinInitial(initial) {
		return false
	}
	c.expireAt(id.GetExpiresUnix())
	return true
}

// protocolName names the connection's carrier and encoding to the core
// (linkv1.Attach.protocol): the subprotocol for a WebSocket, "sse+json",
// "stream+json" or "stream+proto" for an HTTP carrier.
func (c *conn) protocolName() string {
	if c.stream == nil {
		return c.enc.String()
	}
	enc := "json"
	if c.enc == protocol.Proto {
		enc = "proto"
	}
	return c.stream.kind.String() + "+" + enc
}

// maxUserID bounds a user id in bytes, as grants.MaxUserID does.
const maxUserID = 256

// readFrames reads frames until the connection ends (then it finishes it)
// or parks (see park.go). It runs on the connection's reader goroutine:
// the first, or one the poller started.
func (c *conn) readFrames() {
	// Reads need no context of their own: the connection is closed when
	// the edge stops, which ends a pending read (and a context here would
	// cost a timer registration per message).
	ctx := context.Background()
	canPark := c.raw != nil && c.e.poller != nil
	for {
		lingering := canPark && c.lingerIfIdle()
		f := new(corralv1.ClientFrame)
		if err := c.readFrame(ctx, f); err != nil {
			if lingering && lingered(err) {
				// No frame within parkAfter, nothing consumed.
				if c.e.poller.park(c) {
					return
				}
				canPark = false // cut off, or no poller: read on
				continue
			}
			c.finish(c.readFailed(err, false))
			return
		}
		if !c.handleFrame(f) {
			c.finish(false)
			return
		}
	}
}

// handleFrame handles one client frame read after the hello, whatever
// carried it (a WebSocket message, a POST to a stream: stream.go). It
// reports false when the connection must end. The caller is the
// connection's reader.
func (c *conn) handleFrame(f *corralv1.ClientFrame) bool {
	if !c.welcomed.Load() && answeredHere(f) && !c.awaitWelcome() {
		return false
	}
	if !c.check(f) {
		return true
	}
	switch k := f.GetKind().(type) {
	case *corralv1.ClientFrame_Ping:
		if !c.welcomed.Load() {
			return c.link.forward(c, f)
		}
		c.sendFrame(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Pong{Pong: &corralv1.Pong{
			Id: k.Ping.GetId(), TimeMs: time.Now().UnixMilli(),
		}}})
	case *corralv1.ClientFrame_Hello:
		c.refuse(f, corralv1.Code_CODE_BAD_FRAME, "hello was already sent on this connection", 0)
	case *corralv1.ClientFrame_Call:
		c.call(k.Call)
	case *corralv1.ClientFrame_Refresh:
		return c.refresh(f)
	default:
		return c.link.forward(c, f)
	}
	return true
}

// The welcome comes first (client.proto): until the client's Welcome is
// queued, the edge answers no frame itself. Frames the core answers go to
// it in order behind the attach, so their answers follow the Welcome;
// those the edge answers (a second hello, a call, a refresh, an unknown
// kind) wait for it on the reader (awaitWelcome). A second hello's 4400,
// an unknown kind's 4406 and a call's result had come before the Welcome.

// errNoWelcome ends a connection whose Welcome did not come in time.
var errNoWelcome = errors.New("edge: no welcome from the core")

// answeredHere reports whether the edge answers f itself rather than
// passing it to the core.
func answeredHere(f *corralv1.ClientFrame) bool {
	switch f.GetKind().(type) {
	case *corralv1.ClientFrame_Hello, *corralv1.ClientFrame_Call, *corralv1.ClientFrame_Refresh:
		return true
	}
	return false
}

// markWelcomed records that the client's Welcome is queued. Called by the
// link after it queued the Welcome; safe to call again.
func (c *conn) markWelcomed() {
	c.welcomed.Store(true)
	c.mu.Lock()
	if c.welcome != nil && c.welcome != welcomeDone {
		close(c.welcome)
	}
	c.welcome = welcomeDone
	c.mu.Unlock()
}

// welcomeDone is conn.welcome once the Welcome is queued: closed, shared.
var welcomeDone = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

// welcomeChan returns the channel markWelcomed closes, made if need be.
func (c *conn) welcomeChan() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.welcome == nil {
		c.welcome = make(chan struct{})
	}
	return c.welcome
}

// awaitWelcome waits on the reader until the Welcome is queued. It
// reports false when the connection closed, or no Welcome came within
// the hello timeout (the core's attach is lost: the connection is closed
// with CODE_CORE_UNAVAILABLE, and the client resumes).
func (c *conn) awaitWelcome() bool {
	deadline := time.NewTimer(c.e.cfg.HelloTimeout)
	defer deadline.Stop()
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	welcome := c.welcomeChan()
	for {
		select {
		case <-welcome:
			return true
		case <-deadline.C:
			c.closeWith(corralv1.Code_CODE_CORE_UNAVAILABLE, "no welcome from the server", 0, false)
			return false
		case <-poll.C:
			// A close (the link lost, a drain) leaves no Welcome to wait
			// for; closing is set under mu and never reset.
			c.mu.Lock()
			closing := c.closing
			c.mu.Unlock()
			if closing {
				return false
			}
		}
	}
}

// lingerIfIdle makes the next read linger (see sock) if nothing is
// buffered, and reports whether it did. Not once a close is queued: the
// reader then waits for the client's reply to the close, which ends the
// connection within closeWait (closeSocket), rather than parking.
func (c *conn) lingerIfIdle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	idle := !c.closing && c.sock.idle()
	if idle {
		c.sock.linger(parkAfter)
	}
	return idle
}

var errTooLarge = errors.New("edge: frame exceeds the read limit")

// readFrame reads and decodes one WebSocket message.
func (c *conn) readFrame(ctx context.Context, f *corralv1.ClientFrame) error {
	for {
		data, err := c.readMessage(c.e.cfg.ReadLimit)
		if err != nil {
			return err
		}
		c.lastRead.Store(mono.Now())
		err = protocol.DecodeClient(c.enc, data, f)
		if errors.Is(err, protocol.ErrUnknownFrame) {
			// A newer client's frame: say so, keep the connection. Each
			// answer is work, so it is rate-limited like any frame.
			if !c.welcomed.Load() && !c.awaitWelcome() {
				return errNoWelcome
			}
			if c.check(nil) {
				c.sendError(corralv1.Code_CODE_UNKNOWN_FRAME, err.Error())
			}
			continue
		}
		return err
	}
}

// readFailed turns a read error into the right close, and reports whether
// the client closed cleanly.
func (c *conn) readFailed(err error, beforeHello bool) bool {
	switch {
	case errors.Is(err, errTooLarge):
		c.e.metrics.refuse(refusedFrameTooLarge)
		c.closeWith(corralv1.Code_CODE_TOO_LARGE, fmt.Sprintf("frame larger than %d bytes", c.e.cfg.ReadLimit), 0, false)
	case errors.Is(err, protocol.ErrBadFrame):
		c.closeWith(corralv1.Code_CODE_BAD_FRAME, err.Error(), 0, false)
	case beforeHello && errors.Is(err, context.DeadlineExceeded):
		c.closeWith(corralv1.Code_CODE_HELLO_REQUIRED, "no hello within the timeout", 0, false)
	case errors.Is(err, errWSProtocol):
		// Not a corral frame the client got wrong: the WebSocket itself
		// (RFC 6455 §7.4.1), closed with 1002 and why.
		c.writeClose(closeProtocol, err.Error())
		c.closeRead = true // the stream is broken: no reply is awaited
	default:
		var closed wsClosed
		return errors.As(err, &closed) && closed.clean()
	}
	return false
}

// sendFrame encodes f for this connection and queues it.
func (c *conn) sendFrame(f *corralv1.ServerFrame) { c.sendFrameVia(f, nil) }

// sendFrameVia is sendFrame for a producer with a handoff (push).
func (c *conn) sendFrameVia(f *corralv1.ServerFrame, h *handoff) {
	e, err := encode(c.enc, f)
	if err != nil {
		c.e.cfg.Logger.Error("encode server frame", "err", err)
		return
	}
	c.push(e, pushLive, "", nil, h)
}

// refuse answers a client frame the edge cannot pass on now with an Error
// naming the frame's room and publish id, so the client can retry it.
func (c *conn) refuse(f *corralv1.ClientFrame, code corralv1.Code, msg string, retryMs uint32) {
	c.refuseRequest(requestOf(f), code, msg, retryMs)
}

func (c *conn) sendError(code corralv1.Code, msg string) {
	c.sendFrame(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Error{Error: &corralv1.Error{Code: code, Message: safetext.Reason(msg)}}})
}

// enqueueReplay queues a batch of missed messages (or a snapshot) for this
// connection alone. Replays have their own byte bound (replayBytesFor),
// not live traffic's, or a client far behind could never catch up; but
// they have one: a client that joins and leaves a room with a large
// history and never reads is a slow consumer (replay_full), not a heap
// that grows by a replay each join.
// With ack, the core waits for the page's frame to be taken by the writer
// (reportTaken) before it sends room's next page.
func (c *conn) enqueueReplay(b []byte, ack bool, room string, h *handoff) {
	kind := pushReplay
	if ack {
		kind = pushReplayAck
	}
	c.push(encoded{b: b}, kind, room, nil, h)
}

// enqueue queues an encoded frame (which it never modifies). It never
// blocks: a connection whose queue is over its bounds is a slow consumer and
// is closed with a hint to resume. It reports whether e was queued or
// written.
func (c *conn) enqueue(e encoded) bool { return c.push(e, pushLive, "", nil, nil) }

// enqueueSignals queues a room's signal batch (e is its encoding). If an
// earlier batch of the room is still queued, the two merge in its place,
// latest value per key, encoded for this connection alone.
func (c *conn) enqueueSignals(room string, batch *corralv1.Batch, e encoded, h *handoff) {
	c.push(e, pushSignals, room, batch, h)
}

type pushKind uint8

const (
	pushLive      pushKind = iota // bounded live traffic
	pushReplay                    // missed messages, under the replay bound
	pushSignals                   // a room's signal batch, merged while queued
	pushReplayAck                 // a replay page's last batch: reportTaken tells the core
)

// push is the one way into the queue: bounds, signal merging and handing
// the socket to its writer happen in one critical section, so what sigAt
// points at is always the entry it was recorded for. It never writes: a
// producer (a room's fan-out under the link's lock) only queues, and the
// socket's one writer sends (send). With h, a socket to hand over is kept
// in h until the producer's batch is queued (handoff); nil: now.
func (c *conn) push(e encoded, kind pushKind, room string, batch *corralv1.Batch, h *handoff) bool {
	b := e.b
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return false
	}
	if kind == pushSignals {
		if q, ok := c.sigAt[room]; ok {
			merged := mergeSignals(q.batch, batch)
			enc, err := protocol.AppendServer(c.enc, nil, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Batch{Batch: merged}})
			// Past maxMergedSignalBytes the batch is queued on its own,
			// after the one it would have merged into: later values still
			// come later.
			if err == nil && len(enc) <= maxMergedSignalBytes {
				c.addQueuedLocked(len(enc) - len(c.queue[q.idx]))
				c.queue[q.idx] = enc
				c.sigAt[room] = queuedSignals{idx: q.idx, batch: merged}
				c.mu.Unlock()
				c.e.metrics.signalsMerged.Add(float64(len(batch.GetFrames())))
				return true
			}
		}
	}
	over, full := slowQueueFull, false
	switch {
	case kind == pushReplay || kind == pushReplayAck:
		if c.replayBytes+len(b) > c.e.cfg.replayBytes() {
			over, full = slowReplayFull, true
		}
	case len(c.queue)-c.replayed >= c.e.cfg.QueueFrames || c.queued-c.replayBytes+len(b) > c.e.cfg.QueueBytes:
		over, full = slowQueueFull, true
	}
	if full {
		c.mu.Unlock()
		c.e.metrics.cutSlow(over)
		c.closeWith(corralv1.Code_CODE_SLOW_CONSUMER, "send queue overflow", 0, false)
		return false
	}
	c.queue = append(c.queue, b)
	if kind == pushReplay || kind == pushReplayAck {
		c.replayed++
		c.replayBytes += len(b)
	}
	if kind == pushReplayAck {
		if c.pages == nil {
			c.pages = new(pageAcks)
		}
		c.pages.acks = append(c.pages.acks, room)
	}
	c.addQueuedLocked(len(b))
	if kind == pushSignals {
		if c.sigAt == nil {
			c.sigAt = make(map[string]queuedSignals)
		}
		c.sigAt[room] = queuedSignals{idx: len(c.queue) - 1, batch: batch}
	}
	start := c.startWriterLocked()
	c.mu.Unlock()
	switch {
	case start && h != nil:
		h.add(c)
	case start:
		c.sender().add(c)
	}
	return true
}

// addQueuedLocked changes the bytes queued by n, and the link's sum of
// them with it: the link reports that sum to the core (LinkRequest.
// queued_bytes) without walking its connections. Every change to queued
// passes here. Lock must be held.
func (c *conn) addQueuedLocked(n int) {
	c.queued += n
	if c.link != nil {
		c.link.queued.Add(int64(n))
	}
}

// signal hands the socket to its writer if none holds it (a close was
// queued).
func (c *conn) signal() {
	c.mu.Lock()
	start := c.startWriterLocked()
	c.mu.Unlock()
	if start {
		c.sender().add(c)
	}
}

// startWriterLocked takes the writer token for whoever is about to hand
// the socket to its sender, and reports whether it did: not while a
// writer holds it, nor once the reader is done. Lock must be held.
func (c *conn) startWriterLocked() bool {
	if c.writing || c.ended {
		return false
	}
	c.writing = true
	c.writers.Add(1) // under mu: finish's Wait comes after ended is set
	return true
}

// takeLocked hands the whole queue to the writer and starts an empty one.
// Lock must be held.
func (c *conn) takeLocked() [][]byte {
	q := c.queue
	c.queue = c.spare[:0]
	c.spare = nil
	c.addQueuedLocked(-c.queued)
	c.replayed, c.replayBytes = 0, 0
	clear(c.sigAt) // queued batches are no longer mergeable
	if p := c.pages; p != nil {
		if !c.closing {
			p.taken = append(p.taken, p.acks...)
		}
		p.acks = p.acks[:0]
	}
	return q
}

// tookPagesLocked reports whether the writer took replay pages that
// reportTaken has not reported: the writer calls reportTaken, which takes
// the lock again, only then (almost never: a write round of live traffic
// takes the lock once). Lock must be held.
func (c *conn) tookPagesLocked() bool { return c.pages != nil && len(c.pages.taken) > 0 }

// reportTaken tells the core of the replay pages the writer took
// (takeLocked), outside the connection's lock: link.replayTaken takes
// the link's, which is held while frames are pushed here.
func (c *conn) reportTaken() {
	c.mu.Lock()
	var rooms []string
	if p := c.pages; p != nil {
		rooms, p.taken = p.taken, nil
	}
	c.mu.Unlock()
	if len(rooms) > 0 {
		c.link.replayTaken(c, rooms)
	}
}

// pageAcks are a connection's replay pages in flight. acks: the rooms
// whose replay page (a ConnReplay with ack) is in queue; taken: those the
// writer took and link.replayTaken has not reported yet. The core sends a
// room's next page once its writer took this one, so a reader that does
// not read holds at most a page of replay in queue and one on the wire.
// Guarded by the connection's lock.
type pageAcks struct {
	acks, taken []string
}

// queuedSignals is a room's signal batch waiting in the queue.
type queuedSignals struct {
	idx   int
	batch *corralv1.Batch
}

// maxMergedSignalBytes bounds a signal batch the edge rebuilds by merging
// a room's batches queued for a slow connection, as the core bounds the
// batch of one tick (core maxSignalTickBytes): unbounded, the merge of
// many ticks of distinct keys made one frame larger than the socket's
// queue takes.
const maxMergedSignalBytes = 256 << 10

// mergeSignals returns older's signals updated by newer's, latest value
// per key, in first-seen order.
func mergeSignals(older, newer *corralv1.Batch) *corralv1.Batch {
	out := make([]*corralv1.ServerFrame, 0, len(older.GetFrames())+len(newer.GetFrames()))
	at := make(map[string]int, cap(out))
	for _, b := range []*corralv1.Batch{older, newer} {
		for _, f := range b.GetFrames() {
			key := f.GetSignal().GetKey()
			if i, ok := at[key]; ok {
				out[i] = f
				continue
			}
			at[key] = len(out)
			out = append(out, f)
		}
	}
	return &corralv1.Batch{Frames: out}
}

// closeWith queues the frame that explains the close (closeFrame) and
// closes the connection with code once it is written. With flush, frames
// already queued go first; without, they are dropped (the client resumes
// and loses nothing). Safe to call twice; the first call wins. Every close
// the edge makes, the core's included, passes here. The reason is bounded on
// a character boundary (safetext.Reason): it ends up in a close frame, which
// browsers refuse (as 1006) when it is not UTF-8.
func (c *conn) closeWith(code corralv1.Code, reason string, delayMs uint32, flush bool) {
	reason = safetext.Reason(reason)
	hint, err := protocol.AppendServer(c.enc, nil, closeFrame(code, reason, delayMs))
	if err != nil {
		hint = nil
	}
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.closing = true
	c.closeCode, c.closeReason = code, reason
	if !flush {
		clear(c.queue)
		c.queue = c.queue[:0]
		c.addQueuedLocked(-c.queued)
		c.replayed, c.replayBytes = 0, 0
		clear(c.sigAt)
		if c.pages != nil {
			c.pages.acks = c.pages.acks[:0]
		}
	}
	if hint != nil {
		c.queue = append(c.queue, hint)
	}
	c.mu.Unlock()
	c.e.metrics.closes.WithLabelValues(strconv.Itoa(int(code))).Inc()
	c.signal()
}

// closeFrame is the frame sent before a close with code: a ReconnectHint
// for the resume and retry classes, and for the stop class an Error with
// the code, so that no frame named "reconnect" ever precedes a close that
// means "do not reconnect" (docs/CODES.md).
func closeFrame(code corralv1.Code, reason string, delayMs uint32) *corralv1.ServerFrame {
	if protocol.AdviceOf(code) == protocol.AdviceStop {
		return &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Error{
			Error: &corralv1.Error{Code: code, Message: reason},
		}}
	}
	return &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Reconnect{
		Reconnect: &corralv1.ReconnectHint{Code: code, Reason: reason, DelayMs: delayMs},
	}}
}

// sendRounds bounds the writes one turn of send makes while frames keep
// coming, so that one busy socket does not hold its shard from the others:
// past it, the socket goes to the back of the shard's next pass.
const sendRounds = 4

// send is the writer's turn on the connection's sender shard; the caller
// holds the writer token. It writes the wire's tail and everything queued
// as one message, without blocking, and again while frames were queued
// meanwhile (they merge into that next write). It gives the token back
// once the queue is empty; keeps it while the socket is full, and waits
// for room (waitWritable); and after a queued close closes the socket off
// the shard (closeSocket). A socket whose wire is busy with a control
// frame is written blocking on a goroutine (sendBlocking).
func (c *conn) send() {
	w := c.wire
	if w.raw == nil || !w.mu.TryLock() {
		// A socket that cannot be written without blocking (TLS, say),
		// or the reader writing a control frame, maybe blocking on
		// a full socket: not on the shard.
		go c.sendBlocking()
		return
	}
	bp := writeBufs.Get().(*[]byte)
	defer putWriteBuf(bp)
	for round := 1; ; round++ {
		// The tail first: while the socket has not taken it, the queue
		// stays queued, within its bounds, and a slow reader meets them.
		r := c.sendLocked(nil)
		var q [][]byte
		if r == writeDone {
			c.mu.Lock()
			q = c.takeLocked()
			took := c.tookPagesLocked()
			c.mu.Unlock()
			if took {
				c.reportTaken()
			}
			if len(q) > 0 {
				r = c.sendLocked(c.message(bp, q))
			}
		}
		if len(q) > 0 && r != writeFailed {
			c.e.metrics.framesPerFlush.Observe(float64(len(q)))
		}
		clear(q)
		c.mu.Lock()
		if c.spare == nil {
			c.spare = q[:0]
		}
		switch {
		case r == writeFailed:
			// The token is kept: no writer ever again.
			c.stalled = false
			c.mu.Unlock()
			w.mu.Unlock()
			c.writers.Done()
			go c.cutOff() // not on the shard: CloseNow may wait for a close
			return
		case r == writeTail || r == writeFull:
			c.stalled = true
			c.mu.Unlock()
			w.mu.Unlock()
			c.waitWritable()
			return
		}
		c.stalled = false
		c.writeStart.Store(0)
		switch {
		case len(c.queue) > 0 && round < sendRounds:
			c.mu.Unlock()
			continue
		case len(c.queue) > 0:
			c.mu.Unlock()
			w.mu.Unlock()
			c.sender().add(c)
			return
		case c.closing:
			code, reason := c.closeCode, c.closeReason
			c.mu.Unlock()
			w.mu.Unlock()
			go c.closeSocket(code, reason)
			return
		}
		c.writing = false
		c.mu.Unlock()
		w.mu.Unlock()
		c.writers.Done()
		return
	}
}

// waitWritable waits for room on a socket that did not take a whole write:
// the poller hands it back to its sender when it turns writable; where
// there is no poller, a goroutine writes blocking. The caller holds the
// writer token.
func (c *conn) waitWritable() {
	c.writeStart.CompareAndSwap(0, mono.Now())
	if !c.e.poller.waitWritable(c) {
		go c.sendBlocking()
	}
}

// sendBlocking is send on a goroutine of its own, whose writes may block:
// where the socket cannot be written without blocking or waited for (no
// poller), or its wire is busy. The caller holds the writer token.
func (c *conn) sendBlocking() {
	bp := writeBufs.Get().(*[]byte)
	defer putWriteBuf(bp)
	for {
		c.mu.Lock()
		q := c.takeLocked()
		took := c.tookPagesLocked()
		c.mu.Unlock()
		if took {
			c.reportTaken()
		}
		c.writeStart.CompareAndSwap(0, mono.Now())
		var err error
		if len(q) > 0 {
			err = c.writeData(c.message(bp, q))
			if err == nil {
				c.e.metrics.framesPerFlush.Observe(float64(len(q)))
			}
		} else {
			err = c.writeData(nil)
		}
		c.writeStart.Store(0)
		clear(q)
		c.mu.Lock()
		c.stalled = false
		if c.spare == nil {
			c.spare = q[:0]
		}
		switch {
		case err != nil:
			c.mu.Unlock()
			c.writers.Done()
			c.cutOff()
			return
		case len(c.queue) > 0:
			c.mu.Unlock()
			continue
		case c.closing:
			code, reason := c.closeCode, c.closeReason
			c.mu.Unlock()
			c.closeSocket(code, reason)
			return
		}
		c.writing = false
		c.mu.Unlock()
		c.writers.Done()
		return
	}
}

// closeSocket closes the socket with code once the queued close frame is
// written: it sends the close frame (blocking), and the reader ends the
// connection when the client's reply comes; past closeWait without one,
// the socket is cut. The caller holds the writer token, kept: no writer
// after the close.
func (c *conn) closeSocket(code corralv1.Code, reason string) {
	defer c.writers.Done()
	if c.stream != nil {
		c.stream.close(c, code, reason) // carrier.go
		c.e.poller.closed(c)
		return
	}
	if err := c.writeClose(uint16(code), reason); err != nil {
		c.cutOff()
		return
	}
	time.AfterFunc(closeWait, c.cutOff)
}
