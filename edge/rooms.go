package edge

import corralv1 "github.com/corral-rt/corral/gen/corral/v1"

// connRoom is what the edge keeps of one room of a connection: whether it
// is a local member, and for a reattach (link.reattachLocked) its position
// and whether it receives presence. A connection is in a few rooms, so a
// slice searched in order costs less than a map per field (a map holds a
// group of 8 slots from its first key: ~0.7 KiB per connection for three
// of them). Guarded by link.mu, like conn.rooms.
type connRoom struct {
	name  string
	epoch string // the room's epoch as last told, until a leave
	// seq is at least the position the connection is at, when tracked.
	seq      uint64
	tracked  bool // seq is known: a reattach resumes the room
	member   bool // in link.rooms
	presence bool // in link.presence
	// state is the room's keyed-state position the connection holds, as
	// its own frames (a snapshot, a resume's changes) stated it; a
	// reattach sends the newer of it and the link's (link.roomState).
	state stateMark
}

// stateMark is a keyed-state position (epoch, position) seen on a link,
// stamped in the link's order (link.stateStamp): of two marks of one
// connection's room, the later stamp is where the connection is, since
// the core sends a room's state frames on a link in position order.
type stateMark struct {
	epoch string
	pos   uint64
	stamp uint64 // 0: none
}

// newer keeps m when it is later than the mark held.
func (s *stateMark) newer(m stateMark) {
	if m.stamp > s.stamp {
		*s = m
	}
}

// stateMarkOf reads the state position a frame states (a StateSnapshot,
// a StateChange), stamped now. Lock must be held.
func (l *link) stateMarkOf(f *corralv1.ServerFrame) (stateMark, bool) {
	var epoch string
	var pos uint64
	switch {
	case f.GetStateChange() != nil:
		epoch, pos = f.GetStateChange().GetEpoch(), f.GetStateChange().GetPosition()
	case f.GetStateSnapshot() != nil:
		epoch, pos = f.GetStateSnapshot().GetEpoch(), f.GetStateSnapshot().GetPosition()
	default:
		return stateMark{}, false
	}
	l.stateStamp++
	return stateMark{epoch: epoch, pos: pos, stamp: l.stateStamp}, true
}

// position records a position the core stated (link.proto ConnPosition,
// ConnReplay): the room's seq and epoch.
func (r *connRoom) position(seq uint64, epoch string) {
	r.seq, r.epoch, r.tracked = seq, epoch, true
}

// track records that the connection is at seq at least.
func (r *connRoom) track(seq uint64) {
	if !r.tracked {
		r.seq, r.tracked = 0, true
	}
	r.seq = max(r.seq, seq)
}

// roomLocked returns c's record of room, added if new. The pointer is
// valid until the next change to c.rooms. link.mu must be held.
func (c *conn) roomLocked(room string) *connRoom {
	for i := range c.rooms {
		if c.rooms[i].name == room {
			return &c.rooms[i]
		}
	}
	c.rooms = append(c.rooms, connRoom{name: room})
	return &c.rooms[len(c.rooms)-1]
}

// updateRoomLocked applies f to c's record of room, if any, and forgets
// the record once it holds nothing. link.mu must be held.
func (c *conn) updateRoomLocked(room string, f func(*connRoom)) {
	for i := range c.rooms {
		r := &c.rooms[i]
		if r.name != room {
			continue
		}
		f(r)
		if !r.tracked && !r.member && !r.presence && r.epoch == "" && r.state.stamp == 0 {
			last := len(c.rooms) - 1
			c.rooms[i] = c.rooms[last]
			c.rooms[last] = connRoom{}
			c.rooms = c.rooms[:last]
		}
		return
	}
}
