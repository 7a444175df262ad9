package core

import (
	croom "github.com/corral-rt/corral/core/room"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// One room's live state is package core/room's Room; the core's rooms are
// that Room with the core's sessions as members and the core's per-room
// parts that are not in core/room yet (roomParts), which the room's lock
// guards as it guards the room's own fields.
type (
	room     = croom.Room[*session, roomParts]
	catchup  = croom.Catchup
	roomOpts = croom.Options[*session, roomParts]
)

// roomParts are the core's parts of one room, under the room's lock: its
// keyed state (keyed.go) and its presence (presence.go).
type roomParts struct {
	c     *Core // set by newRoom, never changed
	keyed keyedRoom
	pres  roomPresence
}

// newRoomOpts is what every room of c shares (croom.Options).
func newRoomOpts(c *Core) *roomOpts {
	o := &roomOpts{
		History: c.hist,
		Classes: c.cfg.Classes,
		Ctx:     c.ctx,
		Logger:  c.cfg.Logger,
		Hooks:   roomHooks{},
		Metrics: croom.Metrics{
			StoreOp:           c.metrics.storeOp,
			Published:         c.metrics.published,
			CatchupFull:       func() { c.metrics.drop(droppedCatchupFull, 1) },
			LiveBatchMessages: c.metrics.liveBatchMessages,
			LiveBatchFlushes:  c.metrics.liveBatchFlushes,
			SignalsIn:         c.metrics.signalsIn,
			SignalsOut:        c.metrics.signalsOut,
			SignalsCoalesced:  c.metrics.signalsCoalesced,
			SignalsDeferred:   c.metrics.signalsDeferred,
		},
	}
	return o // Subscribe: set by Start, with pub/sub
}

// newRoom makes the room name, with its parts.
func newRoom(c *Core, name string) *room {
	r := croom.New(name, c.roomOpts)
	r.Parts().c = c
	r.Parts().pres.room = r
	return r
}

// roomHooks are the parts a room calls when a member leaves
// (croom.Hooks), with its lock held.
type roomHooks struct{}

// RemovedLocked ends a former member's presence subscription.
func (roomHooks) RemovedLocked(r *room, s *session) {
	r.Parts().pres.unsubscribeLocked(s)
}

// joinHooks are the parts a member going live gets (croom.JoinHooks), in
// room.GoLive under the room's lock: growing messages' prefixes, keyed
// state, and the wait for the edge to take a replay page.
type joinHooks struct {
	c *Core
	r *room
	s *session
	q *joinReq
}

func (h joinHooks) ReplayPrefixesLocked(cu *catchup, out []*corralv1.Message) (rest, prefixes []*corralv1.Message) {
	return h.c.grow.replayPrefixesLocked(h.r, h.q, cu, out)
}

func (h joinHooks) SendPrefixesLocked(ep endpoint, cu *catchup) {
	h.c.grow.sendPrefixesLocked(h.r, ep, h.q, cu)
}

func (h joinHooks) JoinedLocked(ep endpoint) { h.c.keyed.joinLocked(h.r, ep, h.q) }

func (h joinHooks) WaitPage() { h.s.waitPage(h.q) }
