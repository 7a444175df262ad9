package room

import (
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"google.golang.org/protobuf/proto"
)

// maxPresenceFrameBytes bounds one presence frame (a tick's diff or a
// snapshot), as maxSignalTickBytes bounds a tick's signals: unbounded,
// 1,000 members with 1 KB of state each made a 1 MB snapshot, larger than
// what a member's send queue kept for a tick of signals and presence
// (config.Edge.SenderBurstBytes), and 200 of them were closed 4001. What
// exceeds it goes as several frames, in order (splitPresence).
const maxPresenceFrameBytes = 256 << 10

// splitPresence cuts p into frames of at most maxBytes of members each (one
// member larger than that alone), in order: joins, then updates, then
// leaves. Each carries the room's counts. A snapshot's first frame is the
// snapshot (it replaces the client's list); the rest are diffs whose joins
// add the remaining members, so a client applying them in order holds the
// whole list, as one frame would have given it. p itself when it fits.
func splitPresence(p *corralv1.Presence, maxBytes int) []*corralv1.Presence {
	if p.GetCountsOnly() || proto.Size(p) <= maxBytes {
		return []*corralv1.Presence{p}
	}
	var out []*corralv1.Presence
	cur := &corralv1.Presence{Room: p.Room, Snapshot: p.Snapshot}
	size, items := 0, 0
	cut := func(n int) {
		if items > 0 && size+n > maxBytes {
			cur.Members, cur.Connections = p.Members, p.Connections
			out = append(out, cur)
			cur = &corralv1.Presence{Room: p.Room}
			size, items = 0, 0
		}
		size += n
		items++
	}
	for _, m := range p.Joins {
		cut(proto.Size(m) + 4) // the field's tag and length
		cur.Joins = append(cur.Joins, m)
	}
	for _, m := range p.Updates {
		cut(proto.Size(m) + 4)
		cur.Updates = append(cur.Updates, m)
	}
	for _, u := range p.Leaves {
		cut(len(u) + 4)
		cur.Leaves = append(cur.Leaves, u)
	}
	cur.Members, cur.Connections = p.Members, p.Connections
	return append(out, cur)
}
