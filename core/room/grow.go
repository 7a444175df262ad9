package room

import (
	"github.com/corral-rt/corral/delta"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
)

// A growing message's chunks reach the members through the room's order
// like any message (fanoutLocked); for a class with growing.delta, a
// replace chunk goes to them as a delta against the body they hold, which
// the room's GrowView keeps. The rest of growing messages (the appends,
// the joiners' prefixes) is the core's (core/grow.go).

// GrowView is a room's open growing messages as it fanned them out, for
// the deltas of replace chunks (growing.delta): the body of each at the
// version every member holds. Guarded by its room's lock.
type GrowView[M Member] struct {
	room  *Room[M]
	epoch string
	msgs  map[string]*grownBody
	// lastChunk is the seq of the newest chunk the room fanned out;
	// none* the last Open read that found no open message (at noneAt in
	// noneEpoch). While no chunk came after it, no message is open and a
	// join needs no read of its own: a room without growing messages
	// costs one read per epoch, not one per join.
	lastChunk uint64
	noneKnown bool
	noneAt    uint64
	noneEpoch string
}

// NoneOpen reports whether the room is known to have no open growing
// message at its position.
func (v *GrowView[M]) NoneOpen() bool {
	v.room.mu.Lock()
	defer v.room.mu.Unlock()
	return v.noneKnown && v.noneEpoch == v.room.epoch && v.lastChunk <= v.noneAt
}

// SawNone records an Open read that found no open message at st.
func (v *GrowView[M]) SawNone(st history.State) {
	v.room.mu.Lock()
	defer v.room.mu.Unlock()
	v.noneKnown, v.noneAt, v.noneEpoch = true, st.Last, st.Epoch
}

// grownBody is one open message's body at version.
type grownBody struct {
	mseq, version uint64
	body          []byte
}

// maxGrowView bounds the open messages a room's growView keeps.
const maxGrowView = history.MaxOpen

// liveLocked returns the chunk msg as members get it live: with a delta
// instead of data for a replace whose delta against the body members
// hold is smaller (in a class with growing.delta); and moves the view
// past it. msg itself is not changed (history and joiners keep its data).
// Lock must be held; called in seq order (fanoutLocked).
func (v *GrowView[M]) liveLocked(msg *corralv1.Message) *corralv1.Message {
	c := msg.GetChunk()
	if c == nil {
		return msg
	}
	r := v.room
	v.lastChunk = max(v.lastChunk, msg.GetSeq())
	if !r.opts.Classes.Lookup(r.name).Growing.Delta {
		v.msgs = nil
		return msg
	}
	if v.epoch != r.epoch {
		v.epoch, v.msgs = r.epoch, nil
	}
	b := v.msgs[msg.GetId()]
	if b != nil && b.mseq != c.GetMessageSeq() {
		b = nil
	}
	out := msg
	if c.GetReplace() && b != nil && c.GetVersion() == b.version+1 {
		if d, ok := delta.Choose(b.body, c.GetData()); ok {
			out = &corralv1.Message{Room: msg.GetRoom(), Seq: msg.GetSeq(), Sender: msg.GetSender(),
				TimeMs: msg.GetTimeMs(), Id: msg.GetId(), SenderInfo: msg.GetSenderInfo(),
				Chunk: &corralv1.MessageChunk{MessageSeq: c.GetMessageSeq(), Version: c.GetVersion(),
					Replace: true, Final: c.GetFinal(), Delta: d}}
		}
	}
	switch {
	case c.GetFinal():
		delete(v.msgs, msg.GetId())
	case c.GetReplace():
		v.setLocked(msg.GetId(), c.GetMessageSeq(), c.GetVersion(), append([]byte(nil), c.GetData()...))
	case b != nil && c.GetVersion() == b.version+1:
		b.body = append(b.body, c.GetData()...)
		b.version = c.GetVersion()
	case c.GetVersion() == 1:
		v.setLocked(msg.GetId(), c.GetMessageSeq(), 1, append([]byte(nil), c.GetData()...))
	default:
		delete(v.msgs, msg.GetId()) // a body the room never saw whole
	}
	return out
}

// LearnLocked takes the body of a prefix the room sent a joiner (the
// message at the room's position) when the view lacks it. Lock must be
// held.
func (v *GrowView[M]) LearnLocked(id string, p *corralv1.Message) {
	r := v.room
	if !r.opts.Classes.Lookup(r.name).Growing.Delta {
		return
	}
	if v.epoch != r.epoch {
		v.epoch, v.msgs = r.epoch, nil
	}
	c := p.GetChunk()
	if b := v.msgs[id]; b != nil && b.mseq == c.GetMessageSeq() && b.version == c.GetVersion() {
		return
	}
	v.setLocked(id, c.GetMessageSeq(), c.GetVersion(), append([]byte(nil), c.GetData()...))
}

func (v *GrowView[M]) setLocked(id string, mseq, version uint64, body []byte) {
	if v.msgs == nil {
		v.msgs = make(map[string]*grownBody)
	}
	if _, ok := v.msgs[id]; !ok && len(v.msgs) >= maxGrowView {
		return
	}
	v.msgs[id] = &grownBody{mseq: mseq, version: version, body: body}
}
