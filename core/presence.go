package core

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/corral-rt/corral/core/eventlog"
	"github.com/corral-rt/corral/core/frame"
	"github.com/corral-rt/corral/core/linkserver"
	"github.com/corral-rt/corral/core/sessiontable"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/presence"
	"github.com/corral-rt/corral/roomclass"
)

// Presence: who is in a room (package presence keeps the counts, shared by
// every core). A connection joins with presence to be shown and to receive
// the room's Presence frames.
//
// Each room keeps a view of the store (now) and what its presence members
// were told (sent). Changes from any core reach the view through the
// store's OnChange in version order; a gap makes the room read the store
// again. A flush every Tick sends the users that changed since the last
// one as one Presence diff, once per link: a crowd joining within a tick
// costs each member one frame, not one per joiner. New presence members
// get a snapshot of sent at the next flush, then the diffs. Rooms above
// their class's presence.max-diff, or whose class has no join-leave-events,
// send counts only; PresenceQuery pages through the list. A class without
// presence (presence.enabled false) takes joins with presence as joins
// without it. Grace is the class's presence.grace.
//
// A clean leave (Leave, or a connection closed normally) uncounts at once.
// A dropped connection is uncounted after Grace unless its session comes
// back first, on any core: a resume within Grace shows no leave and join.

// presenceState is the core's part of presence (Core.pres): the store,
// the grace timers, and the presence side of a session's joins, leaves,
// SetPresence and PresenceQuery. It reaches the rest of the core only
// through presenceParts, given once by init. Safe for concurrent use:
// the grace timers have their own lock, taken never with another.
type presenceState struct {
	presenceParts
	cfg   PresenceConfig
	store presence.Store

	mu sync.Mutex // guards the following fields
	// grace holds the dropped connections still counted, by room and
	// session.
	grace map[graceKey]*graceEntry
}

// presenceParts are what presence needs of the core.
type presenceParts struct {
	ctx      context.Context // ends when the core closes
	logger   *slog.Logger
	class    func(room string) *roomclass.Class
	rooms    *roomTable                    // a room's view of the store
	attached *sessiontable.Table[*session] // the connections to count again
	events   *eventlog.Log[*session]       // committed changes, for the log
	// failed tells a session that a store operation failed.
	failed func(s *session, what string, err error, room, ref string)
}

type graceKey struct{ room, session string }

// graceEntry is a dropped connection still counted.
type graceEntry struct {
	timer *time.Timer
	user  string
}

// init makes the store with cfg on parts; New calls it once (again with
// the memory store when the configured one fails).
func (p *presenceState) init(cfg PresenceConfig, parts presenceParts) error {
	p.presenceParts = parts
	p.cfg = cfg.withDefaults()
	p.grace = make(map[graceKey]*graceEntry)
	opts := presence.Options{OnChange: p.onChange, OnCommit: p.onCommit, OnLost: p.recount}
	if p.cfg.NewStore == nil {
		p.store = presence.NewMemory(opts)
		return nil
	}
	st, err := p.cfg.NewStore(opts)
	if err != nil {
		return err
	}
	p.store = st
	return nil
}

// close stops grace timers (their connections stay counted: with
// a shared store other cores sweep them) and closes the store.
func (p *presenceState) close() error {
	p.mu.Lock()
	for k, g := range p.grace {
		g.timer.Stop()
		delete(p.grace, k)
	}
	p.mu.Unlock()
	if p.store == nil {
		return nil
	}
	return p.store.Close()
}

// onCommit records a change this core committed in the event log.
func (p *presenceState) onCommit(ch presence.Change) {
	pc := &corralv1.PresenceChanged{Member: presenceMember(ch.Member)}
	switch ch.Kind {
	case presence.Joined:
		pc.Change = corralv1.PresenceChanged_CHANGE_JOINED
	case presence.Updated:
		pc.Change = corralv1.PresenceChanged_CHANGE_UPDATED
	case presence.Left:
		pc.Change = corralv1.PresenceChanged_CHANGE_LEFT
	}
	p.events.Emit(ch.Room, &corralv1.Event{Kind: &corralv1.Event_Presence{Presence: pc}})
}

// onChange brings a change to the room's view, if the room is here.
func (p *presenceState) onChange(ch presence.Change) {
	if r := p.rooms.get(ch.Room); r != nil {
		r.Parts().pres.change(ch)
	}
}

func presenceMember(m presence.Member) *corralv1.PresenceMember {
	return &corralv1.PresenceMember{UserId: m.User, State: m.State, Connections: uint32(max(m.Conns, 0)), Info: m.Info}
}

// join shows s in room r (or keeps it shown: a session that comes
// back within its grace is counted already) and subscribes it to the
// room's presence frames from the next flush on.
func (p *presenceState) join(ctx context.Context, s *session, r *room, state []byte) {
	if !p.class(r.Name()).Presence.Enabled {
		return // the room's class has no presence: joined without it
	}
	if len(state) > p.cfg.MaxState {
		s.SendErr(corralv1.Code_CODE_TOO_LARGE, "presence state exceeds the server's limit", r.Name(), "")
		state = nil
	}
	if err := p.store.Watch(ctx, r.Name()); err != nil {
		p.failed(s, "presence", err, r.Name(), "")
		return
	}
	r.Parts().pres.ensureLoaded(ctx)

	s.mu.Lock()
	counted := s.pres[r.Name()]
	gone := s.gone
	if !gone {
		if s.pres == nil {
			s.pres = make(map[string]bool)
		}
		s.pres[r.Name()] = true
	}
	s.mu.Unlock()
	if gone {
		return
	}
	if !counted {
		key := graceKey{r.Name(), s.id}
		p.mu.Lock()
		g, waiting := p.grace[key]
		delete(p.grace, key)
		p.mu.Unlock()
		if waiting {
			g.timer.Stop()
			counted = true
		}
	}
	var err error
	switch {
	case !counted:
		err = p.store.Add(ctx, r.Name(), s.user, state, s.memberInfo(r.Name()))
	case state != nil:
		err = p.store.SetState(ctx, r.Name(), s.user, state)
	}
	if err != nil {
		s.mu.Lock()
		delete(s.pres, r.Name())
		s.mu.Unlock()
		p.failed(s, "presence", err, r.Name(), "")
		return
	}
	r.Parts().pres.subscribe(s)
}

// leave uncounts s in room: at once when clean, else after the
// grace window unless the session comes back.
func (p *presenceState) leave(s *session, room string, clean bool) {
	s.mu.Lock()
	counted := s.pres[room]
	delete(s.pres, room)
	s.mu.Unlock()
	if !counted {
		return
	}
	remove := func() {
		ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
		defer cancel()
		if err := p.store.Remove(ctx, room, s.user); err != nil {
			p.logger.Warn("presence remove failed", "room", room, "err", err)
		}
	}
	if clean {
		remove()
		return
	}
	key := graceKey{room, s.id}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.grace[key]; ok || p.ctx.Err() != nil {
		return
	}
	g := &graceEntry{user: s.user}
	g.timer = time.AfterFunc(p.class(room).Presence.Grace, func() {
		p.mu.Lock()
		mine := p.grace[key] == g
		if mine {
			delete(p.grace, key)
		}
		p.mu.Unlock()
		if mine {
			remove()
		}
	})
	p.grace[key] = g
}

// set replaces the user's state in a room joined with presence.
func (p *presenceState) set(ctx context.Context, s *session, sp *corralv1.SetPresence) {
	name := sp.GetRoom()
	s.mu.Lock()
	on := s.pres[name]
	s.mu.Unlock()
	switch {
	case !on:
		s.SendErr(corralv1.Code_CODE_NOT_JOINED, "join the room with presence before setting presence", name, "")
		return
	case len(sp.GetState()) > p.cfg.MaxState:
		s.SendErr(corralv1.Code_CODE_TOO_LARGE, "presence state exceeds the server's limit", name, "")
		return
	}
	if err := p.store.SetState(ctx, name, s.user, sp.GetState()); err != nil {
		p.failed(s, "presence", err, name, "")
	}
}

// query answers one page of a joined room's members.
func (p *presenceState) query(ctx context.Context, s *session, q *corralv1.PresenceQuery) {
	name := q.GetRoom()
	r := s.room(name)
	if r == nil {
		s.SendErr(corralv1.Code_CODE_NOT_JOINED, "join the room before asking for its presence", name, "")
		return
	}
	limit := p.cfg.PageLimit
	if l := int(q.GetLimit()); l > 0 && l < limit {
		limit = l
	}
	members, ok := r.Parts().pres.list()
	if !ok {
		snap, err := p.store.List(ctx, name)
		if err != nil {
			p.failed(s, "presence", err, name, "")
			return
		}
		members = snap.Members
	}
	i, _ := slices.BinarySearchFunc(members, q.GetAfter(), func(m presence.Member, after string) int {
		if m.User <= after {
			return -1
		}
		return 1
	})
	page := &corralv1.PresencePage{Room: name, Total: uint32(len(members))}
	end := min(i+limit, len(members))
	for _, m := range members[i:end] {
		page.Members = append(page.Members, presenceMember(m))
	}
	if end < len(members) && end > i {
		page.Next = members[end-1].User
	}
	s.sendTo(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_PresencePage{PresencePage: page}})
}

// roomPresence is a room's presence as this core knows it. room.mu guards
// these fields, not a lock of their own: who gets presence frames follows
// the room's members (a member's subscription goes when it leaves, under
// room.mu, and a snapshot goes only to a member still there), so one lock
// keeps the two in step. Lock must be held for the methods named Locked;
// the others take it.
type roomPresence struct {
	room *room

	loaded  bool
	loading bool
	stale   bool // changes were missed while loading: load again
	version uint64
	now     map[string]presence.Member
	early   []presence.Change // arrived while loading
	sorted  []presence.Member // now by user id, for pages; nil: stale

	sent       map[string]presence.Member // what members were told
	dirty      map[string]struct{}
	countsOnly bool // members were told counts only
	sentCounts [2]int
	scheduled  bool

	subs    map[*session]endpoint    // receive presence frames
	pending map[*session]endpoint    // get a snapshot at the next flush
	links   map[*linkserver.Link]int // subs per link
}

// maxEarly bounds the changes kept while a room's presence loads.
const maxEarly = 10000

// ensureLoaded reads the room's presence from the store once.
func (v *roomPresence) ensureLoaded(ctx context.Context) {
	r := v.room
	r.Lock()
	load := !v.loaded && !v.loading
	if load {
		v.loading = true
	}
	r.Unlock()
	if load {
		v.load(ctx)
	}
}

// load reads the room's presence and applies what arrived
// meanwhile; v.loading must have been set by the caller.
func (v *roomPresence) load(ctx context.Context) {
	r := v.room
	for range 10 {
		snap, err := r.Parts().c.pres.store.List(ctx, r.Name())
		r.Lock()
		if err != nil {
			v.loading = false
			r.Unlock()
			r.Parts().c.cfg.Logger.Warn("presence list failed; retrying", "room", r.Name(), "err", err)
			if r.Parts().c.ctx.Err() == nil {
				time.AfterFunc(time.Second, func() {
					r.Lock()
					defer r.Unlock()
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
			r.Unlock()
			continue
		}
		v.loading = false
		v.scheduleLocked()
		r.Unlock()
		return
	}
	r.Lock()
	v.loading = false
	r.Unlock()
}

// initLocked makes the view's maps. Lock must be held.
func (v *roomPresence) initLocked() {
	if v.dirty == nil {
		v.now = make(map[string]presence.Member)
		v.sent = make(map[string]presence.Member)
		v.dirty = make(map[string]struct{})
		v.subs = make(map[*session]endpoint)
		v.pending = make(map[*session]endpoint)
		v.links = make(map[*linkserver.Link]int)
	}
}

func sameMember(a, b presence.Member) bool {
	return a.Conns == b.Conns && string(a.State) == string(b.State) && string(a.Info) == string(b.Info)
}

// applyLocked applies ch, the next version, to the view. Lock must be held.
func (v *roomPresence) applyLocked(ch presence.Change) {
	v.version = ch.Version
	v.sorted = nil
	if ch.Kind == presence.Left {
		delete(v.now, ch.Member.User)
	} else {
		v.now[ch.Member.User] = ch.Member
	}
	v.dirty[ch.Member.User] = struct{}{}
}

// change applies one change from the store to the view.
func (v *roomPresence) change(ch presence.Change) {
	r := v.room
	r.Lock()
	defer r.Unlock()
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
func (v *roomPresence) reloadLocked() {
	r := v.room
	if v.loading {
		v.stale = true
		return
	}
	v.loading = true
	if r.Parts().c.ctx.Err() != nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(r.Parts().c.ctx, 5*time.Second)
		defer cancel()
		v.load(ctx)
	}()
}

// subscribe makes s, a member, receive the room's presence frames:
// a snapshot at the next flush, then diffs.
func (v *roomPresence) subscribe(s *session) {
	r := v.room
	r.Lock()
	defer r.Unlock()
	ep, ok := r.MembersLocked()[s]
	if !ok {
		return // left or detached meanwhile
	}
	v.initLocked()
	if _, ok := v.subs[s]; ok {
		return
	}
	v.pending[s] = ep
	v.scheduleLocked()
}

// unsubscribeLocked forgets s as a receiver. Lock must be held.
func (v *roomPresence) unsubscribeLocked(s *session) {
	delete(v.pending, s)
	ep, ok := v.subs[s]
	if !ok {
		return
	}
	delete(v.subs, s)
	if n := v.links[ep.Link] - 1; n > 0 {
		v.links[ep.Link] = n
	} else {
		delete(v.links, ep.Link)
	}
}

// list is the view's members ordered by user id (shared: do not
// modify); false when the view is not loaded. The order is kept until the
// next change, so paging a large room sorts it once, not once per page.
func (v *roomPresence) list() ([]presence.Member, bool) {
	r := v.room
	r.Lock()
	defer r.Unlock()
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
func (v *roomPresence) scheduleLocked() {
	if v.scheduled || !v.loaded || (len(v.dirty) == 0 && len(v.pending) == 0) {
		return
	}
	v.scheduled = true
	time.AfterFunc(v.room.Parts().c.pres.cfg.Tick, v.flush)
}

// flush sends what changed since the last flush as one frame per
// link, then snapshots to new subscribers.
func (v *roomPresence) flush() {
	r := v.room
	r.Lock()
	defer r.Unlock()
	v.scheduled = false
	if !v.loaded || r.Parts().c.ctx.Err() != nil {
		return
	}
	conns := 0
	for _, m := range v.now {
		conns += m.Conns
	}
	counts := [2]int{len(v.now), conns}
	cl := r.Parts().c.class(r.Name())
	countsOnly := !cl.JoinLeaveEvents || len(v.now) > cl.Presence.MaxDiff
	var out *corralv1.Presence
	switch {
	case countsOnly:
		if !v.countsOnly || counts != v.sentCounts {
			out = &corralv1.Presence{Room: r.Name(), CountsOnly: true}
		}
		clear(v.dirty)
	case v.countsOnly:
		// Back under the limit: everyone gets the list again.
		clear(v.dirty)
		v.sent = cloneMembers(v.now)
		out = v.snapshotLocked()
	default:
		out = &corralv1.Presence{Room: r.Name()}
		for u := range v.dirty {
			old, was := v.sent[u]
			cur, is := v.now[u]
			switch {
			case is && !was:
				out.Joins = append(out.Joins, presenceMember(cur))
				v.sent[u] = cur
			case was && !is:
				out.Leaves = append(out.Leaves, u)
				delete(v.sent, u)
			case is && !sameMember(old, cur):
				out.Updates = append(out.Updates, presenceMember(cur))
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
		r.Parts().c.metrics.presenceFlushes.Inc()
		if len(v.links) > 0 {
			for _, part := range splitPresence(out, maxPresenceFrameBytes) {
				linkserver.EnqueueEach(v.links, frame.Presence(r.Name(), &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Presence{Presence: part}}))
			}
		}
	}
	if len(v.pending) == 0 {
		return
	}
	var snap []*corralv1.ServerFrame
	if countsOnly {
		snap = []*corralv1.ServerFrame{{Kind: &corralv1.ServerFrame_Presence{Presence: &corralv1.Presence{
			Room: r.Name(), Snapshot: true, CountsOnly: true, Members: uint32(counts[0]), Connections: uint32(counts[1]),
		}}}}
	} else {
		p := v.snapshotLocked()
		p.Snapshot = true
		for _, part := range splitPresence(p, maxPresenceFrameBytes) {
			snap = append(snap, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Presence{Presence: part}})
		}
	}
	for s, ep := range v.pending {
		delete(v.pending, s)
		if cur, ok := r.MembersLocked()[s]; !ok || cur != ep {
			continue
		}
		for _, f := range snap {
			ep.Link.Enqueue(frame.Conn(ep.Conn, f))
		}
		ep.Link.Enqueue(frame.PresenceMembership(ep.Conn, r.Name()))
		v.subs[s] = ep
		v.links[ep.Link]++
	}
}

// snapshotLocked lists sent, ordered by user id, with the counts.
// Lock must be held.
func (v *roomPresence) snapshotLocked() *corralv1.Presence {
	r := v.room
	p := &corralv1.Presence{Room: r.Name(), Snapshot: true, Joins: make([]*corralv1.PresenceMember, 0, len(v.sent))}
	conns := 0
	for _, m := range v.sent {
		p.Joins = append(p.Joins, presenceMember(m))
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

// unwatchLoop stops, every 10s, the store's changes of rooms
// this core no longer holds.
func (p *presenceState) unwatchLoop() {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	watched := make(map[string]bool)
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		var gone []string
		for room := range watched {
			if p.rooms.get(room) == nil {
				gone = append(gone, room)
				delete(watched, room)
			}
		}
		held := p.rooms.all()
		// Each room's lock apart, not under the table's: the table's lock
		// is not held across every room. A room dropped meanwhile is
		// found gone on the next tick.
		for _, r := range held {
			r.Lock()
			if r.Parts().pres.loaded || r.Parts().pres.loading {
				watched[r.Name()] = true
			}
			r.Unlock()
		}
		if len(gone) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
		_ = p.store.Unwatch(ctx, gone...)
		// A room that came back meanwhile may have watched before the
		// unwatch: watch again and read it again.
		for _, name := range gone {
			r := p.rooms.get(name)
			if r == nil {
				continue
			}
			r.Lock()
			want := r.Parts().pres.loaded || r.Parts().pres.loading
			r.Unlock()
			if want && p.store.Watch(ctx, name) == nil {
				watched[name] = true
				r.Lock()
				r.Parts().pres.reloadLocked()
				r.Unlock()
			}
		}
		cancel()
	}
}

// detach uncounts every room of s (after grace unless clean).
func (p *presenceState) detach(s *session, clean bool) {
	s.mu.Lock()
	rooms := make([]string, 0, len(s.pres))
	for room := range s.pres {
		rooms = append(rooms, room)
	}
	s.mu.Unlock()
	for _, room := range rooms {
		p.leave(s, room, clean)
	}
}

// recount counts again every connection this core holds in
// presence, after other cores swept it for dead (it could not heartbeat):
// without it, members connected here would stay missing.
func (p *presenceState) recount() {
	type entry struct {
		room, user string
		info       []byte
	}
	var all []entry
	for _, s := range p.attached.All() {
		s.mu.Lock()
		for room := range s.pres {
			info, ok := s.joinInfo[room]
			if !ok {
				info = s.info
			}
			all = append(all, entry{room, s.user, info})
		}
		s.mu.Unlock()
	}
	p.mu.Lock()
	for k, g := range p.grace {
		all = append(all, entry{k.room, g.user, nil})
	}
	p.mu.Unlock()
	p.logger.Warn("presence: this core was swept as dead; counting its connections again", "connections", len(all))
	for _, e := range all {
		ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
		if err := p.store.Add(ctx, e.room, e.user, nil, e.info); err != nil {
			p.logger.Warn("presence recount failed", "room", e.room, "err", err)
		}
		cancel()
	}
}
