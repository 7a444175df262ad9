package core

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/corral-rt/corral/core/frame"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/internal/safetext"
	"github.com/corral-rt/corral/roomclass"
)

// Growing messages (docs/MESSAGES.md): a client's Append frame and the
// internal API's Append stream grow a message chunk by chunk; each chunk
// goes through the room's ordered path as a publish does (the store
// takes the room's next seq, the room hands it to members in seq order
// and fans it out once per link), so chunks interleave with the room's
// other messages in one order. What is the grower's own:
//
//   - the prefixes: a member that joins live (without a position, or
//     reset) gets each growing message still open at its joined seq as
//     one chunk with replace set at the seq of the last chunk it covers,
//     then the later chunks live. The store's open messages are read
//     after the join began (history.Grower.Open: the assembled bodies and
//     the room's state in one step), the room is waited for until it
//     delivered the chunks they cover, and the chunks delivered since
//     the join began (the join's catch-up buffer) are folded in under the
//     room's lock: the prefix covers exactly the chunks up to the joined
//     seq, and live traffic brings the rest, each version once. A member
//     with a position (a resume) gets the chunks after it from history;
//   - the deltas of replace chunks in a class with growing.delta: the
//     room keeps the bodies of its open messages as it fans them out
//     (core/room's GrowView), so a replace reaches the members, who all hold the
//     version before it, as a fossil delta when that is smaller,
//     computed once per room.

// grower is the core's growing messages: the checks of an append, the
// append through the room, the joiners' prefixes. Safe for concurrent
// use: it has no state of its own (the rooms' GrowViews, package
// core/room, are guarded by their room's lock).
type grower struct {
	c *Core
}

// maxGrowID bounds a growing message's id in bytes.
const maxGrowID = 128

// prefixWait bounds how long a join waits for its room to deliver the
// chunks the store's open messages cover (normally the time pub/sub
// takes to bring them, or two appends finishing out of order).
const prefixWait = 2 * time.Second

// clientAppend handles a client's Append frame: the door's checks as for
// a publish (joined, read-only class, publish grant), the class's bounds,
// the publish hook, then the append. The writer gets Published with the
// append's id and the chunk's seq (duplicate for a retried version), or
// Error with ref = the id.
func (g grower) clientAppend(ctx context.Context, s *session, a *corralv1.Append) {
	c := g.c
	name, id := a.GetRoom(), a.GetId()
	cl := c.class(name)
	r := writeDoor(ctx, c, s, cl, name, id, "appending")
	switch {
	case r == nil:
		return
	case id == "" || len(id) > maxGrowID:
		c.metrics.refuse(refusedInvalid)
		s.SendErr(corralv1.Code_CODE_INVALID_ARGUMENT, fmt.Sprintf("append: a growing message needs an id of 1 to %d bytes", maxGrowID), name, safetext.Truncate(id, maxGrowID))
		return
	case len(a.GetData()) > cl.Growing.MaxBytes:
		c.metrics.refuse(refusedTooLarge)
		s.SendErr(corralv1.Code_CODE_TOO_LARGE, "append: the chunk exceeds the room's growing message size", name, id)
		return
	case g.refuseRate(s, cl, name, id):
		return
	}
	if _, ok := c.hist.(history.Grower); !ok {
		s.SendErr(corralv1.Code_CODE_UNIMPLEMENTED, "append: this server's history store keeps no growing messages", name, id)
		return
	}
	data, ok := c.door.HookWrite(ctx, s, cl, &corralv1.Publish{Room: name, Id: id, Payload: a.GetData()},
		corralv1.PublishKind_PUBLISH_KIND_APPEND, "")
	if !ok {
		return
	}
	msg := &corralv1.Message{
		Room: name, Sender: s.UserID(), TimeMs: time.Now().UnixMilli(), Id: id,
		SenderInfo: s.MemberInfo(name),
		Chunk: &corralv1.MessageChunk{Data: data, Replace: a.GetReplace(), Final: a.GetFinal(),
			Version: a.GetVersion()},
	}
	res, err := g.grow(ctx, r, msg, cl)
	if err != nil {
		if code, text, ok := g.refusal(err); ok {
			s.SendErr(code, text, name, id)
			return
		}
		c.storeFailed(s, "append", err, name, id)
		return
	}
	s.SendTo(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Published{Published: &corralv1.Published{
		Room: name, Id: id, Seq: res.Seq, Duplicate: res.Duplicate,
	}}})
}

// refusal maps a store's refusal of a chunk to its code and text, and
// counts it; ok is false for any other error (a store failure).
func (g grower) refusal(err error) (corralv1.Code, string, bool) {
	switch {
	case errors.Is(err, history.ErrFinal):
		g.c.metrics.refuse(refusedFinal)
		return corralv1.Code_CODE_MESSAGE_FINAL, "append: the message already has its final chunk", true
	case errors.Is(err, history.ErrTooLarge):
		g.c.metrics.refuse(refusedTooLarge)
		return corralv1.Code_CODE_TOO_LARGE, "append: the message would exceed the room's growing message size", true
	case errors.Is(err, history.ErrOutOfOrder):
		g.c.metrics.refuse(refusedOrder)
		return corralv1.Code_CODE_OUT_OF_ORDER, "append: a version more than one past the message's: send the missing chunks first", true
	}
	return 0, "", false
}

// refuseRate takes a token of s's append bucket for room (the class's
// growing.append-rate; negative: none). Past it the append is refused
// with CODE_RATE_LIMITED and the delay until the next token.
func (g grower) refuseRate(s *session, cl *roomclass.Class, room, ref string) bool {
	delay, ok := s.TakeAppend(g.c.pubRates, cl, appendKey(room), time.Now())
	if ok {
		return false
	}
	g.c.metrics.refuse(refusedAppendRate)
	s.SendRetry(corralv1.Code_CODE_RATE_LIMITED, "appending too fast for this room's class: retry after the delay",
		room, ref, max(delay, time.Millisecond))
	return true
}

// appendKey is room's key of the append budgets in the core's publish
// budget table (Core.pubRates): apart from the room's publish budget (a
// room's name never holds a NUL byte).
func appendKey(room string) string { return "append\x00" + room }

// growKnown is the Redis store's Grow with the position the room saw
// (history.Redis.GrowKnown): a chunk is fenced as a publish is.
type growKnown interface {
	GrowKnown(ctx context.Context, room string, msg *corralv1.Message, limits history.GrowLimits, known history.State) (history.AppendResult, error)
}

// grow appends msg's chunk to history, then hands it to the members as
// room.publish does a message. msg.Chunk.Version is 0 or the version the
// chunk makes (a retry of a stored version is a duplicate: nothing is
// delivered again).
func (g grower) grow(ctx context.Context, r *room, msg *corralv1.Message, cl *roomclass.Class) (history.AppendResult, error) {
	c := g.c
	gr, ok := c.hist.(history.Grower)
	if !ok {
		return history.AppendResult{}, errors.New("core: the history store keeps no growing messages")
	}
	lim := history.GrowLimits{MaxBytes: cl.Growing.MaxBytes}
	var known history.State
	_, known.Last, known.Epoch = r.Info()
	done := c.metrics.storeOp("grow")
	var res history.AppendResult
	var err error
	if gk, ok := c.hist.(growKnown); ok {
		res, err = gk.GrowKnown(ctx, r.Name(), msg, lim, known)
	} else {
		res, err = gr.Grow(ctx, r.Name(), msg, lim)
	}
	if err != nil && (errors.Is(err, history.ErrFinal) || errors.Is(err, history.ErrTooLarge) || errors.Is(err, history.ErrOutOfOrder)) {
		done(nil) // a refusal, not a store failure
	} else {
		done(err)
	}
	if err != nil || res.Duplicate {
		return res, err
	}
	r.Stored(msg, res)
	return res, nil
}

// readOpen reads, for each join that will go live without a replay, the
// room's open growing messages (its prefixes, sent by goLive), and waits
// until the room delivered the chunks they cover. Called after the joins
// began (beginJoin) and their history was read.
func (g grower) readOpen(ctx context.Context, qs []*joinReq) {
	gr, ok := g.c.hist.(history.Grower)
	if !ok {
		return
	}
	for _, q := range qs {
		if q.Position && q.Since == q.Target && q.Epoch == q.RoomEpoch && !q.OpenPrefix {
			continue // nothing missed: it holds what it saw
		}
		if q.Position && q.Replay && q.ReadOK && q.Resumed && !q.OpenPrefix {
			continue // a resume holds what came before its position
		}
		r := q.Room
		if r.Grown().NoneOpen() {
			continue
		}
		done := g.c.metrics.storeOp("open")
		open, st, err := gr.Open(ctx, q.Name)
		done(err)
		if err != nil {
			g.c.cfg.Logger.Warn("growing messages: open read failed; the join gets no prefixes", "room", q.Name, "err", err)
			continue
		}
		q.Open, q.OpenEpoch = open, st.Epoch
		if len(open) == 0 {
			r.Grown().SawNone(st)
		}
		var upTo uint64
		for _, m := range open {
			upTo = max(upTo, m.GetSeq())
		}
		q.Room.WaitDelivered(ctx, upTo, st.Epoch, prefixWait)
	}
}

// sendPrefixesLocked sends a member that joined live at the room's last seq the
// growing messages open there, each as one replace chunk at the seq of
// its last chunk: the store's open messages (q.open) with the chunks
// delivered since the join began (cu) folded in. Lock must be held;
// called by goLive before the member receives live traffic.
func (g grower) sendPrefixesLocked(r *room, ep endpoint, q *joinReq, cu *catchup) {
	if len(q.Open) == 0 && (cu == nil || len(cu.HeldLocked()) == 0) {
		return
	}
	last, epoch := r.PositionLocked()
	byID := make(map[string]*corralv1.Message)
	if q.OpenEpoch == epoch {
		for _, m := range q.Open {
			if m.GetSeq() <= last {
				byID[m.GetId()] = m
			}
		}
	}
	if cu != nil && !cu.OverflowLocked() {
		for _, m := range cu.HeldLocked() {
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
		r.Grown().LearnLocked(id, m)
	}
	slices.SortFunc(out, func(a, b *corralv1.Message) int { return cmp.Compare(a.GetSeq(), b.GetSeq()) })
	for _, m := range out {
		ep.Link.Enqueue(frame.Conn(ep.Conn, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Message{Message: m}}))
	}
}

// replayPrefixesLocked takes out of a join's replay (out, in seq order)
// the chunks of the messages open when the join began that started at or
// before its position: a join (not a resume) from a position holds
// nothing of them. It returns the replay without them and, for each, the
// message as one replace chunk at the seq of its last chunk up to the room's last seq
// (final if it ended meanwhile), to send after the replay. Lock must be
// held; called by goLive.
func (g grower) replayPrefixesLocked(r *room, q *joinReq, cu *catchup, out []*corralv1.Message) ([]*corralv1.Message, []*corralv1.Message) {
	last, epoch := r.PositionLocked()
	if (q.Resumed && !q.OpenPrefix) || len(q.Open) == 0 || q.OpenEpoch != epoch || cu.OverflowLocked() {
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
	for _, m := range cu.HeldLocked() {
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
	prefixes := make([]*corralv1.Message, 0, len(byID))
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
