package room

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/corral-rt/corral/core/frame"
	"github.com/corral-rt/corral/core/linkserver"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/presence"
)

// Presence is a room's presence as this core knows it: a view of the
// shared store (package presence: now, kept in the store's version order,
// read again on a gap) and what the room's presence subscribers were told
// (sent). A flush every Options.PresenceTick sends the users that changed
// since the last one as one Presence diff, once per link: a crowd joining
// within a tick costs each subscriber one frame, not one per joiner. New
// subscribers get a snapshot of sent at the next flush, then the diffs.
// Rooms above their class's presence.max-diff, or whose class has no
// join-leave-events, send counts only.
//
// The room's lock guards a Presence, not a lock of its own: who gets
// presence frames follows the room's members (a member's subscription
// goes when it leaves, in the room's removeLocked, and a snapshot goes
// only to a member still there), so one lock keeps the two in step.
// Methods named Locked need the room's lock held; the others take it.
// The store is read (Options.PresenceList) without it.
type Presence[M Member] struct {
	room *Room[M]

	loaded  bool
	loading bool
	stale   bool // changes were missed while loading: load again
	version uint64
	now     map[string]presence.Member
	early   []presence.Change // arrived while loading
	sorted  []presence.Member // now by user id, for pages; nil: stale

	sent       map[string]presence.Member // what subscribers were told
	dirty      map[string]struct{}
	countsOnly bool // subscribers were told counts only
	sentCounts [2]int
	scheduled  bool

	subs    map[M]Endpoint           // receive presence frames
	pending map[M]Endpoint           // get a snapshot at the next flush
	links   map[*linkserver.Link]int // subs per link
}

// maxEarly bounds the changes kept while a room's presence loads.
const maxEarly = 10000

// Presence is the room's presence.
func (r *Room[M]) Presence() *Presence[M] { return &r.pres }

// EnsureLoaded reads the room's presence from the store once.
func (v *Presence[M]) EnsureLoaded(ctx context.Context) {
	r := v.room
	r.mu.Lock()
	load := !v.loaded && !v.loading
	if load {
		v.loading = true
	}
	r.mu.Unlock()
	if load {
		v.load(ctx)
	}
}

// Wanted reports that the room's presence is loaded or loading: someone
// here wants the store's changes of the room.
func (v *Presence[M]) Wanted() bool {
	r := v.room
	r.mu.Lock()
	defer r.mu.Unlock()
	return v.loaded || v.loading
}

// Reload reads the room's presence again, in the background: changes
// may have been missed (the store's watch of the room was dropped).
func (v *Presence[M]) Reload() {
	r := v.room
	r.mu.Lock()
	defer r.mu.Unlock()
	v.reloadLocked()
}

// load reads the room's presence and applies what arrived
// meanwhile; v.loading must have been set by the caller.
func (v *Presence[M]) load(ctx context.Context) {
	r := v.room
	for range 10 {
		snap, err := r.opts.PresenceList(ctx, r.name)
		r.mu.Lock()
		if err != nil {
			v.loading = false
			r.mu.Unlock()
			r.opts.Logger.Warn("presence list failed; retrying", "room", r.name, "err", err)
			if r.opts.Ctx.Err() == nil {
				time.AfterFunc(time.Second, func() {
					r.mu.Lock()
					defer r.mu.Unlock()
					if !v.loading && (len(v.subs) > 0 || len(v.pending) > 0 || v.loaded) {
						v.reloadLocked()
					}
				})
			}
			return
		}
		now := make(map[string]presence.Member, len(snap.Members))
		for _, m := range snap.Members {
			now[m.User] = m
		}
		v.initLocked()
		for u, m := range v.now {
			if n, ok := now[u]; !ok || !sameMember(m, n) {
				v.dirty[u] = struct{}{}
			}
		}
		for u := range now {
			if _, ok := v.now[u]; !ok {
				v.dirty[u] = struct{}{}
			}
		}
		v.now, v.version, v.loaded = now, snap.Version, true
		v.sorted = nil
		early := v.early
		v.early = nil
		slices.SortFunc(early, func(a, b presence.Change) int { return cmp.Compare(a.Version, b.Version) })
		for _, ch := range early {
			switch {
			case ch.Version <= v.version:
			case ch.Version == v.version+1:
				v.applyLocked(ch)
			default:
				v.stale = true
			}
		}
		if v.stale {
			v.stale = false
			r.mu.Unlock()
			continue
		}
		v.loading = false
		v.scheduleLocked()
		r.mu.Unlock()
		return
	}
	r.mu.Lock()
	v.loading = false
	r.mu.Unlock()
}

// initLocked makes the view's maps. Lock must be held.
func (v *Presence[M]) initLocked() {
	if v.dirty == nil {
		v.now = make(map[string]presence.Member)
		v.sent = make(map[string]presence.Member)
		v.dirty = make(map[string]struct{})
		v.subs = make(map[M]Endpoint)
		v.pending = make(map[M]Endpoint)
		v.links = make(map[*linkserver.Link]int)
	}
}

func sameMember(a, b presence.Member) bool {
	return a.Conns == b.Conns && string(a.State) == string(b.State) && string(a.Info) == string(b.Info)
}

// applyLocked applies ch, the next version, to the view. Lock must be held.
func (v *Presence[M]) applyLocked(ch presence.Change) {
	v.version = ch.Version
	v.sorted = nil
	if ch.Kind == presence.Left {
		delete(v.now, ch.Member.User)
	} else {
		v.now[ch.Member.User] = ch.Member
	}
	v.dirty[ch.Member.User] = struct{}{}
}

// Change applies one change from the store to the view.
func (v *Presence[M]) Change(ch presence.Change) {
	r := v.room
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case v.loading:
		if ch.Kind == 0 || len(v.early) >= maxEarly {
			v.stale = true
			return
		}
		v.early = append(v.early, ch)
		return
	case !v.loaded:
		return // nobody here wants this room's presence
	case ch.Kind == 0, ch.Version > v.version+1:
		v.reloadLocked()
		return
	case ch.Version <= v.version:
		return
	}
	v.applyLocked(ch)
	v.scheduleLocked()
}

// reloadLocked reads the room's presence again, in the
// background. Lock must be held.
func (v *Presence[M]) reloadLocked() {
	r := v.room
	if v.loading {
		v.stale = true
		return
	}
	v.loading = true
	if r.opts.Ctx.Err() != nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(r.opts.Ctx, 5*time.Second)
		defer cancel()
		v.load(ctx)
	}()
}

// Subscribe makes m, a member, receive the room's presence frames:
// a snapshot at the next flush, then diffs. A member that left (or
// never joined) is not subscribed.
func (v *Presence[M]) Subscribe(m M) {
	r := v.room
	r.mu.Lock()
	defer r.mu.Unlock()
	ep, ok := r.members[m]
	if !ok {
		return // left or detached meanwhile
	}
	v.initLocked()
	if _, ok := v.subs[m]; ok {
		return
	}
	v.pending[m] = ep
	v.scheduleLocked()
}

// unsubscribeLocked forgets m as a receiver; removeLocked calls it when
// m stops being a member. Lock must be held.
func (v *Presence[M]) unsubscribeLocked(m M) {
	delete(v.pending, m)
	ep, ok := v.subs[m]
	if !ok {
		return
	}
	delete(v.subs, m)
	if n := v.links[ep.Link] - 1; n > 0 {
		v.links[ep.Link] = n
	} else {
		delete(v.links, ep.Link)
	}
}

// List is the view's members ordered by user id (shared: do not
// modify); false when the view is not loaded. The order is kept until the
// next change, so paging a large room sorts it once, not once per page.
func (v *Presence[M]) List() ([]presence.Member, bool) {
	r := v.room
	r.mu.Lock()
	defer r.mu.Unlock()
	if !v.loaded {
		return nil, false
	}
	if v.sorted == nil {
		v.sorted = make([]presence.Member, 0, len(v.now))
		for _, m := range v.now {
			v.sorted = append(v.sorted, m)
		}
		slices.SortFunc(v.sorted, func(a, b presence.Member) int { return strings.Compare(a.User, b.User) })
	}
	return v.sorted, true
}

// scheduleLocked arranges a flush when there is something to send.
// Lock must be held.
func (v *Presence[M]) scheduleLocked() {
	if v.scheduled || !v.loaded || (len(v.dirty) == 0 && len(v.pending) == 0) {
		return
	}
	v.scheduled = true
	time.AfterFunc(v.room.opts.PresenceTick, v.flush)
}

// flush sends what changed since the last flush as one frame per
// link, then snapshots to new subscribers.
func (v *Presence[M]) flush() {
	r := v.room
	r.mu.Lock()
	defer r.mu.Unlock()
	v.scheduled = false
	if !v.loaded || r.opts.Ctx.Err() != nil {
		return
	}
	conns := 0
	for _, m := range v.now {
		conns += m.Conns
	}
	counts := [2]int{len(v.now), conns}
	cl := r.opts.Classes.Lookup(r.name)
	countsOnly := !cl.JoinLeaveEvents || len(v.now) > cl.Presence.MaxDiff
	var out *corralv1.Presence
	switch {
	case countsOnly:
		if !v.countsOnly || counts != v.sentCounts {
			out = &corralv1.Presence{Room: r.name, CountsOnly: true}
		}
		clear(v.dirty)
	case v.countsOnly:
		// Back under the limit: everyone gets the list again.
		clear(v.dirty)
		v.sent = cloneMembers(v.now)
		out = v.snapshotLocked()
	default:
		out = &corralv1.Presence{Room: r.name}
		for u := range v.dirty {
			old, was := v.sent[u]
			cur, is := v.now[u]
			switch {
			case is && !was:
				out.Joins = append(out.Joins, PresenceMember(cur))
				v.sent[u] = cur
			case was && !is:
				out.Leaves = append(out.Leaves, u)
				delete(v.sent, u)
			case is && !sameMember(old, cur):
				out.Updates = append(out.Updates, PresenceMember(cur))
				v.sent[u] = cur
			}
		}
		clear(v.dirty)
		if len(out.Joins)+len(out.Updates)+len(out.Leaves) == 0 {
			out = nil
		}
	}
	v.countsOnly = countsOnly
	if out != nil {
		v.sentCounts = counts
		out.Members, out.Connections = uint32(counts[0]), uint32(counts[1])
		r.opts.Metrics.PresenceFlushes.Inc()
		if len(v.links) > 0 {
			for _, part := range splitPresence(out, maxPresenceFrameBytes) {
				linkserver.EnqueueEach(v.links, frame.Presence(r.name, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Presence{Presence: part}}))
			}
		}
	}
	if len(v.pending) == 0 {
		return
	}
	var snap []*corralv1.ServerFrame
	if countsOnly {
		snap = []*corralv1.ServerFrame{{Kind: &corralv1.ServerFrame_Presence{Presence: &corralv1.Presence{
			Room: r.name, Snapshot: true, CountsOnly: true, Members: uint32(counts[0]), Connections: uint32(counts[1]),
		}}}}
	} else {
		p := v.snapshotLocked()
		p.Snapshot = true
		for _, part := range splitPresence(p, maxPresenceFrameBytes) {
			snap = append(snap, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Presence{Presence: part}})
		}
	}
	for m, ep := range v.pending {
		delete(v.pending, m)
		if cur, ok := r.members[m]; !ok || cur != ep {
			continue
		}
		for _, f := range snap {
			ep.Link.Enqueue(frame.Conn(ep.Conn, f))
		}
		ep.Link.Enqueue(frame.PresenceMembership(ep.Conn, r.name))
		v.subs[m] = ep
		v.links[ep.Link]++
	}
}

// snapshotLocked lists sent, ordered by user id, with the counts.
// Lock must be held.
func (v *Presence[M]) snapshotLocked() *corralv1.Presence {
	r := v.room
	p := &corralv1.Presence{Room: r.name, Snapshot: true, Joins: make([]*corralv1.PresenceMember, 0, len(v.sent))}
	conns := 0
	for _, m := range v.sent {
		p.Joins = append(p.Joins, PresenceMember(m))
		conns += m.Conns
	}
	slices.SortFunc(p.Joins, func(a, b *corralv1.PresenceMember) int { return strings.Compare(a.UserId, b.UserId) })
	p.Members, p.Connections = uint32(len(v.sent)), uint32(conns)
	return p
}

func cloneMembers(m map[string]presence.Member) map[string]presence.Member {
	out := make(map[string]presence.Member, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// PresenceMember is m as a client sees it (in Presence frames and
// PresencePage).
func PresenceMember(m presence.Member) *corralv1.PresenceMember {
	return &corralv1.PresenceMember{UserId: m.User, State: m.State, Connections: uint32(max(m.Conns, 0)), Info: m.Info}
}
