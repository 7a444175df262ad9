package core

import (
	"slices"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// A connection as the internal API describes it (RoomService.Connections,
// apiCore.Connections): its edge, rooms and the frames waiting in its
// work queue.

// maxListedRooms bounds the rooms listed per connection: a connection
// may be in more (--max-rooms-per-conn), the page stays bounded.
const maxListedRooms = 1000

// describe returns what Connections lists of s; false once s is gone.
func (s *session) describe() (*corralv1.ConnectionInfo, bool) {
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
		info.Queued = uint32(s.work.depth())
	}
	return info, true
}

// depth is how many frames and tasks wait in w's queue.
func (w *connWork) depth() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue)
}
