package core

import (
	"context"
	"errors"
	"maps"
	"time"

	"github.com/corral-rt/corral/core/frame"
	"github.com/corral-rt/corral/core/linkserver"
	csession "github.com/corral-rt/corral/core/session"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/sessions"
)

// Sessions and resume, top to bottom (what needs none of the core, the
// Welcome, a refused resume's close and the rooms a resume rejoins, is
// package core/session's): a connection attaches (attach) with
// a new session or resumes one (resume), taking it over from an older
// connection (takeOver); its rooms pass the door (door.go, admit) and are
// joined at the client's positions (join): each room keeps live messages
// for the session while the missed history is read in one batch
// (readMissed, replay.go), then the session goes live (room.goLive:
// Joined, the replay, ReplayEnd, live traffic). When the connection ends, detach takes
// the session out of its rooms; it stays resumable until its TTL, which
// touchLoop extends while it is connected.

// maxInstance bounds Resume.instance.
const maxInstance = 64

// attach starts or resumes the session of a new connection, whose work
// queue is w (nil in tests that drive the core without one). It returns
// nil when the connection was refused (a close is already queued).
func (c *Core) attach(ctx context.Context, l *linkserver.Link, conn uint64, w *connWork, a *linkv1.Attach) *session {
	id := a.GetIdentity()
	if id.GetUserId() == "" {
		l.Close(conn, corralv1.Code_CODE_UNAUTHENTICATED, "no verified identity", 0)
		return nil
	}
	hello := a.GetHello()
	ep := endpoint{Link: l, Conn: conn}
	if r := hello.GetResume(); r != nil {
		return c.resume(ctx, ep, w, id, a.GetInfo(), a.GetProtocol(), r)
	}
	done := c.metrics.storeOp("session_create")
	st, err := c.sess.Create(ctx, id.GetUserId())
	done(err)
	if err != nil {
		c.cfg.Logger.Warn("session create failed", "err", err)
		l.Close(conn, corralv1.Code_CODE_UNAVAILABLE, "session store unavailable", 1000)
		return nil
	}
	s := csession.New(st.ID, id.GetUserId(), ep, w, id, a.GetInfo(), a.GetProtocol())
	c.attached.Attach(s)
	l.Enqueue(frame.Session(conn, csession.Welcome(st, id, false, c.cfg.Heartbeat, c.cfg.SessionTTL)))
	return s
}

// resume continues an earlier session on a new connection: it verifies the
// token and the user, takes the session over from any older connection, and
// rejoins every room from where the client left it.
func (c *Core) resume(ctx context.Context, ep endpoint, w *connWork, id *corralv1.Identity, info []byte, protocol string, r *corralv1.Resume) *session {
	done := c.metrics.storeOp("session_resume")
	at := sessions.Attempt{Instance: r.GetInstance(), N: r.GetAttempt()}
	if len(at.Instance) > maxInstance {
		ep.Link.Close(ep.Conn, corralv1.Code_CODE_BAD_FRAME, "resume.instance longer than 64 bytes", 0)
		return nil
	}
	// The store authorizes (token, user, attempt) before it changes
	// anything, and rotates the token.
	st, err := c.sess.Resume(ctx, r.GetSessionId(), r.GetResumeToken(), id.GetUserId(), at)
	done(err)
	if err != nil {
		code, reason, delayMs, known := csession.ResumeRefusal(err)
		switch {
		case errors.Is(err, sessions.ErrStale):
			c.metrics.refuse(refusedStaleResume)
		case !known:
			c.cfg.Logger.Warn("session resume failed", "err", err)
		}
		ep.Link.Close(ep.Conn, code, reason, delayMs)
		return nil
	}
	s := csession.New(st.ID, st.UserID, ep, w, id, info, protocol)
	old, droppedAt, dropped := c.attached.Attach(s)
	if dropped {
		c.metrics.reconnectSeconds.Observe(time.Since(droppedAt).Seconds())
	}
	if old != nil {
		c.takeOver(old)
	}
	c.metrics.resumes.Inc()
	ep.Link.Enqueue(frame.Session(ep.Conn, csession.Welcome(st, id, true, c.cfg.Heartbeat, c.cfg.SessionTTL)))

	// Every room passes the door (admit) as one batch: the client's
	// rooms in its order, then the store's by name.
	reqs := csession.ResumeJoins(make([]*joinReq, 0, len(r.GetRooms())+len(st.Rooms)), r, st.Rooms)
	reqs = c.adm.admit(ctx, s, reqs)
	c.join(ctx, s, reqs)
	return s
}

// takeOver detaches a session object whose connection was replaced by a
// resume elsewhere, and closes that older connection.
func (c *Core) takeOver(old *session) {
	ep, rooms, _ := old.End(nil)
	for _, r := range rooms {
		r.Leave(old, nil)
		c.releaseMember(r)
	}
	// The new connection takes the count over if it rejoins within grace.
	c.pres.detach(old, false)
	ep.Link.Close(ep.Conn, corralv1.Code_CODE_SESSION_TAKEN_OVER, "session resumed on another connection", 0)
}

// join adds s to rooms. Each room keeps live messages for s while the
// history s missed is read (one batched read for all rooms), then s goes
// live: Joined, the missed messages, then live traffic, with no gap and no
// duplicate at the seam.
func (c *Core) join(ctx context.Context, s *session, reqs []*joinReq) {
	ep, ok := s.Endpoint()
	if !ok {
		return
	}
	var began []*joinReq
	defer func() {
		for _, q := range began {
			c.releaseRoom(q.Room)
		}
	}()
	for _, q := range reqs {
		r, err := c.acquireRoom(ctx, q.Name, true)
		if err != nil {
			c.joinFailed(ctx, s, q, err)
			continue
		}
		q.Room = r
		gone := !s.AddRoom(q.Name, r)
		if gone {
			c.releaseRoom(r)
			return
		}
		if !r.BeginJoin(s, ep, &q.Join) {
			c.adm.refuseFull(ctx, s, q)
			continue
		}
		began = append(began, q)
	}
	c.readMissed(ctx, began)
	c.grow.readOpen(ctx, began) // growing messages' prefixes (grow.go)
	c.keyed.readOld(ctx, began) // keyed state older than the mirror keeps (keyed.go)
	goLive(ctx, c, s, ep, began)
}

// goLive sends each join its replay page (croom.Room.GoLive); a join whose
// replay is sent whole goes live: the join event, presence and the
// session's stored position. A join with pages left goes on in
// replayTaken (replay.go) once the edge took this page. The positions of
// the rooms that went live are stored with one call after the loop
// (SetRooms; SetRoom for one room): a resume of n rooms waits for one
// store round trip, not n.
func goLive(ctx context.Context, c *Core, s *session, ep endpoint, qs []*joinReq) {
	// The first room's position apart: a join of one room (the common
	// case) builds no map.
	var first string
	var firstPos sessions.Position
	var stored map[string]sessions.Position
	for _, q := range qs {
		pos, live := q.Room.GoLive(s, ep, &q.Join, joinHooks{s: s, q: q})
		if !live {
			continue
		}
		c.events.EmitJoined(s, q.Name, q.Resumed)
		if q.Presence {
			c.pres.join(ctx, s, q.Room, q.State)
		} else {
			c.pres.leave(s, q.Name, true) // rejoined without presence
		}
		_, _, epoch := q.Room.Info()
		p := sessions.Position{Seq: pos, Epoch: epoch}
		switch {
		case first == "":
			first, firstPos = q.Name, p
		case stored == nil:
			stored = make(map[string]sessions.Position, len(qs))
			stored[first] = firstPos
			fallthrough
		default:
			stored[q.Name] = p
		}
	}
	var err error
	switch {
	case stored != nil:
		err = c.sess.SetRooms(ctx, s.SessionID(), stored)
	case first != "":
		err = c.sess.SetRoom(ctx, s.SessionID(), first, firstPos)
	}
	if err != nil {
		c.cfg.Logger.Warn("session store: set rooms failed", "session", s.SessionID(), "first", first, "rooms", max(len(stored), 1), "err", err)
	}
}

// detach ends a connection's attachment: the session leaves its rooms' live
// fan-out but stays resumable until its TTL.
func (c *Core) detach(s *session, l *linkserver.Link, conn uint64, clean bool) {
	_, rooms, ok := s.End(&endpoint{Link: l, Conn: conn})
	if !ok {
		return
	}
	for _, r := range rooms {
		r.Leave(s, nil)
		c.releaseMember(r)
	}
	c.events.EmitDisconnected(s, maps.Keys(rooms), clean)
	c.pres.detach(s, clean)
	c.attached.Detach(s, clean, time.Now())
	// Buffered, not awaited: a storm of drops must not take an in-flight
	// slot of the session store per connection (10,000 at once made the
	// creates of the rejoins that followed fail with "busy").
	c.sess.TouchLater(s.SessionID())
}

// touchLoop keeps the sessions of connected clients from expiring.
func (c *Core) touchLoop() {
	defer c.wg.Done()
	period := c.cfg.SessionTTL / 3
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		c.attached.Sweep(time.Now().Add(-c.cfg.SessionTTL))
		for _, s := range c.attached.All() {
			ctx, cancel := context.WithTimeout(c.ctx, period)
			if err := c.sess.Touch(ctx, s.SessionID()); err != nil && !errors.Is(err, sessions.ErrNotFound) {
				c.cfg.Logger.Warn("session touch failed", "session", s.SessionID(), "err", err)
			}
			cancel()
		}
	}
}
