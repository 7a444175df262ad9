package edge

import (
	"time"

	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// reattachLocked resumes every orphan's session on the re-opened link with
// a Reattach (link.proto): the session's id and latest token and each
// room's position, all as the core last stated them (ConnSession,
// ConnPosition, ConnReplay, RoomLive), and its keyed-state position as
// the state frames passing through stated it (connRoom.state), so that
// the core sends the changes missed rather than a snapshot. The core resumes it as it would the
// client's own Resume and replays what was missed; the client sees no
// disconnect, only a second Welcome with the rotated resume token. Lock
// must be held.
func (l *link) reattachLocked() {
	for id, c := range l.orphans {
		r := &linkv1.Reattach{
			SessionId:   c.session,
			ResumeToken: c.token,
			Identity:    c.attach.GetIdentity(),
			Client:      c.attach.GetHello().GetClient(),
			RemoteAddr:  c.attach.GetRemoteAddr(),
			Protocol:    c.attach.GetProtocol(),
			Info:        c.attach.GetInfo(),
		}
		for _, room := range c.rooms {
			if room.tracked {
				r.Rooms = append(r.Rooms, &corralv1.RoomPosition{Room: room.name, Seq: room.seq, Epoch: room.epoch, Presence: room.presence,
					StatePosition: room.state.pos, StateEpoch: room.state.epoch})
			}
		}
		if !l.enqueueLocked(&linkv1.EdgeFrame{Conn: id, Kind: &linkv1.EdgeFrame_Reattach{Reattach: r}}) {
			continue // the next failure or giveUpOrphans handles it
		}
		l.conns[id] = c
		delete(l.orphans, id)
		l.e.metrics.reattached.Inc()
	}
	l.orphanedAt = time.Time{}
}
