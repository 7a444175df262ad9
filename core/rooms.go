package core

import (
	"context"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// The room table: the rooms this core holds (Core.rooms, under Core.mu),
// taken with acquireRoom and dropped with releaseRoom, so a room nobody
// uses is forgotten at once; and the pub/sub subscriptions that bring
// other processes' messages to the rooms held here (onRemote, subscribe,
// unsubscribeLoop). One room's order and fan-out are in room.go.

// onRemote receives a room's messages from pub/sub (nil: some may have
// been missed). It runs on the subscription's reader: it must not block.
func (c *Core) onRemote(roomName string, msg *corralv1.Message) {
	c.mu.Lock()
	r := c.rooms[roomName]
	c.mu.Unlock()
	if r == nil {
		return
	}
	if msg == nil {
		r.catchUp()
		return
	}
	r.deliver(msg)
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
		// Under c.mu: a room acquired after this decision subscribes
		// again, after the UNSUBSCRIBE (history.Subscription.RemoveIf).
		c.mu.Lock()
		n := c.sub.RemoveIf(func(room string) bool {
			_, ok := c.rooms[room]
			return !ok
		})
		c.mu.Unlock()
		if n > 0 {
			c.metrics.unsubscribed.Add(float64(n))
		}
	}
}

// acquireRoom returns the live room for name, creating it (and loading its
// state from history) when needed. The caller must call releaseRoom when done
// so that empty rooms are forgotten.
func (c *Core) acquireRoom(ctx context.Context, name string, forJoin bool) (*room, error) {
	c.mu.Lock()
	r, ok := c.rooms[name]
	if !ok {
		r = newRoom(c, name)
		c.rooms[name] = r
		c.metrics.rooms.Inc()
		if h, ok := c.hist.(roomHolder); ok {
			h.Hold(name)
		}
	}
	r.refs++
	c.mu.Unlock()
	if !forJoin {
		// A publish needs no state: the append result carries it.
		return r, nil
	}
	if err := r.load(ctx, forJoin); err != nil {
		c.releaseRoom(r)
		return nil, err
	}
	return r, nil
}

// releaseRoom drops a reference taken by acquireRoom and forgets the room
// when nothing uses it.
func (c *Core) releaseRoom(r *room) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r.refs--
	if r.refs > 0 {
		return
	}
	if r.empty() && c.rooms[r.name] == r {
		delete(c.rooms, r.name)
		c.metrics.rooms.Dec()
		if h, ok := c.hist.(roomHolder); ok {
			h.Release(r.name)
		}
	}
}

// releaseMember forgets r if its last member just left.
func (c *Core) releaseMember(r *room) {
	c.mu.Lock()
	r.refs++
	c.mu.Unlock()
	c.releaseRoom(r)
}

// roomHolder is a history store that keeps a room in process memory only
// while it is held or has history (history.Memory). A room is held exactly
// while it is in Core.rooms: one count per Core, taken and dropped under
// c.mu, so its epoch stays while anyone here uses it and the room is
// forgotten, everywhere at once, when nobody does.
type roomHolder interface {
	Hold(room string)
	Release(room string)
}
