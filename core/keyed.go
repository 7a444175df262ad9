package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/corral-rt/corral/core/frame"
	"github.com/corral-rt/corral/core/linkserver"
	croom "github.com/corral-rt/corral/core/room"
	"github.com/corral-rt/corral/delta"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/state"
)

// Keyed room state (docs/STATE.md) through the core: the writes of
// members (SetState, DeleteState) and of the internal API, and the
// delivery of each room's changes to its members in the room's state
// order.
//
// Each room held here keeps a mirror of its state (keyedRoom, under the
// room's lock): the entries at a position, and the newest changes. The
// mirror is what makes delivery exact without a read per member: a joiner
// gets the mirror as a StateSnapshot under the same lock that fans the
// changes out, so nothing falls between the snapshot and the live
// changes; a resumed member gets the kept changes after its position, or
// a fresh snapshot when they are no longer kept or its epoch is another;
// and a set's delta is computed once per change against the mirror's
// previous value, which every live member holds (they got every change in
// order). Changes reach the mirror from this core's writes, from the
// store's feed (other processes' writes, Redis) and from Since reads that
// close a gap; each is applied once, strictly in position order, early
// ones held until the gap closes.

const (
	// keepStateChanges is how many of a room's newest changes its mirror
	// keeps for resumes; an older position gets a snapshot.
	keepStateChanges = 256
	// maxStatePending bounds the changes held ahead of a gap (or while the
	// mirror loads); past it they are dropped and a read catches up.
	maxStatePending = 4096
	// stateReadTimeout bounds a catch-up read of the store.
	stateReadTimeout = 5 * time.Second
	// maxStateResumeBytes bounds the changes a resume older than the
	// mirror's kept ones takes from the store (readOld), as a page of
	// history is bounded: past it the resume gets a snapshot.
	maxStateResumeBytes = 1 << 20
)

// stateRooms is the core's side of keyed state: the store, its feed and
// the operations on a room's mirror. Its methods may be called
// concurrently; a room's mirror is guarded by the room's lock.
type stateRooms struct {
	c     *Core
	store state.Store
	own   bool        // the core made the store: Close closes it
	feed  *state.Feed // other processes' changes; nil: this core is the only writer, or carried
	// carried: the changes ride the rooms' message channels (one pub/sub
	// subscription per room, state.RedisOptions.Channel); the messages'
	// subscription brings them (onTagged).
	carried bool
	// gapWait is how long a gap may stay open before a read closes it
	// (gapWait, as a room's messages: two writes of this core that finish
	// out of order close it at once, without a read).
	gapWait time.Duration
}

// keyedRoom is one room's mirror. Guarded by room.mu.
type keyedRoom struct {
	loaded  bool
	loading int // loads in flight: changes arriving meanwhile are held
	epoch   string
	pos     uint64
	keys    map[string]state.Entry
	ring    []state.Change // the newest changes up to pos, oldest first
	pending map[uint64]pendingChange
	// filling: a catch-up read runs; refill: run it again after.
	filling, refill bool
	// due is the deadline the expiry timer is set for (zero: none).
	due   time.Time
	timer *time.Timer
}

type pendingChange struct {
	epoch string
	c     state.Change
}

func newStateRooms(c *Core) *stateRooms {
	k := &stateRooms{c: c, store: c.cfg.State, gapWait: croom.GapWait}
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
				k.apply(r, epoch, ch)
			}
		},
		OnGap: func(room string) {
			if r := k.c.rooms.get(room); r != nil {
				k.gap(r)
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
		k.gap(r)
		return
	}
	k.apply(r, epoch, ch)
}

// gap says some changes of room r may have been missed (a broken or
// moved subscription): a catch-up read closes it.
func (k *stateRooms) gap(r *room) {
	r.Lock()
	k.scheduleFillLocked(r, 0)
	r.Unlock()
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

// load makes room r's mirror once (a join needs it): it follows the
// room's feed first, so that no change written after the snapshot read
// is missed, then reads the snapshot and the kept changes before it.
func (k *stateRooms) load(ctx context.Context, r *room) error {
	r.Lock()
	if r.Parts().keyed.loaded {
		r.Unlock()
		return nil
	}
	r.Parts().keyed.loading++
	r.Unlock()
	defer func() {
		r.Lock()
		r.Parts().keyed.loading--
		if !r.Parts().keyed.loaded && r.Parts().keyed.loading == 0 {
			r.Parts().keyed.pending = nil
		}
		r.Unlock()
	}()
	switch {
	case k.feed != nil:
		if err := k.feed.Add(ctx, r.Name()); err != nil {
			return fmt.Errorf("core: follow the state of %q: %w", r.Name(), err)
		}
	case k.carried:
		// The room's one subscription (confirmed at once when the join
		// made it already).
		if err := k.c.subscribe(ctx, r.Name()); err != nil {
			return fmt.Errorf("core: follow the state of %q: %w", r.Name(), err)
		}
	}
	done := k.c.metrics.storeOp("state_snapshot")
	snap, err := k.store.Snapshot(ctx, r.Name())
	done(err)
	if err != nil {
		return fmt.Errorf("core: read the state of %q: %w", r.Name(), err)
	}
	var kept []state.Change
	if snap.Position > 0 {
		// The changes before the snapshot serve resumes; Since also
		// returns those written since, which join the held ones.
		kept, _ = k.store.Since(ctx, r.Name(), snap.Epoch, snap.Position-min(snap.Position, keepStateChanges), 0)
	}
	r.Lock()
	defer r.Unlock()
	kr := &r.Parts().keyed
	if kr.loaded {
		return nil
	}
	kr.setLocked(snap)
	for _, ch := range kept {
		switch {
		case ch.Position <= snap.Position:
			kr.ring = append(kr.ring, ch)
		case len(kr.pending) < maxStatePending:
			kr.holdLocked(snap.Epoch, ch)
		}
	}
	k.drainLocked(r)
	k.armLocked(r)
	return nil
}

// setLocked makes the mirror snap's state, keeping no changes.
func (kr *keyedRoom) setLocked(snap state.Snapshot) {
	kr.loaded, kr.epoch, kr.pos = true, snap.Epoch, snap.Position
	kr.keys = make(map[string]state.Entry, len(snap.Entries))
	for _, e := range snap.Entries {
		kr.keys[e.Key] = e
	}
	kr.ring = kr.ring[:0]
}

func (kr *keyedRoom) holdLocked(epoch string, ch state.Change) {
	if kr.pending == nil {
		kr.pending = make(map[uint64]pendingChange)
	}
	kr.pending[ch.Position] = pendingChange{epoch, ch}
}

// apply hands one change of room r (in epoch) to the mirror and the
// members: at once when it is the next, held when it is early, dropped
// when it is a duplicate. It does not block (the feed calls it).
func (k *stateRooms) apply(r *room, epoch string, ch state.Change) {
	r.Lock()
	defer r.Unlock()
	kr := &r.Parts().keyed
	if !kr.loaded {
		if kr.loading > 0 && len(kr.pending) < maxStatePending {
			kr.holdLocked(epoch, ch)
		}
		return
	}
	if len(kr.pending) >= maxStatePending {
		kr.pending = nil
	}
	kr.holdLocked(epoch, ch)
	k.drainLocked(r)
}

// drainLocked delivers the held changes that follow the mirror, in
// order, and starts a catch-up read when a gap or another epoch remains.
// Lock must be held.
func (k *stateRooms) drainLocked(r *room) {
	kr := &r.Parts().keyed
	for pos, p := range kr.pending {
		if pos <= kr.pos && p.epoch == kr.epoch {
			delete(kr.pending, pos)
		}
	}
	for {
		p, ok := kr.pending[kr.pos+1]
		if !ok {
			break
		}
		if p.epoch != kr.epoch {
			if kr.epoch != "" || kr.pos != 0 {
				break // another epoch: the catch-up reads a snapshot
			}
			kr.epoch = p.epoch // the room's first write opens its epoch
		}
		delete(kr.pending, kr.pos+1)
		k.deliverLocked(r, p.c)
	}
	if len(kr.pending) > 0 {
		k.scheduleFillLocked(r, k.gapWait)
	}
}

// deliverLocked applies the next change to the mirror and sends it to the
// room's members, once per link: with a delta instead of the value when
// the class allows it and the delta is smaller. Lock must be held.
func (k *stateRooms) deliverLocked(r *room, ch state.Change) {
	kr := &r.Parts().keyed
	sc := &corralv1.StateChange{
		Room: r.Name(), Key: ch.Key, Version: ch.Version, Deleted: ch.Deleted, Expired: ch.Expired,
		Position: ch.Position, Epoch: kr.epoch, ExpiresMs: unixMs(ch.Expires),
	}
	prev, had := kr.keys[ch.Key]
	if ch.Deleted {
		delete(kr.keys, ch.Key)
	} else {
		if had && prev.Version+1 == ch.Version && len(r.LinksLocked()) > 0 && k.c.class(r.Name()).State.Delta {
			if d, ok := delta.Choose(prev.Value, ch.Value); ok {
				sc.Delta = d
				k.c.metrics.stateDeltas.Inc()
			}
		}
		if sc.Delta == nil {
			sc.Value = ch.Value
		}
		kr.keys[ch.Key] = state.Entry{Key: ch.Key, Value: ch.Value, Version: ch.Version, Expires: ch.Expires}
		if !ch.Expires.IsZero() && (kr.due.IsZero() || ch.Expires.Before(kr.due)) {
			k.armLocked(r)
		}
	}
	kr.pos = ch.Position
	if len(kr.ring) == keepStateChanges {
		kr.ring = append(kr.ring[:0], kr.ring[1:]...)
	}
	kr.ring = append(kr.ring, ch)
	k.c.metrics.stateChanges.Inc()
	if len(r.LinksLocked()) > 0 {
		linkserver.EnqueueEach(r.LinksLocked(), frame.State(r.Name(), &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_StateChange{StateChange: sc}}))
	}
}

// snapshotFrame is the mirror as a StateSnapshot. Lock must be held.
func (kr *keyedRoom) snapshotFrame(room string) *corralv1.ServerFrame {
	s := &corralv1.StateSnapshot{Room: room, Position: kr.pos, Epoch: kr.epoch,
		Entries: make([]*corralv1.StateEntry, 0, len(kr.keys))}
	for _, e := range kr.keys {
		s.Entries = append(s.Entries, &corralv1.StateEntry{Key: e.Key, Value: e.Value, Version: e.Version, ExpiresMs: unixMs(e.Expires)})
	}
	return &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_StateSnapshot{StateSnapshot: s}}
}

// joinLocked sends a member going live what it needs of the room's state,
// before it becomes a member at the edge (the changes after that reach it
// live): the changes after its state position when the mirror keeps them
// (or the store's read of readOld reaches the kept ones), else a
// snapshot. A room whose state was never written sends nothing to
// a joiner without a position: its first change (position 1) begins it.
// Lock must be held.
func (k *stateRooms) joinLocked(r *room, ep endpoint, q *joinReq) {
	kr := &r.Parts().keyed
	if !kr.loaded {
		return
	}
	held := q.stateEpoch != "" || q.statePos > 0
	if !held && kr.epoch == "" && kr.pos == 0 {
		return
	}
	if held && q.stateEpoch == kr.epoch && q.statePos <= kr.pos {
		first := kr.pos + 1 - uint64(len(kr.ring))
		// The changes older than the ring come from the store's read
		// (readOld), when it reaches the ring.
		var old []state.Change
		if q.statePos+1 < first && len(q.stateOld) > 0 && q.stateOld[0].Position == q.statePos+1 &&
			q.stateOld[len(q.stateOld)-1].Position+1 >= first {
			n := 0
			for n < len(q.stateOld) && q.stateOld[n].Position < first {
				n++
			}
			old = q.stateOld[:n]
		}
		if q.statePos+1 >= first || len(old) > 0 {
			send := func(ch state.Change) {
				sc := &corralv1.StateChange{Room: r.Name(), Key: ch.Key, Version: ch.Version, Deleted: ch.Deleted,
					Expired: ch.Expired, Position: ch.Position, Epoch: kr.epoch, ExpiresMs: unixMs(ch.Expires), Value: ch.Value}
				ep.Link.Enqueue(frame.Snapshot(ep.Conn, r.Name(), &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_StateChange{StateChange: sc}}))
			}
			for _, ch := range old {
				send(ch)
			}
			from := max(q.statePos+1, first)
			for _, ch := range kr.ring[from-first:] {
				send(ch)
			}
			how := "since"
			if len(old) > 0 {
				how = "store"
			}
			k.c.metrics.stateResumes.WithLabelValues(how).Inc()
			return
		}
	}
	if held {
		k.c.metrics.stateResumes.WithLabelValues("snapshot").Inc()
	}
	ep.Link.Enqueue(frame.Snapshot(ep.Conn, r.Name(), kr.snapshotFrame(r.Name())))
}

// readOld reads from the store, for each join whose state position is
// older than its room's mirror keeps, the changes after it (the store
// keeps more: Limits.MaxChanges), so that joinLocked sends them and the
// kept ones instead of a snapshot. A read that fails, finds the position
// too old for the store too, or exceeds maxStateResumeBytes leaves the
// join a snapshot: explicit, never a silent skip. Called before goLive,
// without locks.
func (k *stateRooms) readOld(ctx context.Context, qs []*joinReq) {
	for _, q := range qs {
		if q.stateEpoch == "" || q.statePos == 0 {
			continue
		}
		r := q.room
		r.Lock()
		kr := &r.Parts().keyed
		old := kr.loaded && q.stateEpoch == kr.epoch && q.statePos < kr.pos &&
			q.statePos+1 < kr.pos+1-uint64(len(kr.ring))
		r.Unlock()
		if !old {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, stateReadTimeout)
		done := k.c.metrics.storeOp("state_since")
		changes, err := k.store.Since(rctx, r.Name(), q.stateEpoch, q.statePos, maxStateResumeBytes)
		cancel()
		if errors.Is(err, state.ErrTooOld) {
			err = nil
		}
		done(err)
		for i, ch := range changes {
			if ch.Position != q.statePos+1+uint64(i) {
				changes = nil // not contiguous: a snapshot
				break
			}
		}
		q.stateOld = changes
	}
}

// scheduleFillLocked starts the catch-up read of room r (one at a time)
// after wait. Lock must be held.
func (k *stateRooms) scheduleFillLocked(r *room, wait time.Duration) {
	kr := &r.Parts().keyed
	if !kr.loaded {
		return
	}
	if kr.filling {
		kr.refill = true
		return
	}
	kr.filling = true
	if wait > 0 {
		// A timer's goroutine: the read ends with the core's context.
		time.AfterFunc(wait, func() { k.fill(r) })
		return
	}
	k.c.wg.Go(func() { k.fill(r) })
}

// fill reads the changes after the mirror's position; when they are no
// longer all kept (or the epoch changed) it reads a snapshot, which
// replaces the mirror and goes to every member: explicit, not a silent
// skip.
func (k *stateRooms) fill(r *room) {
	for {
		r.Lock()
		epoch, pos := r.Parts().keyed.epoch, r.Parts().keyed.pos
		r.Unlock()
		ctx, cancel := context.WithTimeout(k.c.ctx, stateReadTimeout)
		var changes []state.Change
		var snap *state.Snapshot
		err := state.ErrTooOld
		if epoch != "" {
			changes, err = k.store.Since(ctx, r.Name(), epoch, pos, 0)
		}
		if errors.Is(err, state.ErrTooOld) {
			var s state.Snapshot
			s, err = k.store.Snapshot(ctx, r.Name())
			snap = &s
		}
		cancel()
		r.Lock()
		kr := &r.Parts().keyed
		switch {
		case err != nil:
			k.c.cfg.Logger.Warn("state store: catch-up read failed", "room", r.Name(), "err", err)
			kr.filling, kr.refill = false, false
			r.Unlock()
			return // the next change or gap tries again
		case snap != nil && (snap.Epoch != kr.epoch || snap.Position != kr.pos):
			kr.setLocked(*snap)
			clear(kr.pending)
			k.c.metrics.stateSnapshots.Inc()
			if len(r.LinksLocked()) > 0 {
				linkserver.EnqueueEach(r.LinksLocked(), frame.State(r.Name(), kr.snapshotFrame(r.Name())))
			}
			k.armLocked(r)
		default:
			for _, ch := range changes {
				if ch.Position == kr.pos+1 && kr.epoch == epoch {
					delete(kr.pending, ch.Position)
					k.deliverLocked(r, ch)
				}
			}
		}
		// The store answered for the mirror's epoch: what was held of
		// another one is stale.
		for pos, p := range kr.pending {
			if p.epoch != kr.epoch || pos <= kr.pos {
				delete(kr.pending, pos)
			}
		}
		// After an expiry (or a snapshot) the next deadline is another
		// key's, which no change of this read may have named.
		k.armLocked(r)
		again := kr.refill
		kr.refill = false
		if again {
			r.Unlock()
			continue
		}
		kr.filling = false
		// Changes still early after the read wait for the next one.
		r.Unlock()
		return
	}
}

// armLocked sets room r's expiry timer for the earliest deadline of its
// keys. When it fires the store applies the due expiries and the catch-up
// read brings them (as changes with expired) to the members; a room no
// longer held here lets its timer go. Lock must be held.
func (k *stateRooms) armLocked(r *room) {
	kr := &r.Parts().keyed
	var next time.Time
	for _, e := range kr.keys {
		if !e.Expires.IsZero() && (next.IsZero() || e.Expires.Before(next)) {
			next = e.Expires
		}
	}
	if next.Equal(kr.due) {
		return
	}
	if kr.timer != nil {
		kr.timer.Stop()
		kr.timer = nil
	}
	kr.due = next
	if next.IsZero() {
		return
	}
	kr.timer = time.AfterFunc(time.Until(next)+time.Millisecond, func() { k.expire(r) })
}

// expire runs at room r's earliest deadline.
func (k *stateRooms) expire(r *room) {
	if k.c.ctx.Err() != nil || k.c.rooms.get(r.Name()) != r {
		return
	}
	ctx, cancel := context.WithTimeout(k.c.ctx, stateReadTimeout)
	_, err := k.store.Expire(ctx, r.Name())
	cancel()
	r.Lock()
	defer r.Unlock()
	r.Parts().keyed.due, r.Parts().keyed.timer = time.Time{}, nil
	if err != nil {
		k.c.cfg.Logger.Warn("state store: expire failed", "room", r.Name(), "err", err)
		r.Parts().keyed.timer = time.AfterFunc(time.Second, func() { k.expire(r) })
		return
	}
	k.scheduleFillLocked(r, 0)
}

func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
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
