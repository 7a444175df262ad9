package core

import (
	"context"

	croom "github.com/corral-rt/corral/core/room"
	"github.com/corral-rt/corral/presence"
)

// One room's live state is package core/room's Room (with its presence
// and keyed state); the core's rooms are that Room with the core's
// sessions as members.
type (
	room     = croom.Room[*session]
	catchup  = croom.Catchup
	roomOpts = croom.Options[*session]
)

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
			StateChanges:      c.metrics.stateChanges,
			StateDeltas:       c.metrics.stateDeltas,
			StateSnapshots:    c.metrics.stateSnapshots,
			StateResumes:      c.metrics.stateResumes,
		},
		// c.pres.store is set by presenceState.init, before any room is
		// made, and never changes after.
		PresenceList: func(ctx context.Context, room string) (presence.Snapshot, error) {
			return c.pres.store.List(ctx, room)
		},
		PresenceTick: c.cfg.Presence.withDefaults().Tick,
		// c.keyed is made before, and its feed set by Start, before any
		// room is made.
		State:        c.keyed.store,
		StateFollow:  c.keyed.followRoom,
		StateGapWait: croom.GapWait,
		Go:           c.wg.Go,
		Held:         func(r *room) bool { return c.rooms.get(r.Name()) == r },
	}
	return o // Subscribe: set by Start, with pub/sub
}

// newRoom makes the room name.
func newRoom(c *Core, name string) *room { return croom.New(name, c.roomOpts) }
