package core

import (
	"context"
	"fmt"

	"github.com/corral-rt/corral/auth"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/grants"
)

// The door: the one place where a client is let into rooms, and where its
// publishes and signals are authorized. Every Join and every room of a
// resume passes admit before the session enters the room; every Publish
// and Signal passes refusePublish. A new check on membership (hooks, a
// refreshed token's claims) belongs here, so that no path into a room can
// skip it: a resume that bypassed the join checks once let one connection
// into 15,000 rooms (issue 17).

// admit passes the rooms a session asks to be in through the door and
// returns those it may join, in order. A Join is a batch of one; a resume
// is one batch of all its rooms, so it costs at most MaxRoomsPerConn joins
// however many rooms it names.
//
// For each room, in order: the name must be valid (CODE_INVALID_ARGUMENT);
// the token's or the run-time grants must allow joining it
// (CODE_FORBIDDEN); and the connection must stay within MaxRoomsPerConn,
// counting the rooms it is in and those admitted before in the batch
// (CODE_LIMIT_EXCEEDED). A refused join is answered with an Error frame. A
// refused room of a resume is answered with Left carrying the code and is
// forgotten by the session store, so refused rooms do not come back on the
// next resume. A grants store that cannot answer refuses a join
// (CODE_UNAVAILABLE) but not a resumed room: the token decides, so an
// outage does not cost sessions their rooms.
func (c *Core) admit(ctx context.Context, s *session, reqs []*joinReq) []*joinReq {
	g, gerr := c.grants.Get(ctx, s.user)
	if gerr != nil {
		c.metrics.refused.WithLabelValues(refusedGrantsErr).Inc()
		c.cfg.Logger.Warn("grants store unavailable", "user", s.user, "err", gerr)
	}
	s.mu.Lock()
	n := len(s.rooms)
	in := make(map[string]bool, len(reqs))
	for _, q := range reqs {
		if _, ok := s.rooms[q.name]; ok {
			in[q.name] = true
		}
	}
	s.mu.Unlock()
	limit := c.cfg.MaxRoomsPerConn
	out := reqs[:0:0]
	for _, q := range reqs {
		if err := c.validRoom(q.name); err != nil {
			c.metrics.refused.WithLabelValues(refusedInvalid).Inc()
			c.refuseRoom(ctx, s, q, corralv1.Code_CODE_INVALID_ARGUMENT, err.Error())
			continue
		}
		var ok bool
		switch {
		case gerr == nil:
			ok = grants.Allows(g, grants.Join, s.ident.Load().GetJoin(), q.name)
		case q.resumed:
			ok = auth.Match(s.ident.Load().GetJoin(), q.name)
		default:
			c.refuseRoom(ctx, s, q, corralv1.Code_CODE_UNAVAILABLE, "grants store unavailable")
			continue
		}
		if !ok {
			c.metrics.refused.WithLabelValues(refusedJoin).Inc()
			c.refuseRoom(ctx, s, q, corralv1.Code_CODE_FORBIDDEN, "the token does not grant joining this room")
			continue
		}
		if !in[q.name] {
			if limit > 0 && n >= limit {
				c.metrics.refused.WithLabelValues(refusedRooms).Inc()
				c.refuseRoom(ctx, s, q, corralv1.Code_CODE_LIMIT_EXCEEDED,
					fmt.Sprintf("at most %d rooms per connection: leave one first", limit))
				continue
			}
			n++
			in[q.name] = true
		}
		out = append(out, q)
	}
	return out
}

// refuseRoom tells the client that q was not admitted: an Error frame for
// a join, Left for a resumed room (which the session store then forgets).
func (c *Core) refuseRoom(ctx context.Context, s *session, q *joinReq, code corralv1.Code, reason string) {
	if !q.resumed {
		s.sendErr(code, reason, q.name, "")
		return
	}
	s.sendTo(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Left{Left: &corralv1.Left{
		Room: q.name, Code: code, Reason: reason,
	}}})
	if q.stored {
		if err := c.sess.DeleteRoom(ctx, s.id, q.name); err != nil {
			c.cfg.Logger.Warn("session store: delete room failed", "session", s.id, "room", q.name, "err", err)
		}
	}
}

// refusePublish checks a client publish or signal for the read-only
// policy and the grants. It answers a refusal itself and reports true.
func (c *Core) refusePublish(ctx context.Context, s *session, name, ref string) bool {
	if auth.Match(c.cfg.ReadOnlyRooms, name) {
		c.metrics.refused.WithLabelValues(refusedReadOnly).Inc()
		s.sendErr(corralv1.Code_CODE_FORBIDDEN, "the room is read-only for clients", name, ref)
		return true
	}
	ok, err := c.granted(ctx, s.user, s.ident.Load(), grants.Publish, name)
	switch {
	case err != nil:
		s.sendErr(corralv1.Code_CODE_UNAVAILABLE, "grants store unavailable", name, ref)
		return true
	case !ok:
		c.metrics.refused.WithLabelValues(refusedPublish).Inc()
		s.sendErr(corralv1.Code_CODE_FORBIDDEN, "the token does not grant publishing to this room", name, ref)
		return true
	}
	return false
}
