package core

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/corral-rt/corral/core/door"
	"github.com/corral-rt/corral/core/eventlog"
	"github.com/corral-rt/corral/core/sessiontable"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/grants"
	"github.com/corral-rt/corral/hooks"
	"github.com/corral-rt/corral/roomclass"
	"github.com/corral-rt/corral/roompattern"
	"github.com/corral-rt/corral/sessions"
)

// The door: the one place where a client is let into rooms, and where its
// publishes and signals are authorized.
//
// A session may join a room when its token or a run-time grant allows it
// (package grants); it may publish and signal when, beside that, the room
// is not read-only for clients (its class's publish or signal is none:
// package roomclass). Run-time grants change through Grant and Revoke (core/api); a revoked join removes the
// user's sessions from the rooms it matches, on every core sharing the
// grants store (enforceGrants, grantsLoop). Every refusal is counted in
// corral_core_refused_total by reason.
//
// Every Join and every room of a resume passes admit before the session
// enters the room; every Publish and Signal passes the door's RefuseReadOnly and
// RefusePublish (core/door). A new check on membership (hooks, a
// refreshed token's claims) belongs here, so that no path into a room can
// skip it: a resume that bypassed the join checks once let one connection
// into 15,000 rooms (issue 17).

// admission is the core's side of the door (Core.adm): it lets a
// session into rooms (admit) and out of those its grants no longer allow
// (enforceGrants, enforceSession, grantsLoop), sends the refusals and
// counts them; the decisions are door.Door's. It reaches the rest of the
// core only through its fields, set once by New. Safe for concurrent use:
// it has no state of its own.
type admission struct {
	ctx      context.Context // ends when the core closes
	logger   *slog.Logger
	door     *door.Door
	class    func(room string) *roomclass.Class
	hooks    *hooks.Client
	maxRooms int // Config.MaxRoomsPerConn; 0: no bound
	metrics  *metrics
	sess     sessions.Store
	rooms    *roomTable // a refused or emptied room's release
	attached *sessiontable.Table[*session]
	events   *eventlog.Log[*session]
	pres     *presenceState
}

// admit passes the rooms a session asks to be in through the door and
// returns those it may join, in order. A Join is a batch of one; a resume
// is one batch of all its rooms, so it costs at most MaxRoomsPerConn joins
// however many rooms it names.
//
// For each room, in order: the name must be valid (CODE_INVALID_ARGUMENT);
// the token's or the run-time grants must allow joining it
// (CODE_FORBIDDEN); the application's backend must allow it when the Join
// hook applies to the room (hookJoin: every such room of the batch in one
// backend call); and the connection must stay within MaxRoomsPerConn,
// counting the rooms it is in and those admitted before in the batch
// (CODE_LIMIT_EXCEEDED). A refused join is answered with an Error frame. A
// refused room of a resume is answered with Left carrying the code and is
// forgotten by the session store, so refused rooms do not come back on the
// next resume. A grants store that cannot answer refuses a join
// (CODE_UNAVAILABLE) but not a resumed room: the token decides, so an
// outage does not cost sessions their rooms.
func (a *admission) admit(ctx context.Context, s *session, reqs []*joinReq) []*joinReq {
	g, gerr := a.door.Grants().Get(ctx, s.UserID())
	if gerr != nil {
		a.metrics.refuse(refusedGrantsErr)
		a.logger.Warn("grants store unavailable", "user", s.UserID(), "err", gerr)
	}
	joined := s.RoomNames()
	n := len(joined)
	in := make(map[string]bool, len(reqs))
	for _, name := range joined {
		in[name] = true
	}
	cands := reqs[:0:0]
	for _, q := range reqs {
		if err := a.door.ValidRoom(q.Name); err != nil {
			a.metrics.refuse(refusedInvalid)
			a.refuseRoom(ctx, s, q, corralv1.Code_CODE_INVALID_ARGUMENT, err.Error())
			continue
		}
		var ok bool
		switch {
		case gerr == nil:
			ok = grants.Allows(g, grants.Join, s.Identity().GetJoin(), q.Name)
		case q.Resumed:
			ok = roompattern.Match(s.Identity().GetJoin(), q.Name)
		default:
			a.refuseRoom(ctx, s, q, corralv1.Code_CODE_UNAVAILABLE, "grants store unavailable")
			continue
		}
		if !ok {
			a.metrics.refuse(refusedJoin)
			a.refuseRoom(ctx, s, q, corralv1.Code_CODE_FORBIDDEN, "the token does not grant joining this room")
			continue
		}
		cands = append(cands, q)
	}
	cands = a.hookJoin(ctx, s, cands)
	limit := a.maxRooms
	out := reqs[:0:0]
	for _, q := range cands {
		if !in[q.Name] {
			if limit > 0 && n >= limit {
				a.metrics.refuse(refusedRooms)
				a.refuseRoom(ctx, s, q, corralv1.Code_CODE_LIMIT_EXCEEDED,
					fmt.Sprintf("at most %d rooms per connection: leave one first", limit))
				continue
			}
			n++
			in[q.Name] = true
		}
		out = append(out, q)
	}
	return out
}

// refuseFull refuses q: its room holds its class's max-members already.
// The room was acquired for q: it is released here.
func (a *admission) refuseFull(ctx context.Context, s *session, q *joinReq) {
	s.DropRoomIf(q.Name, q.Room)
	a.rooms.release(q.Room)
	a.metrics.refuse(refusedFull)
	a.refuseRoom(ctx, s, q, corralv1.Code_CODE_LIMIT_EXCEEDED, "the room is full (its class's max-members)")
}

// hookJoin asks the application's backend (the Join hook) about the
// rooms of reqs its policy names, all in one batch that the hooks client
// coalesces with other sessions' joins, and returns the rooms it allows.
// An admission is cached for the room class's hooks.join-cache-ttl. When
// the backend cannot answer, the room class's hooks.join-policy applies:
// closed refuses with CODE_UNAVAILABLE (retry later); allow-known lets
// resumed rooms through unchecked (corral_hook_unchecked_total).
func (a *admission) hookJoin(ctx context.Context, s *session, reqs []*joinReq) []*joinReq {
	h := a.hooks
	if h == nil || len(reqs) == 0 {
		return reqs
	}
	var pairs []*corralv1.JoinPair
	asked := make([]bool, len(reqs))
	for i, q := range reqs {
		if a.door.JoinHooked(q.Name) {
			asked[i] = true
			pairs = append(pairs, &corralv1.JoinPair{UserId: s.UserID(), Room: q.Name, SessionId: s.SessionID(), Resumed: q.Resumed})
		}
	}
	if len(pairs) == 0 {
		return reqs
	}
	res, err := h.Join(ctx, pairs, &hooks.JoinOptions{CacheTTL: a.door.JoinCacheTTL})
	if err != nil {
		a.logger.Warn("join hook unavailable", "session", s.SessionID(), "rooms", len(pairs), "err", err)
	}
	out := reqs[:0:0]
	k := 0
	for i, q := range reqs {
		if !asked[i] {
			out = append(out, q)
			continue
		}
		k++
		switch {
		case err != nil && q.Resumed && a.class(q.Name).Hooks.JoinPolicy == roomclass.AllowKnown:
			h.Unchecked(hooks.HookJoin, 1)
			out = append(out, q)
		case err != nil:
			a.metrics.refuse(refusedHookDown)
			a.refuseRetry(ctx, s, q, "the application could not check this join: retry later", hooks.RetryAfter(err))
		case res[k-1].GetRefusal() != nil:
			a.metrics.refuse(refusedHookJoin)
			code, reason := hooks.ClientRefusal(res[k-1].GetRefusal(), corralv1.Code_CODE_FORBIDDEN)
			a.refuseRoom(ctx, s, q, code, reason)
		default:
			// The hook's info (checked by package hooks) is the
			// member's in this room; asked again at each resume.
			s.SetJoinInfo(q.Name, res[k-1].GetInfo())
			out = append(out, q)
		}
	}
	return out
}

// refuseRetry refuses q with CODE_UNAVAILABLE and when to retry: an Error
// frame for a join; Left for a resumed room, which the session keeps in
// the store (the refusal is no one's decision: the next resume asks
// again).
func (a *admission) refuseRetry(ctx context.Context, s *session, q *joinReq, reason string, after time.Duration) {
	if !q.Resumed {
		s.SendRetry(corralv1.Code_CODE_UNAVAILABLE, reason, q.Name, "", after)
		return
	}
	s.SendTo(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Left{Left: &corralv1.Left{
		Room: q.Name, Code: corralv1.Code_CODE_UNAVAILABLE, Reason: reason,
	}}})
}

// refuseRoom tells the client that q was not admitted: an Error frame for
// a join, Left for a resumed room (which the session store then forgets).
func (a *admission) refuseRoom(ctx context.Context, s *session, q *joinReq, code corralv1.Code, reason string) {
	if !q.Resumed {
		s.SendErr(code, reason, q.Name, "")
		return
	}
	s.SendTo(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Left{Left: &corralv1.Left{
		Room: q.Name, Code: code, Reason: reason,
	}}})
	if q.Stored {
		if err := a.sess.DeleteRoom(ctx, s.SessionID(), q.Name); err != nil {
			a.logger.Warn("session store: delete room failed", "session", s.SessionID(), "room", q.Name, "err", err)
		}
	}
}

// enforceGrants removes user's live sessions from every room their grants
// no longer allow: each gets Left with CODE_FORBIDDEN. It returns the
// sessions concerned and how many memberships ended.
func (a *admission) enforceGrants(ctx context.Context, user string) ([]string, int) {
	mine := a.attached.OfUser(user)
	var ids []string
	left := 0
	for _, s := range mine {
		if n := a.enforceSession(ctx, s, refusedRevoked, "the join grant was revoked"); n > 0 {
			ids = append(ids, s.SessionID())
			left += n
		}
	}
	slices.Sort(ids)
	return ids, left
}

// enforceSession removes s from every room its grants (its identity's and
// the run-time ones) no longer allow: each gets Left with CODE_FORBIDDEN
// and reason, counted under metric. It returns how many memberships
// ended. A grants store that cannot answer removes no one.
func (a *admission) enforceSession(ctx context.Context, s *session, metric refuseReason, reason string) int {
	names := s.RoomNames()
	left := 0
	for _, name := range names {
		ok, err := a.door.Granted(ctx, s.UserID(), s.Identity(), grants.Join, name)
		if ok || err != nil {
			continue
		}
		r := s.DropRoom(name)
		if r == nil {
			continue
		}
		a.metrics.refuse(metric)
		r.Leave(s, &corralv1.Left{Room: name, Code: corralv1.Code_CODE_FORBIDDEN, Reason: reason})
		a.events.EmitLeft(s, name)
		a.pres.leave(s, name, true)
		a.rooms.forgetIdle(r)
		if err := a.sess.DeleteRoom(ctx, s.SessionID(), name); err != nil {
			a.logger.Warn("session store: delete room failed", "session", s.SessionID(), "room", name, "err", err)
		}
		left++
	}
	return left
}

// grantsLoop applies the changes the grants store announces (from this
// core or another) to this core's sessions, one user at a time. The
// store's callback only records the user, so it never blocks.
func (a *admission) grantsLoop() {
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-a.door.Wake():
		}
		users := a.door.TakeChanged()
		if _, any := users[grants.AnyUser]; any {
			// Announcements may have been missed: every live user.
			delete(users, grants.AnyUser)
			for _, s := range a.attached.All() {
				users[s.UserID()] = struct{}{}
			}
		}
		for user := range users {
			ctx, cancel := context.WithTimeout(a.ctx, 10*time.Second)
			a.door.Enforce(func() { a.enforceGrants(ctx, user) })
			cancel()
		}
	}
}
