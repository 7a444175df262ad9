package session

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-rt/corral/core/pubrate"
	croom "github.com/corral-rt/corral/core/room"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/safetext"
	"github.com/corral-rt/corral/roomclass"
)

// Room is one room's live state with sessions as its members.
type Room = croom.Room[*Session]

// Endpoint is where a member's frames go: a connection on a link.
type Endpoint = croom.Endpoint

// Session is a session attached to a connection. Its methods are safe
// for concurrent use; none blocks.
type Session struct {
	id   string
	user string
	// ident is what the connection's token says: set at attach, replaced
	// by a refresh (SetIdentity).
	ident atomic.Pointer[corralv1.Identity]
	// work is the connection's queue, where the internal API's work on
	// the session runs in order with the client's frames; set by New,
	// never changed (nil in tests that drive a core without one).
	work *Work
	// info is the connection's default member info (the Connect hook's
	// ConnectResponse.info, on the Attach): set by New, never changed.
	// See MemberInfo.
	info []byte
	// protocol is the subprotocol the client speaks and attached when
	// this connection attached, for RoomService.Connections: set by New,
	// never changed.
	protocol string
	attached time.Time

	// handling is the client frame the connection's work is handling
	// (nil: none): an Error sent meanwhile refuses it, and names its kind
	// (Error.frame), so the edge settles the request it answers and no
	// other of the same room (edge/answers.go). The connection's frames
	// are handled one at a time (Work), so while it is set every refusal
	// sent to the session is this frame's.
	handling atomic.Pointer[corralv1.ClientFrame]

	mu    sync.Mutex // guards the following fields
	ep    Endpoint
	rooms map[string]*Room
	gone  bool // detached or taken over
	// pres holds the rooms where this session is counted in presence.
	pres map[string]bool
	// joinInfo is the member info the Join hook gave for a joined room
	// (JoinResult.info), by room name: set when the hook admits the room
	// (again at each resume), removed when the session leaves it.
	joinInfo map[string][]byte
	// paging holds the joins whose replay page the edge has not taken
	// yet, by room name (WaitPage, TakePage).
	paging map[string]*JoinReq
}

// New returns the session id of user attached at ep with the token's
// identity, its queue w, the Connect hook's member info and the
// client's subprotocol.
func New(id, user string, ep Endpoint, w *Work, ident *corralv1.Identity, info []byte, protocol string) *Session {
	s := &Session{id: id, user: user, ep: ep, work: w, rooms: make(map[string]*Room), info: info,
		protocol: protocol, attached: time.Now()}
	s.ident.Store(ident)
	return s
}

// UserID and SessionID are the session's user and id (for the event log,
// core/eventlog.Member, and the session table, core/sessiontable).
func (s *Session) UserID() string    { return s.user }
func (s *Session) SessionID() string { return s.id }

// Identity is what the connection's latest token says.
func (s *Session) Identity() *corralv1.Identity { return s.ident.Load() }

// SetIdentity replaces the identity with a refreshed token's.
func (s *Session) SetIdentity(id *corralv1.Identity) { s.ident.Store(id) }

// Work is the connection's queue (nil when the session was made without
// one).
func (s *Session) Work() *Work { return s.work }

// Gone reports whether the session was detached or taken over
// (croom.Member).
func (s *Session) Gone() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gone
}

// Endpoint returns where s's frames go, and false once s is gone.
func (s *Session) Endpoint() (Endpoint, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ep, !s.gone
}

// Room returns the room of that name s is in, nil when none.
func (s *Session) Room(name string) *Room {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rooms[name]
}

// RoomNames returns the names of the rooms s is in, in no order.
func (s *Session) RoomNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.rooms))
	for name := range s.rooms {
		names = append(names, name)
	}
	return names
}

// AddRoom puts r in s's rooms as name; it reports false, adding nothing,
// when s is gone.
func (s *Session) AddRoom(name string, r *Room) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone {
		return false
	}
	s.rooms[name] = r
	return true
}

// DropRoom takes room name out of s's rooms and member info, and returns
// the room s was in, nil when it was in none of that name.
func (s *Session) DropRoom(name string) *Room {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rooms[name]
	delete(s.rooms, name)
	delete(s.joinInfo, name)
	delete(s.paging, name)
	return r
}

// DropRoomIf takes room name out of s's rooms if s is in r there.
func (s *Session) DropRoomIf(name string, r *Room) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rooms[name] == r {
		delete(s.rooms, name)
	}
}

// End marks s gone and returns its endpoint and the rooms it was in, which
// the caller leaves; with only, it does so only while s is attached at
// *only, else it reports false.
func (s *Session) End(only *Endpoint) (Endpoint, map[string]*Room, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if only != nil && (s.gone || s.ep != *only) {
		return Endpoint{}, nil, false
	}
	s.gone = true
	rooms := s.rooms
	s.rooms = nil
	return s.ep, rooms, true
}

// MemberInfo returns s's member info in room: the Join hook's, else the
// Connect hook's, else nil.
func (s *Session) MemberInfo(room string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.memberInfoLocked(room)
}

// memberInfoLocked is MemberInfo. Lock must be held.
func (s *Session) memberInfoLocked(room string) []byte {
	if b, ok := s.joinInfo[room]; ok {
		return b
	}
	return s.info
}

// SetJoinInfo records the Join hook's info for room (nil: none, the
// Connect info applies).
func (s *Session) SetJoinInfo(room string, info []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(info) == 0 {
		delete(s.joinInfo, room)
		return
	}
	if s.joinInfo == nil {
		s.joinInfo = make(map[string][]byte)
	}
	s.joinInfo[room] = info
}

// Count notes that s is counted in room's presence, unless s is gone; it
// returns whether s was counted there already and whether s is gone.
func (s *Session) Count(room string) (counted, gone bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	counted = s.pres[room]
	if s.gone {
		return counted, true
	}
	if s.pres == nil {
		s.pres = make(map[string]bool)
	}
	s.pres[room] = true
	return counted, false
}

// Uncount notes that s is no longer counted in room's presence, and
// returns whether it was.
func (s *Session) Uncount(room string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	counted := s.pres[room]
	delete(s.pres, room)
	return counted
}

// Counted reports whether s is counted in room's presence.
func (s *Session) Counted(room string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pres[room]
}

// CountedRooms returns the rooms s is counted in for presence, in no
// order, and with infos s's member info in each of them.
func (s *Session) CountedRooms(infos bool) ([]string, [][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rooms := make([]string, 0, len(s.pres))
	var info [][]byte
	if infos {
		info = make([][]byte, 0, len(s.pres))
	}
	for room := range s.pres {
		rooms = append(rooms, room)
		if infos {
			info = append(info, s.memberInfoLocked(room))
		}
	}
	return rooms, info
}

// WaitPage notes that q waits for the edge to take its page of a paged
// replay (TakePage). A join of the same room that comes later replaces
// it. s's lock is taken inside the room's (croom.JoinHooks.WaitPage).
func (s *Session) WaitPage(q *JoinReq) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone {
		return
	}
	if s.paging == nil {
		s.paging = make(map[string]*JoinReq)
	}
	s.paging[q.Name] = q
}

// TakePage returns the join of room waiting for the edge to take its
// replay page, and forgets it; nil when none waits.
func (s *Session) TakePage(room string) *JoinReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.paging[room]
	delete(s.paging, room)
	return q
}

// TakePublish takes a token of the bucket in budgets of s's user in
// room, of class cl, at now; when there is none it reports false and how
// long until one. A session without a user (insecure dev tokens may name
// none) has its own.
func (s *Session) TakePublish(budgets *pubrate.Table, cl *roomclass.Class, room string, now time.Time) (time.Duration, bool) {
	return budgets.Take(s.budgetOwner(), room, cl.PublishRate, cl.PublishBurst, now)
}

// TakeAppend takes a token of the user's append budget in room under key
// (its class's growing.append-rate, per user and room like TakePublish,
// so a reconnect starts no fresh burst); when there is none it reports
// false and how long until one.
func (s *Session) TakeAppend(budgets *pubrate.Table, cl *roomclass.Class, key string, now time.Time) (time.Duration, bool) {
	if cl.Growing.AppendRate < 0 {
		return 0, true
	}
	return budgets.Take(s.budgetOwner(), key, cl.Growing.AppendRate, cl.Growing.AppendBurst, now)
}

// budgetOwner is whose publish budgets s takes from: its user, or for a
// session without one, itself.
func (s *Session) budgetOwner() string {
	if s.user == "" {
		return "\x00" + s.id
	}
	return s.user
}

// SendTo queues f for s's client, unless s is gone.
func (s *Session) SendTo(f *corralv1.ServerFrame) {
	if ep, ok := s.Endpoint(); ok {
		ep.Link.Send(ep.Conn, f)
	}
}

// SendErr reports a refusal to the client (door.Client).
func (s *Session) SendErr(code corralv1.Code, msg, room, ref string) {
	s.sendErr(&corralv1.Error{Code: code, Message: safetext.Reason(msg), Room: room, Ref: ref})
}

// SendRetry reports a refusal of the retry class with when to retry.
func (s *Session) SendRetry(code corralv1.Code, msg, room, ref string, after time.Duration) {
	s.sendErr(&corralv1.Error{
		Code: code, Message: safetext.Reason(msg), Room: room, Ref: ref,
		RetryAfterMs: uint32(min(max(after.Milliseconds(), 0), 1<<31)),
	})
}

// sendErr sends e, naming the kind of the frame being handled, if any.
func (s *Session) sendErr(e *corralv1.Error) {
	e.Frame = frameName(s.handling.Load())
	s.SendTo(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Error{Error: e}})
}

// maxListedRooms bounds the rooms listed per connection: a connection
// may be in more (--max-rooms-per-conn), the page stays bounded.
const maxListedRooms = 1000

// Describe returns what RoomService.Connections lists of s: its edge,
// rooms and the frames waiting in its work queue; false once s is gone.
func (s *Session) Describe() (*corralv1.ConnectionInfo, bool) {
	s.mu.Lock()
	if s.gone {
		s.mu.Unlock()
		return nil, false
	}
	info := &corralv1.ConnectionInfo{SessionId: s.id, UserId: s.user, Protocol: s.protocol, AttachedMs: s.attached.UnixMilli()}
	if s.ep.Link != nil {
		info.EdgeId = s.ep.Link.Edge()
	}
	for name := range s.rooms {
		info.Rooms = append(info.Rooms, name)
	}
	s.mu.Unlock()
	slices.Sort(info.Rooms)
	if len(info.Rooms) > maxListedRooms {
		info.Rooms = info.Rooms[:maxListedRooms]
	}
	if s.work != nil {
		info.Queued = uint32(s.work.Depth())
	}
	return info, true
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
