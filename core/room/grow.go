package room

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/corral-rt/corral/core/frame"
	"github.com/corral-rt/corral/delta"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
)

// A growing message's chunks reach the members through the room's order
// like any message (fanoutLocked); for a class with growing.delta, a
// replace chunk goes to them as a delta against the body they hold, which
// the room's GrowView keeps. The GrowView also gives a joiner the
// prefixes (docs/MESSAGES.md): a member that joins live (without a
// position, or reset) gets each growing message still open at its joined
// seq as one chunk with replace set at the seq of the last chunk it
// covers, then the later chunks live. The store's open messages are read
// after the join began (ReadOpen: history.Grower.Open, the assembled
// bodies and the room's state in one step), the room is waited for until
// it delivered the chunks they cover, and GoLive folds in the chunks
// delivered since the join began (the join's catch-up) under the room's
// lock: the prefix covers exactly the chunks up to the joined seq, and
// live traffic brings the rest, each version once. The appends (checks,
// the store's Grow, then Stored) are the core's (core/grow.go).

// GrowView is a room's open growing messages: as it fanned them out, for
// the deltas of replace chunks (growing.delta), the body of each at the
// version every member holds; and for its joiners, their prefixes. Its
// fields are guarded by its room's lock.
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

// prefixWait bounds how long a join waits for its room to deliver the
// chunks the store's open messages cover (normally the time pub/sub
// takes to bring them, or two appends finishing out of order).
const prefixWait = 2 * time.Second

// ReadOpen reads, for a join that will go live without a replay (or
// from a position inside a message), the room's open growing messages
// into q.Open (its prefixes, sent by GoLive), and waits until the room
// delivered the chunks they cover. Called after BeginJoin and the
// join's history read; it takes the room's lock, never holds it across
// the read.
func (v *GrowView[M]) ReadOpen(ctx context.Context, q *Join) {
	r := v.room
	gr, ok := r.opts.History.(history.Grower)
	if !ok {
		return
	}
	if q.Position && q.Since == q.Target && q.Epoch == q.RoomEpoch && !q.OpenPrefix {
		return // nothing missed: it holds what it saw
	}
	if q.Position && q.Replay && q.ReadOK && q.Resumed && !q.OpenPrefix {
		return // a resume holds what came before its position
	}
	if v.noneOpen() {
		return
	}
	done := r.opts.Metrics.StoreOp("open")
	open, st, err := gr.Open(ctx, r.name)
	done(err)
	if err != nil {
		r.opts.Logger.Warn("growing messages: open read failed; the join gets no prefixes", "room", r.name, "err", err)
		return
	}
	q.Open, q.OpenEpoch = open, st.Epoch
	if len(open) == 0 {
		v.sawNone(st)
	}
	var upTo uint64
	for _, m := range open {
		upTo = max(upTo, m.GetSeq())
	}
	r.WaitDelivered(ctx, upTo, st.Epoch, prefixWait)
}

// noneOpen reports whether the room is known to have no open growing
// message at its position.
func (v *GrowView[M]) noneOpen() bool {
	v.room.mu.Lock()
	defer v.room.mu.Unlock()
	return v.noneKnown && v.noneEpoch == v.room.epoch && v.lastChunk <= v.noneAt
}

// sawNone records an Open read that found no open message at st.
func (v *GrowView[M]) sawNone(st history.State) {
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

// learnLocked takes the body of a prefix the room sent a joiner (the
// message at the room's position) when the view lacks it. Lock must be
// held.
func (v *GrowView[M]) learnLocked(id string, p *corralv1.Message) {
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

// sendPrefixesLocked sends a member that joined live at the room's last
// seq the growing messages open there, each as one replace chunk at the
// seq of its last chunk: the store's open messages (q.Open) with the
// chunks delivered since the join began (cu) folded in. Lock must be
// held; called by GoLive before the member receives live traffic.
func (v *GrowView[M]) sendPrefixesLocked(ep Endpoint, q *Join, cu *Catchup) {
	if len(q.Open) == 0 && (cu == nil || len(cu.buf) == 0) {
		return
	}
	last, epoch := v.room.last, v.room.epoch
	byID := make(map[string]*corralv1.Message)
	if q.OpenEpoch == epoch {
		for _, m := range q.Open {
			if m.GetSeq() <= last {
				byID[m.GetId()] = m
			}
		}
	}
	if cu != nil && !cu.overflow {
		for _, m := range cu.buf {
			if m.GetChunk() != nil && m.GetSeq() <= last {
				byID[m.GetId()] = fold(byID[m.GetId()], m)
			}
		}
	}
	out := make([]*corralv1.Message, 0, len(byID))
	for id, m := range byID {
		if m == nil || m.GetChunk().GetFinal() {
			continue
		}
		out = append(out, m)
		v.learnLocked(id, m)
	}
	slices.SortFunc(out, func(a, b *corralv1.Message) int { return cmp.Compare(a.GetSeq(), b.GetSeq()) })
	for _, m := range out {
		ep.Link.Enqueue(frame.Conn(ep.Conn, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Message{Message: m}}))
	}
}

// replayPrefixesLocked takes out of a join's replay (out, in seq order)
// the chunks of the messages open when the join began that started at
// or before its position: a join (not a resume) from a position holds
// nothing of them. It returns the replay without them and, for each,
// the message as one replace chunk at the seq of its last chunk up to
// the room's last seq (final if it ended meanwhile), to send after the
// replay. Lock must be held; called by GoLive.
func (v *GrowView[M]) replayPrefixesLocked(q *Join, cu *Catchup, out []*corralv1.Message) (rest, prefixes []*corralv1.Message) {
	last, epoch := v.room.last, v.room.epoch
	if (q.Resumed && !q.OpenPrefix) || len(q.Open) == 0 || q.OpenEpoch != epoch || cu.overflow {
		return out, nil
	}
	byID := make(map[string]*corralv1.Message)
	for _, m := range q.Open {
		if m.GetChunk().GetMessageSeq() <= q.Since && m.GetSeq() <= last {
			byID[m.GetId()] = m
		}
	}
	if len(byID) == 0 {
		return out, nil
	}
	for _, m := range cu.buf {
		if p, ok := byID[m.GetId()]; ok && p != nil && m.GetChunk() != nil && m.GetSeq() <= last {
			byID[m.GetId()] = fold(p, m)
		}
	}
	kept := out[:0:0]
	for _, m := range out {
		if p, ok := byID[m.GetId()]; ok && p != nil && m.GetChunk().GetMessageSeq() == p.GetChunk().GetMessageSeq() {
			continue
		}
		kept = append(kept, m)
	}
	prefixes = make([]*corralv1.Message, 0, len(byID))
	for _, p := range byID {
		if p != nil {
			prefixes = append(prefixes, p)
		}
	}
	slices.SortFunc(prefixes, func(a, b *corralv1.Message) int { return cmp.Compare(a.GetSeq(), b.GetSeq()) })
	return kept, prefixes
}

// fold applies chunk m to p, a prefix (a replace chunk with the whole
// body), and returns the prefix after it: a new message, p is not
// changed. A chunk p already covers leaves it; a chunk that does not
// follow it (a gap) drops it (nil).
func fold(p, m *corralv1.Message) *corralv1.Message {
	c := m.GetChunk()
	if p != nil && p.GetChunk().GetMessageSeq() != c.GetMessageSeq() {
		p = nil // another message under the same id (a new epoch)
	}
	if p != nil && (m.GetSeq() <= p.GetSeq() || c.GetVersion() <= p.GetChunk().GetVersion()) {
		return p
	}
	var body []byte
	switch {
	case c.GetReplace():
		body = c.GetData()
	case p != nil && c.GetVersion() == p.GetChunk().GetVersion()+1:
		body = append(append(make([]byte, 0, len(p.GetChunk().GetData())+len(c.GetData())), p.GetChunk().GetData()...), c.GetData()...)
	case p == nil && c.GetVersion() == 1:
		body = c.GetData()
	default:
		return nil
	}
	return &corralv1.Message{Room: m.GetRoom(), Seq: m.GetSeq(), Sender: m.GetSender(), TimeMs: m.GetTimeMs(),
		Id: m.GetId(), SenderInfo: m.GetSenderInfo(),
		Chunk: &corralv1.MessageChunk{MessageSeq: c.GetMessageSeq(), Version: c.GetVersion(), Data: body,
			Replace: true, Final: c.GetFinal()}}
}
