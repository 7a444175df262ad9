package room

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/corral-rt/corral/core/frame"
	"github.com/corral-rt/corral/core/linkserver"
	"github.com/corral-rt/corral/delta"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/state"
)

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
	// mirror's kept ones takes from the store (ReadOld), as a page of
	// history is bounded: past it the resume gets a snapshot.
	maxStateResumeBytes = 1 << 20
)

// Keyed is a room's keyed state as this core mirrors it (docs/STATE.md):
// the entries at a position, and the newest changes. The mirror is what
// makes delivery exact without a read per member: a joiner gets the
// mirror as a StateSnapshot under the same lock that fans the changes
// out (GoLive), so nothing falls between the snapshot and the live
// changes; a resumed member gets the kept changes after its position, or
// a fresh snapshot when they are no longer kept or its epoch is another;
// and a set's delta is computed once per change against the mirror's
// previous value, which every live member holds (they got every change
// in order). Changes reach the mirror from this core's writes and the
// store's feed (Apply) and from Since reads that close a gap (fill);
// each is applied once, strictly in position order, early ones held
// until the gap closes.
//
// The room's lock guards a Keyed, not a lock of its own: its changes go
// to the room's links in one order with the room's messages, and a
// joiner's snapshot is sent in GoLive. Methods named Locked need the
// room's lock held; the others take it. The store (Options.State) is
// read without it.
type Keyed[M Member] struct {
	room *Room[M]

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

// Keyed is the room's keyed state.
func (r *Room[M]) Keyed() *Keyed[M] { return &r.keyed }

// Load makes the mirror once (a join needs it): it follows the room's
// changes first (Options.StateFollow), so that no change written after
// the snapshot read is missed, then reads the snapshot and the kept
// changes before it.
func (kr *Keyed[M]) Load(ctx context.Context) error {
	r := kr.room
	r.mu.Lock()
	if kr.loaded {
		r.mu.Unlock()
		return nil
	}
	kr.loading++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		kr.loading--
		if !kr.loaded && kr.loading == 0 {
			kr.pending = nil
		}
		r.mu.Unlock()
	}()
	if follow := r.opts.StateFollow; follow != nil {
		if err := follow(ctx, r.name); err != nil {
			return fmt.Errorf("core: follow the state of %q: %w", r.name, err)
		}
	}
	done := r.opts.Metrics.StoreOp("state_snapshot")
	snap, err := r.opts.State.Snapshot(ctx, r.name)
	done(err)
	if err != nil {
		return fmt.Errorf("core: read the state of %q: %w", r.name, err)
	}
	var kept []state.Change
	if snap.Position > 0 {
		// The changes before the snapshot serve resumes; Since also
		// returns those written since, which join the held ones.
		kept, _ = r.opts.State.Since(ctx, r.name, snap.Epoch, snap.Position-min(snap.Position, keepStateChanges), 0)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
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
	kr.drainLocked()
	kr.armLocked()
	return nil
}

// setLocked makes the mirror snap's state, keeping no changes.
func (kr *Keyed[M]) setLocked(snap state.Snapshot) {
	kr.loaded, kr.epoch, kr.pos = true, snap.Epoch, snap.Position
	kr.keys = make(map[string]state.Entry, len(snap.Entries))
	for _, e := range snap.Entries {
		kr.keys[e.Key] = e
	}
	kr.ring = kr.ring[:0]
}

func (kr *Keyed[M]) holdLocked(epoch string, ch state.Change) {
	if kr.pending == nil {
		kr.pending = make(map[uint64]pendingChange)
	}
	kr.pending[ch.Position] = pendingChange{epoch, ch}
}

// Apply hands one change (in epoch) to the mirror and the members: at
// once when it is the next, held when it is early, dropped when it is a
// duplicate. It does not block (the store's feed calls it).
func (kr *Keyed[M]) Apply(epoch string, ch state.Change) {
	r := kr.room
	r.mu.Lock()
	defer r.mu.Unlock()
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
	kr.drainLocked()
}

// Gap says some changes may have been missed (a broken or moved
// subscription): a catch-up read closes it.
func (kr *Keyed[M]) Gap() {
	r := kr.room
	r.mu.Lock()
	defer r.mu.Unlock()
	kr.scheduleFillLocked(0)
}

// drainLocked delivers the held changes that follow the mirror, in
// order, and starts a catch-up read when a gap or another epoch remains.
// Lock must be held.
func (kr *Keyed[M]) drainLocked() {
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
		kr.deliverLocked(p.c)
	}
	if len(kr.pending) > 0 {
		kr.scheduleFillLocked(kr.room.opts.StateGapWait)
	}
}

// deliverLocked applies the next change to the mirror and sends it to the
// room's members, once per link: with a delta instead of the value when
// the class allows it and the delta is smaller. Lock must be held.
func (kr *Keyed[M]) deliverLocked(ch state.Change) {
	r := kr.room
	sc := &corralv1.StateChange{
		Room: r.name, Key: ch.Key, Version: ch.Version, Deleted: ch.Deleted, Expired: ch.Expired,
		Position: ch.Position, Epoch: kr.epoch, ExpiresMs: unixMs(ch.Expires),
	}
	prev, had := kr.keys[ch.Key]
	if ch.Deleted {
		delete(kr.keys, ch.Key)
	} else {
		if had && prev.Version+1 == ch.Version && len(r.links) > 0 && r.opts.Classes.Lookup(r.name).State.Delta {
			if d, ok := delta.Choose(prev.Value, ch.Value); ok {
				sc.Delta = d
				r.opts.Metrics.StateDeltas.Inc()
			}
		}
		if sc.Delta == nil {
			sc.Value = ch.Value
		}
		kr.keys[ch.Key] = state.Entry{Key: ch.Key, Value: ch.Value, Version: ch.Version, Expires: ch.Expires}
		if !ch.Expires.IsZero() && (kr.due.IsZero() || ch.Expires.Before(kr.due)) {
			kr.armLocked()
		}
	}
	kr.pos = ch.Position
	if len(kr.ring) == keepStateChanges {
		kr.ring = append(kr.ring[:0], kr.ring[1:]...)
	}
	kr.ring = append(kr.ring, ch)
	r.opts.Metrics.StateChanges.Inc()
	if len(r.links) > 0 {
		linkserver.EnqueueEach(r.links, frame.State(r.name, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_StateChange{StateChange: sc}}))
	}
}

// snapshotFrame is the mirror as a StateSnapshot. Lock must be held.
func (kr *Keyed[M]) snapshotFrame() *corralv1.ServerFrame {
	room := kr.room.name
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
// (or the store's read of ReadOld reaches the kept ones), else a
// snapshot. A room whose state was never written sends nothing to
// a joiner without a position: its first change (position 1) begins it.
// Lock must be held; GoLive calls it.
func (kr *Keyed[M]) joinLocked(ep Endpoint, q *Join) {
	r := kr.room
	if !kr.loaded {
		return
	}
	held := q.StateEpoch != "" || q.StatePos > 0
	if !held && kr.epoch == "" && kr.pos == 0 {
		return
	}
	if held && q.StateEpoch == kr.epoch && q.StatePos <= kr.pos {
		first := kr.pos + 1 - uint64(len(kr.ring))
		// The changes older than the ring come from the store's read
		// (ReadOld), when it reaches the ring.
		var old []state.Change
		if q.StatePos+1 < first && len(q.StateOld) > 0 && q.StateOld[0].Position == q.StatePos+1 &&
			q.StateOld[len(q.StateOld)-1].Position+1 >= first {
			n := 0
			for n < len(q.StateOld) && q.StateOld[n].Position < first {
				n++
			}
			old = q.StateOld[:n]
		}
		if q.StatePos+1 >= first || len(old) > 0 {
			send := func(ch state.Change) {
				sc := &corralv1.StateChange{Room: r.name, Key: ch.Key, Version: ch.Version, Deleted: ch.Deleted,
					Expired: ch.Expired, Position: ch.Position, Epoch: kr.epoch, ExpiresMs: unixMs(ch.Expires), Value: ch.Value}
				ep.Link.Enqueue(frame.Snapshot(ep.Conn, r.name, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_StateChange{StateChange: sc}}))
			}
			for _, ch := range old {
				send(ch)
			}
			from := max(q.StatePos+1, first)
			for _, ch := range kr.ring[from-first:] {
				send(ch)
			}
			how := "since"
			if len(old) > 0 {
				how = "store"
			}
			r.opts.Metrics.StateResumes.WithLabelValues(how).Inc()
			return
		}
	}
	if held {
		r.opts.Metrics.StateResumes.WithLabelValues("snapshot").Inc()
	}
	ep.Link.Enqueue(frame.Snapshot(ep.Conn, r.name, kr.snapshotFrame()))
}

// ReadOld reads from the store, for a join whose state position is
// older than the mirror keeps, the changes after it (the store keeps
// more: Limits.MaxChanges) into q.StateOld, so that GoLive sends them and
// the kept ones instead of a snapshot. A read that fails, finds the
// position too old for the store too, or exceeds maxStateResumeBytes
// leaves the join a snapshot: explicit, never a silent skip. Called
// before GoLive.
func (kr *Keyed[M]) ReadOld(ctx context.Context, q *Join) {
	if q.StateEpoch == "" || q.StatePos == 0 {
		return
	}
	r := kr.room
	r.mu.Lock()
	old := kr.loaded && q.StateEpoch == kr.epoch && q.StatePos < kr.pos &&
		q.StatePos+1 < kr.pos+1-uint64(len(kr.ring))
	r.mu.Unlock()
	if !old {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, stateReadTimeout)
	done := r.opts.Metrics.StoreOp("state_since")
	changes, err := r.opts.State.Since(rctx, r.name, q.StateEpoch, q.StatePos, maxStateResumeBytes)
	cancel()
	if errors.Is(err, state.ErrTooOld) {
		err = nil
	}
	done(err)
	for i, ch := range changes {
		if ch.Position != q.StatePos+1+uint64(i) {
			changes = nil // not contiguous: a snapshot
			break
		}
	}
	q.StateOld = changes
}

// scheduleFillLocked starts the catch-up read (one at a time) after
// wait. Lock must be held.
func (kr *Keyed[M]) scheduleFillLocked(wait time.Duration) {
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
		time.AfterFunc(wait, kr.fill)
		return
	}
	kr.room.opts.Go(kr.fill)
}

// fill reads the changes after the mirror's position; when they are no
// longer all kept (or the epoch changed) it reads a snapshot, which
// replaces the mirror and goes to every member: explicit, not a silent
// skip.
func (kr *Keyed[M]) fill() {
	r := kr.room
	for {
		r.mu.Lock()
		epoch, pos := kr.epoch, kr.pos
		r.mu.Unlock()
		ctx, cancel := context.WithTimeout(r.opts.Ctx, stateReadTimeout)
		var changes []state.Change
		var snap *state.Snapshot
		err := state.ErrTooOld
		if epoch != "" {
			changes, err = r.opts.State.Since(ctx, r.name, epoch, pos, 0)
		}
		if errors.Is(err, state.ErrTooOld) {
			var s state.Snapshot
			s, err = r.opts.State.Snapshot(ctx, r.name)
			snap = &s
		}
		cancel()
		r.mu.Lock()
		switch {
		case err != nil:
			r.opts.Logger.Warn("state store: catch-up read failed", "room", r.name, "err", err)
			kr.filling, kr.refill = false, false
			r.mu.Unlock()
			return // the next change or gap tries again
		case snap != nil && (snap.Epoch != kr.epoch || snap.Position != kr.pos):
			kr.setLocked(*snap)
			clear(kr.pending)
			r.opts.Metrics.StateSnapshots.Inc()
			if len(r.links) > 0 {
				linkserver.EnqueueEach(r.links, frame.State(r.name, kr.snapshotFrame()))
			}
			kr.armLocked()
		default:
			for _, ch := range changes {
				if ch.Position == kr.pos+1 && kr.epoch == epoch {
					delete(kr.pending, ch.Position)
					kr.deliverLocked(ch)
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
		kr.armLocked()
		again := kr.refill
		kr.refill = false
		if again {
			r.mu.Unlock()
			continue
		}
		kr.filling = false
		// Changes still early after the read wait for the next one.
		r.mu.Unlock()
		return
	}
}

// armLocked sets the expiry timer for the earliest deadline of the
// keys. When it fires the store applies the due expiries and the catch-up
// read brings them (as changes with expired) to the members; a room no
// longer held here lets its timer go. Lock must be held.
func (kr *Keyed[M]) armLocked() {
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
	kr.timer = time.AfterFunc(time.Until(next)+time.Millisecond, kr.expire)
}

// expire runs at the earliest deadline.
func (kr *Keyed[M]) expire() {
	r := kr.room
	if r.opts.Ctx.Err() != nil || !r.opts.Held(r) {
		return
	}
	ctx, cancel := context.WithTimeout(r.opts.Ctx, stateReadTimeout)
	_, err := r.opts.State.Expire(ctx, r.name)
	cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	kr.due, kr.timer = time.Time{}, nil
	if err != nil {
		r.opts.Logger.Warn("state store: expire failed", "room", r.name, "err", err)
		kr.timer = time.AfterFunc(time.Second, kr.expire)
		return
	}
	kr.scheduleFillLocked(0)
}

func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
