package client

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/mono"
	"github.com/corral-rt/corral/internal/retry"
	"github.com/corral-rt/corral/protocol"
	"google.golang.org/protobuf/proto"
)

var (
	// ErrClosed is what a Session's methods return after Close.
	ErrClosed = errors.New("client: session closed")
	// ErrSessionExpired is wrapped by Publish when the session expired
	// between sending a publish and its acknowledgement: the server dedupes
	// ids per session, so the publish may or may not have been applied.
	ErrSessionExpired = errors.New("client: session expired")
)

// SessionOptions configure Connect. The zero value speaks JSON without a
// token and uses the default Backoff.
type SessionOptions struct {
	// Options configure every connection the Session dials. Resume is
	// ignored: the Session resumes by itself.
	Options
	// Backoff spaces reconnect attempts; server hints take precedence.
	Backoff Backoff
	// DialTimeout bounds one connection attempt. Default 10s.
	DialTimeout time.Duration
	// EventBuffer is the capacity of Events. Default 4096.
	EventBuffer int
	// PublishTimeout is how long a publish waits for its answer on one
	// connection before it is sent again there (same id and place, in its
	// room's order). An edge answers a publish that a core it lost did
	// not answer (4103, sent again at once), so this covers what is lost
	// elsewhere (the edge itself went away). Default 5s.
	PublishTimeout time.Duration
	// Fallbacks are other addresses of the same deployment (more edges,
	// when no load balancer spreads clients). A reconnect after the server
	// asked the client to go elsewhere (CODE_GOING_AWAY: a drain or a
	// shutdown), and any attempt after a failed dial, goes to the next
	// address, in turn. Sessions resume on any edge of a deployment whose
	// cores share Redis.
	Fallbacks []string
}

func (o SessionOptions) withDefaults() SessionOptions {
	o.Resume = nil
	if o.DialTimeout <= 0 {
		o.DialTimeout = 10 * time.Second
	}
	if o.EventBuffer <= 0 {
		o.EventBuffer = 4096
	}
	if o.PublishTimeout <= 0 {
		o.PublishTimeout = 5 * time.Second
	}
	return o
}

// EventKind says what an Event reports.
type EventKind uint8

const (
	// EventFrame carries a server frame of a room the session is in or is
	// joining: Message (per room in seq order, never twice), SignalEvent,
	// Joined, Left, Published or Error. Pong, ReconnectHint and Reset
	// frames are not passed on as EventFrame.
	EventFrame EventKind = iota + 1
	// EventConnected: a connection is up. Resumed is true when the session
	// continued (nothing lost), false for the first connection and for a
	// new session after the old one expired; EventReset follows then for
	// every room the session was in.
	EventConnected
	// EventDisconnected: the connection ended (Err says why). Unless the
	// Session has ended (see Done), it reconnects by itself.
	EventDisconnected
	// EventReset: Room's history from where the application left it is
	// not available; refetch the room's state. Frame is a Reset frame whose
	// seq is where live messages continue: the server's own, or one the
	// Session made after rejoining the room in a new session.
	EventReset
)

// String returns "frame", "connected", "disconnected" or "reset".
func (k EventKind) String() string {
	switch k {
	case EventFrame:
		return "frame"
	case EventConnected:
		return "connected"
	case EventDisconnected:
		return "disconnected"
	case EventReset:
		return "reset"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is one thing a Session reports, in order.
type Event struct {
	Kind EventKind
	// Frame is the server frame (EventFrame, EventReset).
	Frame *corralv1.ServerFrame
	// Room is the room of an EventReset.
	Room string
	// Resumed is set on an EventConnected that continued the session.
	Resumed bool
	// Err is why the connection ended (EventDisconnected).
	Err error
}

// Session is a self-healing connection to corral: it reconnects after a
// drop (spaced by Backoff, honouring the server's hint), resumes the
// session from where each room was left, and delivers every room's
// messages in order without duplicates. When the session expired it starts
// a new one, rejoins its rooms and reports an EventReset for each. Close
// codes whose advice is stop, and CODE_SESSION_TAKEN_OVER, end it.
//
// All methods are safe for concurrent use. Drain Events: the Session's
// reader waits for room in Events, and meanwhile nothing more is read from
// the connection (the client's backpressure; the server may then close the
// connection as a slow consumer, and the Session resumes).
//
// A Session runs one supervisor goroutine, which dials, sends heartbeats
// and decides what to do after a drop, and one reader goroutine per
// connection, which tracks positions and feeds Events.
type Session struct {
	urls     []string // the address Connect was given, then Fallbacks
	at       int      // urls[at] is dialed next; supervisor only
	opts     SessionOptions
	events   chan Event
	strays   chan string // rooms to leave on the current connection
	ctx      context.Context
	cancel   context.CancelFunc
	done     chan struct{}  // closed when the session has ended
	wg       sync.WaitGroup // the readers
	lastSend atomic.Int64   // mono.Now nanoseconds of the last frame sent
	pingID   uint64         // supervisor only
	// instance and dials order this Session's resume attempts
	// (corralv1.Resume.instance and .attempt): a slow attempt given up on
	// cannot take the session from a newer one. dials: supervisor only.
	instance string
	dials    uint32

	mu       sync.Mutex // guards the following fields
	conn     *Conn      // nil while reconnecting
	live     bool       // conn has been told about every room: usable
	welcome  *corralv1.Welcome
	changed  chan struct{} // closed (and replaced) when conn, live or err change
	rooms    map[string]*roomState
	outboxes map[string]*outbox // by room; only rooms with unresolved publishes
	attempts []int
	err      error // why the session ended
}

// roomState is one room the session is in or is joining. Session.mu
// guards its fields.
type roomState struct {
	seq     uint64 // the last message passed on
	epoch   string
	joined  *corralv1.Joined // the latest Joined; nil until the first
	in      bool             // the current session confirmed membership
	reset   bool             // report an EventReset at the next Joined
	ready   chan struct{}    // closed at the first Joined or on failure
	err     error            // why the join failed
	settled bool
	// presence: joined with presence, with this state (JoinPresence,
	// SetPresence); kept for rejoins on a new session.
	presence bool
	state    []byte
	// stateEpoch, statePos: the room's keyed state passed on (its last
	// StateSnapshot, then each StateChange that follows it), sent with a
	// resume or rejoin so that the server sends only what follows.
	stateEpoch string
	statePos   uint64
}

// settle ends the wait of Join. Session.mu must be held.
func (st *roomState) settle(err error) {
	if !st.settled {
		st.settled, st.err = true, err
		close(st.ready)
	}
}

// Connect dials url (ws://host:port/ws) and starts a Session. It retries
// with Backoff until ctx ends, except after a stop code (a refused token,
// for example), which it returns at once as a *CloseError. ctx bounds only
// the connecting; the Session lives until Close or a stop.
func Connect(ctx context.Context, url string, opts SessionOptions) (*Session, error) {
	opts = opts.withDefaults()
	s := &Session{
		instance: newInstance(),
		urls:     append([]string{url}, opts.Fallbacks...),
		opts:     opts,
		events:   make(chan Event, opts.EventBuffer),
		strays:   make(chan string, 64),
		done:     make(chan struct{}),
		changed:  make(chan struct{}),
		rooms:    make(map[string]*roomState),
		outboxes: make(map[string]*outbox),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	c, err := s.dial(ctx, false, nil, false)
	if err != nil {
		s.cancel()
		return nil, err
	}
	go s.run(c)
	return s, nil
}

// Events delivers what happens, in order: frames of the session's rooms
// and connection changes. It is closed when the Session has ended (then
// Err says why).
func (s *Session) Events() <-chan Event { return s.events }

// Done is closed when the Session has ended: by Close, or by a close code
// that says stop.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err reports why the Session ended ([ErrClosed] after Close), or nil
// while it runs.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Welcome is the welcome of the latest connection: its session id differs
// from the previous one's after the session expired.
func (s *Session) Welcome() *corralv1.Welcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.welcome
}

// Attempts reports, for the first connection and then every reconnect, how
// many dials it took (1 when the first attempt succeeded).
func (s *Session) Attempts() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.attempts...)
}

// Join enters room and waits for Joined. The room is remembered: after a
// drop the Session resumes it from the last message passed on. Joining a
// room the session is already in returns at once.
func (s *Session) Join(ctx context.Context, room string) (*corralv1.Joined, error) {
	return s.join(ctx, room, false, nil)
}

func (s *Session) join(ctx context.Context, room string, presence bool, state []byte) (*corralv1.Joined, error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return nil, s.err
	}
	st := s.rooms[room]
	if st != nil && st.in {
		j := st.joined
		s.mu.Unlock()
		return j, nil
	}
	send := st == nil
	if send {
		st = &roomState{ready: make(chan struct{}), presence: presence, state: state}
		s.rooms[room] = st
	}
	jf := st.joinFrame(room)
	// While conn is nil the supervisor joins the room once connected.
	c := s.conn
	s.mu.Unlock()
	if send && c != nil {
		err := s.send(ctx, c, jf)
		if isEncodeErr(err) {
			s.forget(room, st, false)
			return nil, err
		}
		// Otherwise a failed send means a dropped connection: the
		// supervisor joins the room on the next one.
	}
	select {
	case <-st.ready:
		s.mu.Lock()
		defer s.mu.Unlock()
		if st.err != nil {
			return nil, st.err
		}
		return st.joined, nil
	case <-ctx.Done():
		s.forget(room, st, true)
		return nil, ctx.Err()
	case <-s.done:
		return nil, s.Err()
	}
}

// forget drops a room that was not joined after all; with leave, a Leave
// follows in case the server joined it meanwhile.
func (s *Session) forget(room string, st *roomState, leave bool) {
	s.mu.Lock()
	if s.rooms[room] == st && !st.in {
		delete(s.rooms, room)
		st.settle(fmt.Errorf("client: join %s: abandoned", room))
	}
	s.mu.Unlock()
	if leave {
		s.leaveLater(room)
	}
}

// Leave exits room. No frame of the room is passed on after Leave returns
// (frames already in Events stay there).
func (s *Session) Leave(ctx context.Context, room string) error {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return s.err
	}
	st := s.rooms[room]
	if st == nil {
		s.mu.Unlock()
		return nil
	}
	delete(s.rooms, room)
	st.settle(fmt.Errorf("client: join %s: left", room))
	if ob := s.outboxes[room]; ob != nil && len(ob.pending) == 0 {
		delete(s.outboxes, room)
	}
	c := s.conn
	s.mu.Unlock()
	if c == nil {
		// Not resumed; if the server restores it anyway, the reader
		// leaves it.
		return nil
	}
	if err := s.send(ctx, c, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Leave{
		Leave: &corralv1.Leave{Room: room},
	}}); err != nil && (ctx.Err() != nil || isEncodeErr(err)) {
		return err
	}
	return nil
}

// Publish sends a reliable message to a room the session is in and waits
// for its seq. id must be unique within the session. If the connection
// drops before the acknowledgement, Publish sends the same id again after
// the resume (the server applies it once) until ctx ends. When the session
// expired meanwhile, the error wraps [ErrSessionExpired]. Error frames
// whose advice is retry are retried after their retry_after.
//
// Publishes to one room enter it in the order Publish was called, even
// when called from several goroutines at once (the order of the calls is
// then the order in which they took their place): each carries its place
// in the session's sequence (corralv1.Publish.seq), and one that must be
// sent again waits until every earlier one is resolved (outbox.go).
func (s *Session) Publish(ctx context.Context, room, id string, payload []byte) (*corralv1.Published, error) {
	if id == "" {
		return nil, errors.New("client: publish needs an id")
	}
	return s.publish(ctx, room, id, payload, s.place(room, id))
}

// PublishResult is the outcome of [Session.PublishAsync].
type PublishResult struct {
	Published *corralv1.Published
	Err       error
}

// PublishAsync is [Session.Publish] without waiting: the publish takes
// its place in the room's order before PublishAsync returns, so that
// publishes made one after the other from one goroutine enter the room in
// that order while several are on their way at once. The result arrives
// on the returned channel (buffered: it need not be read).
func (s *Session) PublishAsync(ctx context.Context, room, id string, payload []byte) <-chan PublishResult {
	res := make(chan PublishResult, 1)
	if id == "" {
		res <- PublishResult{Err: errors.New("client: publish needs an id")}
		return res
	}
	out := s.place(room, id)
	go func() {
		p, err := s.publish(ctx, room, id, payload, out)
		res <- PublishResult{p, err}
	}()
	return res
}

// place gives id the next place in room's outbox.
func (s *Session) place(room, id string) placed {
	s.mu.Lock()
	defer s.mu.Unlock()
	ob := s.outboxes[room]
	if ob == nil {
		ob = newOutbox()
		s.outboxes[room] = ob
	}
	return placed{ob, ob.add(id)}
}

// placed is a publish's place in its room's outbox.
type placed struct {
	ob  *outbox
	out *outgoing
}

// publish sends the publish at pl until it is resolved (Publish).
func (s *Session) publish(ctx context.Context, room, id string, payload []byte, pl placed) (*corralv1.Published, error) {
	ob, out := pl.ob, pl.out
	stored := false
	defer func() {
		s.mu.Lock()
		ob.remove(out, stored)
		s.mu.Unlock()
	}()
	var prev *Conn
	var sent string // the session the id was sent in
	step := 0
	s.mu.Lock()
	first := !ob.started && !ob.atHead(out)
	s.mu.Unlock()
	for again := first; ; again = true {
		if again {
			// Sent again only from the head: a later publish never
			// overtakes an earlier one that is still unresolved.
			if err := s.waitHead(ctx, ob, out); err != nil {
				return nil, err
			}
		}
		c, sid, err := s.ready(ctx, prev)
		if err != nil {
			return nil, err
		}
		if sent != "" && sid != sent {
			return nil, fmt.Errorf("client: publish %s: %w before it was acknowledged; it may have been applied", id, ErrSessionExpired)
		}
		sent = sid
		s.mu.Lock()
		seq := out.seq
		s.mu.Unlock()
		s.lastSend.Store(mono.Now())
		actx, cancel := context.WithTimeout(ctx, s.opts.PublishTimeout)
		p, err := c.PublishSeq(actx, room, id, seq, payload)
		cancel()
		if err == nil {
			stored = true
			return p, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, context.DeadlineExceeded) {
			// No answer: lost on its way (a core that went away). Send
			// it again once it is the head; a copy that was stored is
			// answered as a duplicate.
			prev = nil
			continue
		}
		var se *ServerError
		if errors.As(err, &se) {
			if protocol.AdviceOf(se.Err.GetCode()) != protocol.AdviceRetry {
				return nil, err
			}
			prev = nil
			s.mu.Lock()
			head, moved := ob.atHead(out), out.seq != seq
			s.mu.Unlock()
			if se.Err.GetCode() == corralv1.Code_CODE_OUT_OF_ORDER && (!head || moved) {
				// An earlier publish is not stored yet (or was refused
				// for good, and this one took its place): this one goes
				// again once that one is resolved.
				continue
			}
			wait := time.Duration(se.Err.GetRetryAfterMs()) * time.Millisecond
			wait = max(wait, s.opts.Backoff.Delay(step, nil))
			step++
			if !retry.Sleep(ctx, wait) {
				return nil, ctx.Err()
			}
			continue
		}
		if isEncodeErr(err) || errors.Is(err, ErrInFlight) {
			// Not the connection's fault: a publish of this id is
			// still waiting on it (the app published the id twice).
			return nil, err
		}
		// The connection failed; wait for the next one.
		abandon(c)
		prev = c
	}
}

// waitHead waits until every publish before out in ob is resolved.
func (s *Session) waitHead(ctx context.Context, ob *outbox, out *outgoing) error {
	for {
		s.mu.Lock()
		head, moved := ob.atHead(out), ob.moved
		s.mu.Unlock()
		if head {
			return nil
		}
		select {
		case <-moved:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Call asks the application's backend through corral (its Call hook,
// docs/HOOKS.md), as [Conn.Call] does, on the current connection; while
// the Session reconnects it waits for the next one. A call is not
// retried: when the connection drops before the answer the call may have
// run, and Call returns the connection's error. A refusal, or a backend
// that could not answer (CODE_UNAVAILABLE with retry_after_ms), is a
// *ServerError.
func (s *Session) Call(ctx context.Context, method string, payload []byte) ([]byte, error) {
	c, _, err := s.ready(ctx, nil)
	if err != nil {
		return nil, err
	}
	s.lastSend.Store(mono.Now())
	return c.Call(ctx, method, payload)
}

// Signal sends an ephemeral signal (sig.Room must be joined). While the
// Session reconnects it waits for the next connection. A signal sent just
// before a drop may be lost: signals are not stored.
func (s *Session) Signal(ctx context.Context, sig *corralv1.Signal) error {
	f := &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Signal{Signal: sig}}
	var prev *Conn
	for {
		c, _, err := s.ready(ctx, prev)
		if err != nil {
			return err
		}
		err = s.send(ctx, c, f)
		if err == nil || ctx.Err() != nil || isEncodeErr(err) {
			return err
		}
		prev = c
	}
}

// Close ends the Session: it closes the connection normally (the server
// keeps the session resumable until its TTL) and waits for its goroutines.
// Events is closed. Safe to call twice.
func (s *Session) Close() error {
	s.cancel()
	<-s.done
	return nil
}

// ready waits for a usable connection other than prev and returns it with
// its session id.
func (s *Session) ready(ctx context.Context, prev *Conn) (*Conn, string, error) {
	for {
		s.mu.Lock()
		c, live, ch, err := s.conn, s.live, s.changed, s.err
		sid := s.welcome.GetSessionId()
		s.mu.Unlock()
		if err != nil {
			return nil, "", err
		}
		if c != nil && live && c != prev {
			return c, sid, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
	}
}

// broadcastLocked wakes everyone in ready. Lock must be held.
func (s *Session) broadcastLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// send writes f on c. A failed write (not an encoding error, not ctx)
// means the connection is broken: it is cut, so that the supervisor
// reconnects.
func (s *Session) send(ctx context.Context, c *Conn, f *corralv1.ClientFrame) error {
	s.lastSend.Store(mono.Now())
	err := c.Send(ctx, f)
	if err != nil && ctx.Err() == nil && !isEncodeErr(err) {
		abandon(c)
	}
	return err
}

// abandon cuts a connection that failed a write; its reader then ends.
func abandon(c *Conn) {
	select {
	case <-c.Done():
	default:
		c.cut()
	}
}

func isEncodeErr(err error) bool {
	return errors.Is(err, protocol.ErrBadFrame) || errors.Is(err, protocol.ErrUnknownFrame)
}

// joinFrame joins room as st wants. Session.mu must be held.
func (st *roomState) joinFrame(room string) *corralv1.ClientFrame {
	return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{
		Room: room, Presence: st.presence, PresenceState: st.state,
		StatePosition: st.statePos, StateEpoch: st.stateEpoch,
	}}}
}

// leaveLater asks the supervisor to send a Leave for room on the current
// connection, if the room is still not wanted by then. Never blocks.
func (s *Session) leaveLater(room string) {
	select {
	case s.strays <- room:
	default:
	}
}

// dial connects, retrying with Backoff until ctx ends or a stop code. With
// fresh it starts a new session; otherwise it resumes the current one and
// switches to fresh after CODE_SESSION_EXPIRED. reconnect waits before the
// first attempt too.
func (s *Session) dial(ctx context.Context, fresh bool, hint *corralv1.ReconnectHint, reconnect bool) (*Conn, error) {
	step := 0
	var last error
	if reconnect && hint.GetCode() == corralv1.Code_CODE_GOING_AWAY {
		s.at = (s.at + 1) % len(s.urls)
	}
	for n := 1; ; n++ {
		if reconnect || n > 1 {
			if !retry.Sleep(ctx, s.opts.Backoff.Delay(step, hint)) {
				break
			}
			step++
		}
		o := s.opts.Options
		if !fresh {
			o.Resume = s.resumeFrame()
			if o.Resume != nil {
				s.dials++
				o.Resume.Instance, o.Resume.Attempt = s.instance, s.dials
			}
		}
		actx, cancel := context.WithTimeout(ctx, s.opts.DialTimeout)
		url := s.urls[s.at]
		c, err := Dial(actx, url, o)
		cancel()
		if err == nil {
			s.mu.Lock()
			s.attempts = append(s.attempts, n)
			s.mu.Unlock()
			return c, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
		hint = nil
		var ce *CloseError
		if errors.As(err, &ce) {
			hint = ce.Hint
		} else {
			// Not reached (refused, unreachable, or not upgraded): try
			// the next address.
			s.at = (s.at + 1) % len(s.urls)
		}
		switch adviceOf(err) {
		case adviceStop:
			return nil, err
		case adviceFresh:
			// Not a failure to reach the server: go again at once.
			fresh, step = true, 0
		}
	}
	if last == nil {
		return nil, fmt.Errorf("client: connect %s: %w", s.urls[s.at], ctx.Err())
	}
	return nil, fmt.Errorf("client: connect %s: %w; last attempt: %w", s.urls[s.at], ctx.Err(), last)
}

// newInstance returns a random name for one Session (96 bits, base64url).
func newInstance() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// resumeFrame names the current session and the position of every room
// it is in; nil before the first welcome.
func (s *Session) resumeFrame() *corralv1.Resume {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.welcome == nil {
		return nil
	}
	r := &corralv1.Resume{SessionId: s.welcome.GetSessionId(), ResumeToken: s.welcome.GetResumeToken()}
	for name, st := range s.rooms {
		if st.in {
			r.Rooms = append(r.Rooms, &corralv1.RoomPosition{Room: name, Seq: st.seq, Epoch: st.epoch, Presence: st.presence,
				StatePosition: st.statePos, StateEpoch: st.stateEpoch})
		}
	}
	return r
}

type advice uint8

const (
	adviceResume advice = iota // reconnect and resume
	adviceFresh                // reconnect without resume: a new session
	adviceStop                 // end the Session
)

// adviceOf says what to do after err ended a connection or an attempt:
// corral's codes by their range (docs/CODES.md); standard WebSocket codes
// that blame the client stop; the network, 1000, 1001, 1006 and the
// server-side 1011-1014 resume.
func adviceOf(err error) advice {
	var ce *CloseError
	if !errors.As(err, &ce) {
		return adviceResume // network error, or an HTTP refusal such as 503
	}
	code := corralv1.Code(ce.Code)
	switch {
	case code == corralv1.Code_CODE_SESSION_EXPIRED:
		return adviceFresh
	case code == corralv1.Code_CODE_SESSION_TAKEN_OVER:
		return adviceStop
	case ce.Code >= 4000 && ce.Code <= 4999:
		if protocol.AdviceOf(code) == protocol.AdviceStop {
			return adviceStop
		}
		return adviceResume
	}
	switch ce.Code {
	case websocket.StatusProtocolError, websocket.StatusUnsupportedData,
		websocket.StatusInvalidFramePayloadData, websocket.StatusPolicyViolation,
		websocket.StatusMessageTooBig, websocket.StatusMandatoryExtension:
		return adviceStop
	}
	return adviceResume
}

// run is the supervisor: it serves a connection until it ends, then
// reconnects, until Close or a stop.
func (s *Session) run(c *Conn) {
	defer s.finish()
	for {
		readerDone := s.attach(c)
		err := s.serve(c, readerDone)
		s.mu.Lock()
		s.conn, s.live = nil, false
		s.broadcastLocked()
		s.mu.Unlock()
		if s.ctx.Err() != nil {
			return
		}
		a := adviceOf(err)
		if a == adviceStop {
			s.fail(err)
			return
		}
		var hint *corralv1.ReconnectHint
		var ce *CloseError
		if errors.As(err, &ce) {
			hint = ce.Hint
		}
		c, err = s.dial(s.ctx, a == adviceFresh, hint, true)
		if err != nil {
			if s.ctx.Err() == nil {
				s.fail(err)
			}
			return
		}
	}
}

// attach makes c the session's connection: it starts c's reader, joins the
// rooms the server does not restore, then lets callers use c. After a new
// session (expiry) every room is joined afresh and reported with a Reset.
func (s *Session) attach(c *Conn) <-chan struct{} {
	w := c.Welcome()
	s.lastSend.Store(mono.Now())
	s.mu.Lock()
	resumed := w.GetResumed() && s.welcome != nil && w.GetSessionId() == s.welcome.GetSessionId()
	s.welcome = w
	s.conn, s.live = c, false
	var pending []*corralv1.ClientFrame
	for name, st := range s.rooms {
		if !resumed {
			st.reset = st.reset || st.in
			st.in = false
		}
		if !st.in {
			pending = append(pending, st.joinFrame(name))
		} else if st.presence && st.state != nil {
			// Resumed: the server kept the presence, but its state is gone
			// if the grace window passed; setting it again is free if not.
			pending = append(pending, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_SetPresence{SetPresence: &corralv1.SetPresence{
				Room: name, State: st.state,
			}}})
		}
	}
	s.mu.Unlock()

	readerDone := make(chan struct{})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(readerDone)
		s.read(c, Event{Kind: EventConnected, Resumed: resumed})
	}()
	// The joins go out before anything a caller sends on c, so a publish
	// finds its room.
	for _, jf := range pending {
		ctx, cancel := context.WithTimeout(s.ctx, s.opts.DialTimeout)
		err := s.send(ctx, c, jf)
		cancel()
		if err != nil && !isEncodeErr(err) {
			break // c is cut; the next connection joins them
		}
	}
	s.mu.Lock()
	if s.conn == c {
		s.live = true
		s.broadcastLocked()
	}
	s.mu.Unlock()
	return readerDone
}

// serve sends heartbeats and Leaves for stray rooms on c until c ends
// (returning why) or the Session closes (returning nil).
func (s *Session) serve(c *Conn, readerDone <-chan struct{}) error {
	hb := time.Duration(c.Welcome().GetHeartbeatMs()) * time.Millisecond
	if hb <= 0 {
		hb = 25 * time.Second
	}
	t := time.NewTicker(hb / 4)
	defer t.Stop()
	// The token's refresh, when a TokenProvider can make a new one.
	var refreshC <-chan time.Time
	rt := time.NewTimer(time.Hour)
	rt.Stop()
	defer rt.Stop()
	exp := c.Welcome().GetExpiresUnix()
	arm := func(d time.Duration) {
		if s.opts.TokenProvider != nil && exp > 0 && d > 0 {
			rt.Reset(d)
			refreshC = rt.C
		} else {
			refreshC = nil
		}
	}
	arm(max(refreshDelay(time.Now(), exp), time.Nanosecond))
	for {
		select {
		case <-refreshC:
			if next, err := s.refresh(c, hb); err == nil {
				exp = next
				arm(max(refreshDelay(time.Now(), exp), time.Nanosecond))
			} else {
				// Try again halfway to the expiry; past it the server
				// closes the connection and the reconnect gets a new
				// token.
				arm(time.Until(time.Unix(exp, 0)) / 2)
			}
		case <-readerDone:
			if ce := c.Err(); ce != nil {
				return ce
			}
			return &CloseError{Code: -1, Err: errors.New("client: connection ended")}
		case <-s.ctx.Done():
			_ = c.Close()
			<-readerDone
			return nil
		case room := <-s.strays:
			s.mu.Lock()
			_, wanted := s.rooms[room]
			s.mu.Unlock()
			if !wanted {
				ctx, cancel := context.WithTimeout(s.ctx, hb/2)
				_ = s.send(ctx, c, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Leave{
					Leave: &corralv1.Leave{Room: room},
				}})
				cancel()
			}
		case <-t.C:
			// Keep the server from timing the connection out: it closes
			// one that sent nothing for two heartbeats.
			if time.Duration(mono.Now()-s.lastSend.Load()) < hb/2 {
				continue
			}
			s.pingID++
			ctx, cancel := context.WithTimeout(s.ctx, hb/2)
			_ = s.send(ctx, c, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Ping{
				Ping: &corralv1.Ping{Id: s.pingID},
			}})
			cancel()
		}
	}
}

// refreshDelay is how long after now to refresh a token that expires at
// exp (unix seconds): when a quarter of the time left remains, at most a
// minute before the expiry.
func refreshDelay(now time.Time, exp int64) time.Duration {
	left := time.Unix(exp, 0).Sub(now)
	return left - min(left/4, time.Minute)
}

// refresh sends c a new token from the TokenProvider and returns the new
// expiry. It runs on the supervisor, bounded by hb.
func (s *Session) refresh(c *Conn, hb time.Duration) (int64, error) {
	ctx, cancel := context.WithTimeout(s.ctx, max(hb/2, s.opts.DialTimeout))
	defer cancel()
	token, err := s.opts.TokenProvider(ctx)
	if err != nil {
		return 0, fmt.Errorf("client: token provider: %w", err)
	}
	s.lastSend.Store(mono.Now())
	r, err := c.Refresh(ctx, token)
	if err != nil {
		return 0, err
	}
	return r.GetExpiresUnix(), nil
}

// read passes c's frames on until c ends, framed by EventConnected and
// EventDisconnected.
func (s *Session) read(c *Conn, connected Event) {
	s.emit(connected)
	var out []Event
	for f := range c.Frames() {
		out = s.handle(f, out[:0])
		for _, ev := range out {
			s.emit(ev)
		}
		clear(out)
	}
	var err error = errors.New("client: connection ended")
	if ce := c.Err(); ce != nil {
		err = ce
	}
	s.emit(Event{Kind: EventDisconnected, Err: err})
}

// emit waits for room in Events; after Close it drops ev.
func (s *Session) emit(ev Event) {
	select {
	case s.events <- ev:
	case <-s.ctx.Done():
	}
}

// handle updates room positions from f and appends the events it makes.
// Frames of rooms the session is not in are dropped.
func (s *Session) handle(f *corralv1.ServerFrame, out []Event) []Event {
	frame := Event{Kind: EventFrame, Frame: f}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch k := f.GetKind().(type) {
	case *corralv1.ServerFrame_Message:
		st := s.rooms[k.Message.GetRoom()]
		if st != nil && k.Message.GetSeq() <= st.seq && k.Message.GetChunk().GetReplace() {
			// A growing message's prefix for a member that joined or
			// resumed mid-stream sits at the seq the message reached,
			// which may be at or below the joined seq: pass it on (an
			// Assembler applies each version once) without moving seq.
			return append(out, frame)
		}
		if st == nil || k.Message.GetSeq() <= st.seq {
			return out // not ours, or already passed on
		}
		st.seq = k.Message.GetSeq()
		return append(out, frame)
	case *corralv1.ServerFrame_Joined:
		j := k.Joined
		st := s.rooms[j.GetRoom()]
		if st == nil {
			if j.GetResumed() {
				s.leaveLater(j.GetRoom()) // restored, but left meanwhile
			}
			return out
		}
		if st.epoch != j.GetEpoch() {
			st.epoch, st.seq = j.GetEpoch(), j.GetSeq()
		} else {
			st.seq = max(st.seq, j.GetSeq())
		}
		st.joined, st.in = j, true
		if st.reset {
			st.reset = false
			out = append(out, Event{Kind: EventReset, Room: j.GetRoom(), Frame: &corralv1.ServerFrame{
				Kind: &corralv1.ServerFrame_Reset_{Reset_: &corralv1.Reset{Room: j.GetRoom(), Seq: st.seq, Epoch: st.epoch}},
			}})
		}
		st.settle(nil)
		return append(out, frame)
	case *corralv1.ServerFrame_Reset_:
		r := k.Reset_
		st := s.rooms[r.GetRoom()]
		if st == nil {
			return out
		}
		st.epoch, st.seq, st.reset = r.GetEpoch(), r.GetSeq(), false
		return append(out, Event{Kind: EventReset, Room: r.GetRoom(), Frame: f})
	case *corralv1.ServerFrame_Left:
		st := s.rooms[k.Left.GetRoom()]
		if st == nil {
			return out // the answer to a Leave
		}
		if k.Left.GetCode() != corralv1.Code_CODE_UNSPECIFIED {
			// The server removed the session from the room.
			delete(s.rooms, k.Left.GetRoom())
			st.settle(fmt.Errorf("client: join %s: removed: %s", k.Left.GetRoom(), k.Left.GetReason()))
		}
		return append(out, frame)
	case *corralv1.ServerFrame_Signal:
		if s.rooms[k.Signal.GetRoom()] == nil {
			return out
		}
		return append(out, frame)
	case *corralv1.ServerFrame_StateSnapshot:
		if st := s.rooms[k.StateSnapshot.GetRoom()]; st != nil {
			st.stateEpoch, st.statePos = k.StateSnapshot.GetEpoch(), k.StateSnapshot.GetPosition()
		}
		return append(out, frame)
	case *corralv1.ServerFrame_StateChange:
		// The position moves only along an unbroken order; a view that
		// finds a gap asks for a snapshot (client.State).
		ch := k.StateChange
		st := s.rooms[ch.GetRoom()]
		fresh := st != nil && st.stateEpoch == "" && st.statePos == 0
		if st != nil && (ch.GetEpoch() == st.stateEpoch || fresh) && ch.GetPosition() == st.statePos+1 {
			st.stateEpoch, st.statePos = ch.GetEpoch(), ch.GetPosition()
		}
		return append(out, frame)
	case *corralv1.ServerFrame_Error:
		e := k.Error
		if e.GetRef() != "" || e.GetRoom() == "" {
			return append(out, frame)
		}
		st := s.rooms[e.GetRoom()]
		if st == nil {
			return out
		}
		if refusesJoin(e) && !st.in {
			delete(s.rooms, e.GetRoom())
			st.settle(&ServerError{Err: e})
		}
		return append(out, frame)
	case *corralv1.ServerFrame_Welcome:
		// A Welcome on a live connection: the edge resumed the session for
		// us, which rotated the resume token. Keep it, or the next resume
		// is refused.
		if w := k.Welcome; s.welcome != nil && w.GetSessionId() == s.welcome.GetSessionId() {
			nw := proto.CloneOf(s.welcome)
			nw.ResumeToken = w.GetResumeToken()
			s.welcome = nw
		}
		return out
	case *corralv1.ServerFrame_Pong, *corralv1.ServerFrame_Reconnect, *corralv1.ServerFrame_Refreshed:
		return out
	}
	return append(out, frame)
}

// refusesJoin reports whether e, an Error with a room and no ref, refuses
// a join of its room: it names the join frame (Error.frame). An Error that
// names no frame (a server older than the field) is taken for the join's
// unless its code is one a signal's refusal has (CODE_NOT_JOINED,
// CODE_TOO_LARGE), as it always was.
func refusesJoin(e *corralv1.Error) bool {
	switch e.GetFrame() {
	case "join":
		return true
	case "":
		c := e.GetCode()
		return c != corralv1.Code_CODE_NOT_JOINED && c != corralv1.Code_CODE_TOO_LARGE
	}
	return false
}

// fail ends the Session with err.
func (s *Session) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = fmt.Errorf("client: session ended: %w", err)
	}
	s.mu.Unlock()
}

// finish runs when the supervisor exits: it wakes every waiter, waits for
// the readers and closes Events.
func (s *Session) finish() {
	s.mu.Lock()
	if s.err == nil {
		s.err = ErrClosed
	}
	s.conn, s.live = nil, false
	s.broadcastLocked()
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	close(s.events)
	close(s.done)
}
