package core

import (
	"context"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// The rooms this core holds, as the other concepts use them: taken with
// acquireRoom (which loads the room's state) and dropped with releaseRoom,
// so a room nobody uses is forgotten at once (the table itself is in
// roomtable.go); and the pub/sub subscriptions that bring other
// processes' messages to the rooms held here (onRemote, subscribe,
// unsubscribeLoop). One room's order and fan-out are package core/room's (roomparts.go).

// onRemote receives a room's messages from pub/sub (nil: some may have
// been missed). It runs on the subscription's reader: it must not block.
func (c *Core) onRemote(roomName string, msg *corralv1.Message) {
	r := c.rooms.get(roomName)
	if r == nil {
		return
	}
	if msg == nil {
		r.CatchUp()
		if c.keyed.carried {
			r.Keyed().Gap() // the room's state changes ride the channel too
		}
		return
	}
	r.Deliver(msg)
}

// subscribe makes sure pub/sub brings room's messages. Joins of many
// rooms at once share SUBSCRIBE commands (see history.Subscription.Add).
func (c *Core) subscribe(ctx context.Context, room string) error {
	return c.sub.Add(ctx, room)
}

// unsubscribeLoop drops, in batches, the subscriptions of rooms this
// process no longer holds.
func (c *Core) unsubscribeLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.UnsubscribeDelay)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		// Under the table's lock: a room acquired after this decision
		// subscribes again, after the UNSUBSCRIBE
		// (history.Subscription.RemoveIf).
		n := c.rooms.dropUnheld(c.sub.RemoveIf)
		if c.keyed.feed != nil {
			c.rooms.dropUnheld(c.keyed.feed.RemoveIf)
		}
		if n > 0 {
			c.metrics.unsubscribed.Add(float64(n))
		}
	}
}

// acquireRoom returns the live room for name, creating it (and loading its
// state from history) when needed. The caller must call releaseRoom when done
// so that empty rooms are forgotten.
func (c *Core) acquireRoom(ctx context.Context, name string, forJoin bool) (*room, error) {
	r := c.rooms.acquire(name)
	if !forJoin {
		// A publish needs no state: the append result carries it.
		return r, nil
	}
	if err := r.Load(ctx, forJoin); err != nil {
		c.releaseRoom(r)
		return nil, err
	}
	if err := r.Keyed().Load(ctx); err != nil {
		c.releaseRoom(r)
		return nil, err
	}
	return r, nil
}

// releaseRoom drops a reference taken by acquireRoom and forgets the room
// when nothing uses it.
func (c *Core) releaseRoom(r *room) {
	c.rooms.release(r)
}

// releaseMember forgets r if its last member just left.
func (c *Core) releaseMember(r *room) {
	c.rooms.forgetIdle(r)
}

// roomHolder is a history store that keeps a room in process memory only
// while it is held or has history (history.Memory). A room is held exactly
// while it is in the room table: one count per Core, taken and dropped
// under the table's lock, so its epoch stays while anyone here uses it and
// the room is forgotten, everywhere at once, when nobody does.
type roomHolder interface {
	Hold(room string)
	Release(room string)
}
