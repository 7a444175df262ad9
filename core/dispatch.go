package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	croom "github.com/corral-rt/corral/core/room"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/internal/safetext"
	"github.com/corral-rt/corral/roomclass"
)

// The client-frame dispatcher: handleClient routes each frame of an
// attached session to a thin handler that checks it at the door (door.go)
// and calls the concept that does the work (package core/room, the session
// lifecycle of package core/session, presence.go).

// handleClient processes one client frame of an attached session.
func (c *Core) handleClient(ctx context.Context, s *session, f *corralv1.ClientFrame) {
	switch k := f.GetKind().(type) {
	case *corralv1.ClientFrame_Join:
		c.clientJoin(ctx, s, k.Join)
	case *corralv1.ClientFrame_Leave:
		c.clientLeave(ctx, s, k.Leave)
	case *corralv1.ClientFrame_Publish:
		c.clientPublish(ctx, s, k.Publish)
	case *corralv1.ClientFrame_Signal:
		c.clientSignal(ctx, s, k.Signal)
	case *corralv1.ClientFrame_Ack:
		if err := c.sess.Ack(ctx, s.SessionID(), k.Ack.GetRoom(), k.Ack.GetSeq()); err != nil {
			c.metrics.drop(droppedAckStore, 1)
		}
	case *corralv1.ClientFrame_Ping:
		s.SendTo(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Pong{Pong: &corralv1.Pong{
			Id: k.Ping.GetId(), TimeMs: time.Now().UnixMilli(),
		}}})
	case *corralv1.ClientFrame_SetPresence:
		c.pres.set(ctx, s, k.SetPresence)
	case *corralv1.ClientFrame_PresenceQuery:
		c.pres.query(ctx, s, k.PresenceQuery)
	case *corralv1.ClientFrame_Hello:
		s.SendErr(corralv1.Code_CODE_BAD_FRAME, "hello was already sent on this connection", "", "")
	case *corralv1.ClientFrame_Append:
		c.grow.clientAppend(ctx, s, k.Append) // grow.go
	case *corralv1.ClientFrame_SetState:
		c.keyed.clientSet(ctx, s, k.SetState)
	case *corralv1.ClientFrame_DeleteState:
		c.keyed.clientDelete(ctx, s, k.DeleteState)
	default:
		s.SendErr(corralv1.Code_CODE_UNKNOWN_FRAME, "unknown frame type", "", "")
	}
}

func (c *Core) clientJoin(ctx context.Context, s *session, j *corralv1.Join) {
	if j.GetEpoch() != "" && j.GetSinceSeq() == 0 && !j.GetFromPosition() {
		// Without from_position, since_seq 0 is "no position": the join
		// would be live and the epoch silently ignored, and a client that
		// meant "from the start of this epoch" would miss what it asked for.
		c.metrics.refuse(refusedInvalid)
		s.SendErr(corralv1.Code_CODE_INVALID_ARGUMENT, "join: an epoch without since_seq or from_position is no position: set from_position to continue from the start of the epoch, or leave the epoch out to join live", j.GetRoom(), "")
		return
	}
	q := &joinReq{Name: j.GetRoom(), Join: croom.Join{Since: j.GetSinceSeq(), Epoch: j.GetEpoch(),
		Position: j.GetSinceSeq() > 0 || j.GetFromPosition(), OpenPrefix: j.GetOpenPrefix(),
		StatePos: j.GetStatePosition(), StateEpoch: j.GetStateEpoch()},
		Presence: j.GetPresence(), State: j.GetPresenceState()}
	c.life.Join(ctx, s, c.adm.admit(ctx, s, []*joinReq{q}))
}

func (c *Core) clientLeave(ctx context.Context, s *session, lv *corralv1.Leave) {
	name := lv.GetRoom()
	r := s.DropRoom(name)
	if r == nil {
		s.SendErr(corralv1.Code_CODE_NOT_JOINED, "not in this room", name, "")
		return
	}
	r.Leave(s, &corralv1.Left{Room: name})
	c.events.EmitLeft(s, name)
	c.pres.leave(s, name, true)
	c.releaseMember(r)
	if err := c.sess.DeleteRoom(ctx, s.SessionID(), name); err != nil {
		c.cfg.Logger.Warn("session store: delete room failed", "session", s.SessionID(), "room", name, "err", err)
	}
}

func (c *Core) clientPublish(ctx context.Context, s *session, p *corralv1.Publish) {
	name := p.GetRoom()
	// One lookup per frame: every check below sees the same class, even
	// when a reload swaps the table meanwhile.
	cl := c.class(name)
	r := writeDoor(ctx, c, s, cl, name, p.GetId(), "publishing")
	switch {
	case r == nil:
		return
	case len(p.GetPayload()) > cl.MaxPayload:
		c.metrics.refuse(refusedTooLarge)
		s.SendErr(corralv1.Code_CODE_TOO_LARGE, "payload exceeds the room's limit", name, p.GetId())
		return
	case c.refuseRate(s, cl, name, p.GetId()):
		return
	case len(p.GetId()) > 128:
		c.metrics.refuse(refusedInvalid)
		s.SendErr(corralv1.Code_CODE_INVALID_ARGUMENT, "publish id longer than 128 bytes", name, p.GetId())
		return
	case p.GetSeq() != 0 && p.GetId() == "":
		// Without an id a retry of a stored publish could not be told
		// from a sequence that starts again, and would be stored twice.
		c.metrics.refuse(refusedInvalid)
		s.SendErr(corralv1.Code_CODE_INVALID_ARGUMENT, "a publish with seq needs an id", name, "")
		return
	}
	payload, ok := c.door.HookPublish(ctx, s, cl, p)
	if !ok {
		return
	}
	msg := &corralv1.Message{
		Room:    name,
		Sender:  s.UserID(),
		Payload: payload,
		TimeMs:  time.Now().UnixMilli(),
		Id:      p.GetId(),
		// Stored with the message: replays show the info it was sent with.
		SenderInfo: s.MemberInfo(name),
	}
	dedupe := ""
	if p.GetId() != "" {
		dedupe = "s:" + s.SessionID() + ":" + p.GetId()
	}
	var sender history.Sender
	if p.GetSeq() != 0 {
		// The session is the sequence: it outlives connections, and a
		// resumed session continues its sequence (docs/GUARANTEES.md).
		sender = history.Sender{Stream: s.SessionID(), Seq: p.GetSeq()}
	}
	res, err := r.Publish(ctx, msg, dedupe, sender)
	if errors.Is(err, history.ErrOutOfOrder) {
		c.metrics.refuse(refusedOrder)
		s.SendErr(corralv1.Code_CODE_OUT_OF_ORDER, "the publish before this one is not stored: send it first, then this one", name, p.GetId())
		return
	}
	if err != nil {
		c.storeFailed(s, "publish", err, name, p.GetId())
		return
	}
	s.SendTo(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Published{Published: &corralv1.Published{
		Room: name, Id: p.GetId(), Seq: res.Seq, Duplicate: res.Duplicate,
	}}})
}

// refuseRate takes a token of the user's publish bucket in the room, at
// the room's class's publish-rate (negative: none); the bucket outlives
// the connection (core/pubrate). Past it the publish is refused with
// CODE_RATE_LIMITED and the delay until the next token.
func (c *Core) refuseRate(s *session, cl *roomclass.Class, name, ref string) bool {
	delay, ok := s.TakePublish(c.pubRates, cl, name, time.Now())
	if ok {
		return false
	}
	c.metrics.refuse(refusedRate)
	s.SendRetry(corralv1.Code_CODE_RATE_LIMITED, "publishing too fast for this room's class: retry after the delay",
		name, ref, max(delay, time.Millisecond))
	return true
}

// maxSignalKey bounds a signal's key in bytes.
const maxSignalKey = 200

func (c *Core) clientSignal(ctx context.Context, s *session, sg *corralv1.Signal) {
	name := sg.GetRoom()
	r := s.Room(name)
	cl := c.class(name)
	switch {
	case r == nil:
		c.metrics.refuse(refusedNotJoined)
		s.SendErr(corralv1.Code_CODE_NOT_JOINED, "join the room before signalling", name, "")
		return
	case c.door.RefuseReadOnly(s, cl, name, "", true):
		return
	case c.door.RefusePublish(ctx, s, name, ""):
		return
	case len(sg.GetPayload()) > cl.MaxPayload || len(sg.GetKey()) > maxSignalKey:
		c.metrics.refuse(refusedTooLarge)
		s.SendErr(corralv1.Code_CODE_TOO_LARGE, "signal key or payload exceeds the room's limit", name, "")
		return
	}
	if err := safetext.CheckName("signal key", sg.GetKey(), maxSignalKey); err != nil {
		c.metrics.refuse(refusedInvalid)
		s.SendErr(corralv1.Code_CODE_INVALID_ARGUMENT, err.Error(), name, "")
		return
	}
	if !r.SignalsOrNew().Set(s, &corralv1.SignalEvent{
		Room: name, Key: sg.GetKey(), Sender: s.UserID(), Payload: sg.GetPayload(), Clear: sg.GetClear(),
	}) {
		c.metrics.refuse(refusedSignalKeys)
		s.SendErr(corralv1.Code_CODE_LIMIT_EXCEEDED, fmt.Sprintf("more than %d signal keys in this room: clear one first", croom.MaxSignalKeys), name, "")
	}
}

// writeDoor is the door every member's write passes first (a publish, an
// append, a set or a delete of keyed state): the room joined, a class
// that is not read-only, the publish grant. It answers the room, or nil
// when refused (the Error with ref sent and counted); verb ends the
// not-joined text ("join the room before " + verb).
func writeDoor(ctx context.Context, c *Core, s *session, cl *roomclass.Class, name, ref, verb string) *room {
	r := s.Room(name)
	switch {
	case r == nil:
		c.metrics.refuse(refusedNotJoined)
		s.SendErr(corralv1.Code_CODE_NOT_JOINED, "join the room before "+verb, name, ref)
		return nil
	case c.door.RefuseReadOnly(s, cl, name, ref, false), c.door.RefusePublish(ctx, s, name, ref):
		return nil
	}
	return r
}
