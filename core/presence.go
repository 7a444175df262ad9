package core

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/corral-rt/corral/core/eventlog"
	croom "github.com/corral-rt/corral/core/room"
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
// were told (sent): package core/room's Presence, under the room's lock. Changes from any core reach the view through the
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
	pc := &corralv1.PresenceChanged{Member: croom.PresenceMember(ch.Member)}
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
		r.Presence().Change(ch)
	}
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
	r.Presence().EnsureLoaded(ctx)

	counted, gone := s.Count(r.Name())
	if gone {
		return
	}
	if !counted {
		key := graceKey{r.Name(), s.SessionID()}
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
		err = p.store.Add(ctx, r.Name(), s.UserID(), state, s.MemberInfo(r.Name()))
	case state != nil:
		err = p.store.SetState(ctx, r.Name(), s.UserID(), state)
	}
	if err != nil {
		s.Uncount(r.Name())
		p.failed(s, "presence", err, r.Name(), "")
		return
	}
	r.Presence().Subscribe(s)
}

// leave uncounts s in room: at once when clean, else after the
// grace window unless the session comes back.
func (p *presenceState) leave(s *session, room string, clean bool) {
	counted := s.Uncount(room)
	if !counted {
		return
	}
	remove := func() {
		ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
		defer cancel()
		if err := p.store.Remove(ctx, room, s.UserID()); err != nil {
			p.logger.Warn("presence remove failed", "room", room, "err", err)
		}
	}
	if clean {
		remove()
		return
	}
	key := graceKey{room, s.SessionID()}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.grace[key]; ok || p.ctx.Err() != nil {
		return
	}
	g := &graceEntry{user: s.UserID()}
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
	on := s.Counted(name)
	switch {
	case !on:
		s.SendErr(corralv1.Code_CODE_NOT_JOINED, "join the room with presence before setting presence", name, "")
		return
	case len(sp.GetState()) > p.cfg.MaxState:
		s.SendErr(corralv1.Code_CODE_TOO_LARGE, "presence state exceeds the server's limit", name, "")
		return
	}
	if err := p.store.SetState(ctx, name, s.UserID(), sp.GetState()); err != nil {
		p.failed(s, "presence", err, name, "")
	}
}

// query answers one page of a joined room's members.
func (p *presenceState) query(ctx context.Context, s *session, q *corralv1.PresenceQuery) {
	name := q.GetRoom()
	r := s.Room(name)
	if r == nil {
		s.SendErr(corralv1.Code_CODE_NOT_JOINED, "join the room before asking for its presence", name, "")
		return
	}
	limit := p.cfg.PageLimit
	if l := int(q.GetLimit()); l > 0 && l < limit {
		limit = l
	}
	members, ok := r.Presence().List()
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
		page.Members = append(page.Members, croom.PresenceMember(m))
	}
	if end < len(members) && end > i {
		page.Next = members[end-1].User
	}
	s.SendTo(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_PresencePage{PresencePage: page}})
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
			if r.Presence().Wanted() {
				watched[r.Name()] = true
			}
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
			if r.Presence().Wanted() && p.store.Watch(ctx, name) == nil {
				watched[name] = true
				r.Presence().Reload()
			}
		}
		cancel()
	}
}

// detach uncounts every room of s (after grace unless clean).
func (p *presenceState) detach(s *session, clean bool) {
	rooms, _ := s.CountedRooms(false)
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
		rooms, infos := s.CountedRooms(true)
		for i, room := range rooms {
			all = append(all, entry{room, s.UserID(), infos[i]})
		}
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
