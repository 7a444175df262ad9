package core

import (
	"context"
	"errors"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/state"
)

// Keyed room state (docs/STATE.md) through the core: the writes of
// members (SetState, DeleteState) and of the internal API, and the
// delivery of each room's changes to its members in the room's state
// order.
//
// Each room held here keeps a mirror of its state (package core/room's
// Keyed, under the room's lock: the entries at a position and the newest
// changes, delivered in the room's state order once per link, a joiner's
// snapshot or a resume's kept changes in GoLive, the catch-up reads and
// the expiry timer). This file is the core's side: the store, how other
// processes' changes reach the mirrors (the store's feed, or the rooms'
// message subscriptions), and the writes (keyed_write.go).

// stateRooms is the core's side of keyed state: the store, its feed and
// the writes. Its methods may be called concurrently; a room's mirror is
// the room's (croom.Keyed), guarded by the room's lock.
type stateRooms struct {
	c     *Core
	store state.Store
	own   bool        // the core made the store: Close closes it
	feed  *state.Feed // other processes' changes; nil: this core is the only writer, or carried
	// carried: the changes ride the rooms' message channels (one pub/sub
	// subscription per room, state.RedisOptions.Channel); the messages'
	// subscription brings them (onTagged).
	carried bool
}

func newStateRooms(c *Core) *stateRooms {
	k := &stateRooms{c: c, store: c.cfg.State}
	if k.store == nil {
		k.store = state.NewMemory(state.MemoryOptions{Limits: func(room string) state.Limits {
			cl := c.class(room)
			return state.Limits{MaxKeys: cl.State.MaxKeys, MaxValue: cl.State.MaxValue}
		}})
		k.own = true
	}
	return k
}

// follow starts bringing other processes' changes: on the messages'
// subscription when the store publishes them on the rooms' message
// channels, else on the store's own feed when it has one (Redis).
func (k *stateRooms) follow(ctx context.Context) error {
	if sh, ok := k.store.(interface{ SharesChannel() bool }); ok && sh.SharesChannel() && k.c.sub != nil {
		k.carried = true
		k.c.sub.OnTagged(k.onTagged)
		return nil
	}
	f, ok := k.store.(interface {
		Follow(context.Context, state.FeedOptions) (*state.Feed, error)
	})
	if !ok {
		return nil
	}
	feed, err := f.Follow(ctx, state.FeedOptions{
		OnChange: func(room, epoch string, ch state.Change) {
			if r := k.c.rooms.get(room); r != nil {
				r.Keyed().Apply(epoch, ch)
			}
		},
		OnGap: func(room string) {
			if r := k.c.rooms.get(room); r != nil {
				r.Keyed().Gap()
			}
		},
	})
	if err != nil {
		return err
	}
	k.feed = feed
	return nil
}

// onTagged receives a tagged publication of a room's channel: a change
// of its state (or, unreadable, a gap). It must not block.
func (k *stateRooms) onTagged(room string, data []byte) {
	r := k.c.rooms.get(room)
	if r == nil || !state.IsChange(data) {
		return
	}
	epoch, ch, err := state.ParseChange(data)
	if err != nil {
		r.Keyed().Gap()
		return
	}
	r.Keyed().Apply(epoch, ch)
}

// followRoom makes sure the store's changes of room reach its mirror before
// the mirror is read (croom.Options.StateFollow): on the store's feed, or
// on the room's one subscription (confirmed at once when the join made
// it already).
func (k *stateRooms) followRoom(ctx context.Context, room string) error {
	switch {
	case k.feed != nil:
		return k.feed.Add(ctx, room)
	case k.carried:
		return k.c.subscribe(ctx, room)
	}
	return nil
}

// readOld reads, for each join whose state position is older than its
// room's mirror keeps, the changes after it from the store
// (croom.Keyed.ReadOld). Called before
// session.Lifecycle.GoLive, without locks.
func (k *stateRooms) readOld(ctx context.Context, qs []*joinReq) {
	for _, q := range qs {
		q.Room.Keyed().ReadOld(ctx, &q.Join)
	}
}

func (k *stateRooms) close() error {
	var err error
	if k.feed != nil {
		err = k.feed.Close()
	}
	if k.own {
		err = errors.Join(err, k.store.Close())
	}
	return err
}

// stateError maps a store error of a write to a client code and text, and
// the refusal it counts (numRefuseReasons: none, a store failure).
func stateError(err error) (corralv1.Code, string, refuseReason) {
	switch {
	case errors.Is(err, state.ErrConflict):
		return corralv1.Code_CODE_VERSION_CONFLICT, "the key's version is another: read its current value, then decide again", refusedStateConflict
	case errors.Is(err, state.ErrTooManyKeys):
		return corralv1.Code_CODE_TOO_MANY_KEYS, "the room's state holds its class's most keys: delete a key first", refusedStateKeys
	case errors.Is(err, state.ErrTooLarge):
		return corralv1.Code_CODE_TOO_LARGE, "the value exceeds the room's limit (its class's state.max-value)", refusedTooLarge
	case errors.Is(err, state.ErrInvalid):
		return corralv1.Code_CODE_INVALID_ARGUMENT, "the key must be 1 to 200 bytes of UTF-8 without control characters", refusedInvalid
	}
	return corralv1.Code_CODE_UNAVAILABLE, "", numRefuseReasons
}
