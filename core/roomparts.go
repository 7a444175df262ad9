package core

import (
	"context"

	croom "github.com/corral-rt/corral/core/room"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/presence"
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
// keyed state (keyed.go). Its presence is the room's (croom.Presence).
type roomParts struct {
	c     *Core // set by newRoom, never changed
	keyed keyedRoom
}

// newRoomOpts is what every room of c shares (croom.Options).
func newRoomOpts(c *Core) *roomOpts {
	o := &roomOpts{
		History: c.hist,
		Classes: c.cfg.Classes,
		Ctx:     c.ctx,
		Logger:  c.cfg.Logger,
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
			PresenceFlushes:   c.metrics.presenceFlushes,
		},
		// c.pres.store is set by presenceState.init, before any room is
		// made, and never changes after.
		PresenceList: func(ctx context.Context, room string) (presence.Snapshot, error) {
			return c.pres.store.List(ctx, room)
		},
		PresenceTick: c.cfg.Presence.withDefaults().Tick,
	}
	return o // Subscribe: set by Start, with pub/sub
}

// newRoom makes the room name, with its parts.
func newRoom(c *Core, name string) *room {
	r := croom.New(name, c.roomOpts)
	r.Parts().c = c
	return r
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
