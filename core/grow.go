package core

import (
	"context"
	"errors"
	"fmt"
	"time"

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
// other messages in one order. The room's own (core/room's GrowView,
// under the room's lock): the deltas of replace chunks in a class with
// growing.delta, and a joiner's prefixes (each message open at its
// joined seq as one replace chunk, the join's catch-up folded in); a
// member with a position (a resume) gets the chunks after it from
// history.

// grower is the core's growing messages: the checks of an append, the
// append through the room, the read of the joiners' open messages
// (through their rooms). Safe for concurrent use: it has no state of its
// own.
type grower struct {
	c *Core
}

// maxGrowID bounds a growing message's id in bytes.
const maxGrowID = 128

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
// room's open growing messages (its prefixes, which GoLive sends) and
// waits until the room delivered the chunks they cover (core/room's
// GrowView.ReadOpen). Called after the joins began (beginJoin) and their
// history was read.
func (g grower) readOpen(ctx context.Context, qs []*joinReq) {
	for _, q := range qs {
		q.Room.Grown().ReadOpen(ctx, &q.Join)
	}
}
