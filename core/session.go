package core

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-rt/corral/core/pubrate"
	croom "github.com/corral-rt/corral/core/room"
	"github.com/corral-rt/corral/roomclass"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/safetext"
)

// A session as the core holds it while a connection is attached; how it
// attaches, resumes, joins and detaches is in resume.go.

// session is a session attached to a connection.
type session struct {
	id   string
	user string
	// ident is what the connection's token says: set at attach, replaced
	// by a refresh (see refresh.go).
	ident atomic.Pointer[corralv1.Identity]
	// work is the connection's queue, where the internal API's work on
	// the session runs in order with the client's frames (control.go);
	// set at the attach, never changed.
	work *connWork
	// info is the connection's default member info (the Connect hook's
	// ConnectResponse.info, on the Attach): set at the attach, never
	// changed. See memberInfo.
	info []byte
	// protocol is the subprotocol the client speaks and attached when
	// this connection attached, for RoomService.Connections: set at the
	// attach, never changed.
	protocol string
	attached time.Time

	// handling is the client frame the connection's work is handling
	// (nil: none): an Error sent meanwhile refuses it, and names its kind
	// (Error.frame), so the edge settles the request it answers and no
	// other of the same room (edge/answers.go). The connection's frames
	// are handled one at a time (connWork), so while it is set every
	// refusal sent to the session is this frame's.
	handling atomic.Pointer[corralv1.ClientFrame]

	mu    sync.Mutex // guards the following fields
	ep    endpoint
	rooms map[string]*room
	gone  bool // detached or taken over
	// pres holds the rooms where this session is counted in presence.
	pres map[string]bool
	// joinInfo is the member info the Join hook gave for a joined room
	// (JoinResult.info), by room name: set when the hook admits the room
	// (again at each resume), removed when the session leaves it.
	joinInfo map[string][]byte
	// paging holds the joins whose replay page the edge has not taken
	// yet, by room name (replay.go replayTaken).
	paging map[string]*joinReq
}

// dropRoom takes room name out of s's rooms and member info, and returns
// the room s was in, nil when it was in none of that name.
func (s *session) dropRoom(name string) *room {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rooms[name]
	delete(s.rooms, name)
	delete(s.joinInfo, name)
	delete(s.paging, name)
	return r
}

// memberInfo returns s's member info in room: the Join hook's, else the
// Connect hook's, else nil. Safe for concurrent use.
func (s *session) memberInfo(room string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.joinInfo[room]; ok {
		return b
	}
	return s.info
}

// setJoinInfo records the Join hook's info for room (nil: none, the
// Connect info applies). Lock must be held.
func (s *session) setJoinInfoLocked(room string, info []byte) {
	if len(info) == 0 {
		delete(s.joinInfo, room)
		return
	}
	if s.joinInfo == nil {
		s.joinInfo = make(map[string][]byte)
	}
	s.joinInfo[room] = info
}

// maxPublishBudgets bounds the publish budgets a core holds (pubRates):
// the (user, room) pairs that published within burst / rate, a few
// seconds by default.
const maxPublishBudgets = 1 << 17

// takePublish takes a token of the bucket in budgets of s's user in
// room, of class cl, at now; when there is none it reports false and how
// long until one. A session without a user (insecure dev tokens may name
// none) has its own. Safe for concurrent use.
func (s *session) takePublish(budgets *pubrate.Table, cl *roomclass.Class, room string, now time.Time) (time.Duration, bool) {
	who := s.user
	if who == "" {
		who = "\x00" + s.id
	}
	return budgets.Take(who, room, cl.PublishRate, cl.PublishBurst, now)
}

// takeAppend takes a token of the user's append budget in room (its
// class's growing.append-rate, per user and room like takePublish, so a
// reconnect starts no fresh burst); when there is none it reports false
// and how long until one.
func (s *session) takeAppend(budgets *pubrate.Table, cl *roomclass.Class, room string, now time.Time) (time.Duration, bool) {
	if cl.Growing.AppendRate < 0 {
		return 0, true
	}
	who := s.user
	if who == "" {
		who = "\x00" + s.id
	}
	return budgets.Take(who, appendKey(room), cl.Growing.AppendRate, cl.Growing.AppendBurst, now)
}

func (s *session) endpoint() (endpoint, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ep, !s.gone
}

// Gone reports whether the session was detached or taken over
// (croom.Member).
func (s *session) Gone() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gone
}

func (s *session) sendTo(f *corralv1.ServerFrame) {
	if ep, ok := s.endpoint(); ok {
		ep.Link.Send(ep.Conn, f)
	}
}

// SendErr reports a refusal to the client (door.Client).
func (s *session) SendErr(code corralv1.Code, msg, room, ref string) {
	s.sendErr(&corralv1.Error{Code: code, Message: safetext.Reason(msg), Room: room, Ref: ref})
}

// SendRetry reports a refusal of the retry class with when to retry.
func (s *session) SendRetry(code corralv1.Code, msg, room, ref string, after time.Duration) {
	s.sendErr(&corralv1.Error{
		Code: code, Message: safetext.Reason(msg), Room: room, Ref: ref,
		RetryAfterMs: uint32(min(max(after.Milliseconds(), 0), 1<<31)),
	})
}

// sendErr sends e, naming the kind of the frame being handled, if any.
func (s *session) sendErr(e *corralv1.Error) {
	e.Frame = frameName(s.handling.Load())
	s.sendTo(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Error{Error: e}})
}

// refreshFrame stands for a client's Refresh while the core handles it
// (the edge passes its token as a linkv1.EdgeFrame_Refresh): a refusal
// names "refresh".
var refreshFrame = &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Refresh{Refresh: &corralv1.Refresh{}}}

// clientKind is ClientFrame's oneof of frame kinds.
var clientKind = (&corralv1.ClientFrame{}).ProtoReflect().Descriptor().Oneofs().ByName("kind")

// frameName is the JSON name of f's kind ("join", "presenceQuery"), as
// Error.frame names it; "" for nil or a frame of no known kind.
func frameName(f *corralv1.ClientFrame) string {
	if f == nil {
		return ""
	}
	fd := f.ProtoReflect().WhichOneof(clientKind)
	if fd == nil {
		return ""
	}
	return fd.JSONName()
}

func (s *session) room(name string) *room {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rooms[name]
}

// endpoint is where a member's frames go: a connection on a link.
type endpoint = croom.Endpoint

// UserID and SessionID are the session's user and id, for the event log
// (core/eventlog.Member).
func (s *session) UserID() string               { return s.user }
func (s *session) SessionID() string            { return s.id }
func (s *session) Identity() *corralv1.Identity { return s.ident.Load() }
