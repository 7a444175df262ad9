package session

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/corral-rt/corral/core/frame"
	"github.com/corral-rt/corral/core/linkserver"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/sessions"
)

// Sessions and resume, top to bottom: a connection attaches (Attach)
// with a new session or resumes one (resume), taking it over from an
// older connection (takeOver); its rooms pass the door (Admission.Admit)
// and are joined at the client's positions (Join): each room keeps live
// messages for the session while the missed history is read in one
// batch (Reads.Missed), then the session goes live (GoLive: Joined, the
// replay, ReplayEnd, live traffic). When the connection ends, Detach
// takes the session out of its rooms; it stays resumable until its TTL,
// which TouchLoop extends while it is connected.

// maxInstance bounds Resume.instance.
const maxInstance = 64

// Lifecycle is a session's life on one core: attach, resume and the
// take-over, the joins and going live, detach, and keeping the attached
// sessions from expiring. It reaches the core only through its fields,
// set once by the core before any connection and never changed; its
// methods may be called concurrently (a session's own calls come from
// its connection's work, one at a time).
type Lifecycle struct {
	Store    sessions.Store
	Table    Table
	Rooms    Rooms
	Door     Admission
	Reads    Reads
	Presence Presence
	Events   Events
	Metrics  FlowMetrics
	Logger   *slog.Logger
	// Heartbeat and TTL are told to clients in Welcome; TTL also sets
	// how often TouchLoop touches.
	Heartbeat, TTL time.Duration
}

// Attach starts or resumes the session of a new connection, whose work
// queue is w (nil in tests that drive the core without one). It returns
// nil when the connection was refused (a close is already queued).
func (f *Lifecycle) Attach(ctx context.Context, l *linkserver.Link, conn uint64, w *Work, a *linkv1.Attach) *Session {
	id := a.GetIdentity()
	if id.GetUserId() == "" {
		l.Close(conn, corralv1.Code_CODE_UNAUTHENTICATED, "no verified identity", 0)
		return nil
	}
	hello := a.GetHello()
	ep := Endpoint{Link: l, Conn: conn}
	if r := hello.GetResume(); r != nil {
		return f.resume(ctx, ep, w, id, a.GetInfo(), a.GetProtocol(), r)
	}
	done := f.Metrics.StoreOp("session_create")
	st, err := f.Store.Create(ctx, id.GetUserId())
	done(err)
	if err != nil {
		f.Logger.Warn("session create failed", "err", err)
		l.Close(conn, corralv1.Code_CODE_UNAVAILABLE, "session store unavailable", 1000)
		return nil
	}
	s := New(st.ID, id.GetUserId(), ep, w, id, a.GetInfo(), a.GetProtocol())
	f.Table.Attach(s)
	l.Enqueue(frame.Session(conn, Welcome(st, id, false, f.Heartbeat, f.TTL)))
	return s
}

// resume continues an earlier session on a new connection: it verifies the
// token and the user, takes the session over from any older connection, and
// rejoins every room from where the client left it.
func (f *Lifecycle) resume(ctx context.Context, ep Endpoint, w *Work, id *corralv1.Identity, info []byte, protocol string, r *corralv1.Resume) *Session {
	done := f.Metrics.StoreOp("session_resume")
	at := sessions.Attempt{Instance: r.GetInstance(), N: r.GetAttempt()}
	if len(at.Instance) > maxInstance {
		ep.Link.Close(ep.Conn, corralv1.Code_CODE_BAD_FRAME, "resume.instance longer than 64 bytes", 0)
		return nil
	}
	// The store authorizes (token, user, attempt) before it changes
	// anything, and rotates the token.
	st, err := f.Store.Resume(ctx, r.GetSessionId(), r.GetResumeToken(), id.GetUserId(), at)
	done(err)
	if err != nil {
		code, reason, delayMs, known := ResumeRefusal(err)
		switch {
		case errors.Is(err, sessions.ErrStale):
			f.Metrics.StaleResume()
		case !known:
			f.Logger.Warn("session resume failed", "err", err)
		}
		ep.Link.Close(ep.Conn, code, reason, delayMs)
		return nil
	}
	s := New(st.ID, st.UserID, ep, w, id, info, protocol)
	old, droppedAt, dropped := f.Table.Attach(s)
	if dropped {
		f.Metrics.Reconnected(time.Since(droppedAt))
	}
	if old != nil {
		f.takeOver(old)
	}
	f.Metrics.Resumed()
	ep.Link.Enqueue(frame.Session(ep.Conn, Welcome(st, id, true, f.Heartbeat, f.TTL)))

	// Every room passes the door (Admit) as one batch: the client's
	// rooms in its order, then the store's by name.
	reqs := ResumeJoins(make([]*JoinReq, 0, len(r.GetRooms())+len(st.Rooms)), r, st.Rooms)
	reqs = f.Door.Admit(ctx, s, reqs)
	f.Join(ctx, s, reqs)
	return s
}

// takeOver detaches a session object whose connection was replaced by a
// resume elsewhere, and closes that older connection.
func (f *Lifecycle) takeOver(old *Session) {
	ep, rooms, _ := old.End(nil)
	for _, r := range rooms {
		r.Leave(old, nil)
		f.Rooms.ReleaseMember(r)
	}
	// The new connection takes the count over if it rejoins within grace.
	f.Presence.Detach(old, false)
	ep.Link.Close(ep.Conn, corralv1.Code_CODE_SESSION_TAKEN_OVER, "session resumed on another connection", 0)
}

// Join adds s to the rooms of reqs, which passed the door; it takes reqs
// over (its array is reused: Admission.Admit's result). Each room
// keeps live messages for s while the history s missed is read (one
// batched read for all rooms), then s goes live: Joined, the missed
// messages, then live traffic, with no gap and no duplicate at the seam.
func (f *Lifecycle) Join(ctx context.Context, s *Session, reqs []*JoinReq) {
	ep, ok := s.Endpoint()
	if !ok {
		return
	}
	// The joins that began, filtered into reqs' own array: a slice of
	// their own would be one allocation more a join (the reads are
	// ports, so the compiler cannot keep it on the stack).
	began := reqs[:0]
	defer func() {
		for _, q := range began {
			f.Rooms.Release(q.Room)
		}
	}()
	for _, q := range reqs {
		r, err := f.Rooms.Acquire(ctx, q.Name)
		if err != nil {
			f.Rooms.Failed(ctx, s, q, err)
			continue
		}
		q.Room = r
		gone := !s.AddRoom(q.Name, r)
		if gone {
			f.Rooms.Release(r)
			return
		}
		if !r.BeginJoin(s, ep, &q.Join) {
			f.Door.RefuseFull(ctx, s, q)
			continue
		}
		began = append(began, q)
	}
	f.Reads.Missed(ctx, began)
	f.Reads.Open(ctx, began) // growing messages' prefixes
	f.Reads.Old(ctx, began)  // keyed state older than the mirror keeps
	f.GoLive(ctx, s, ep, began)
}

// GoLive sends each join its replay page (croom.Room.GoLive); a join whose
// replay is sent whole goes live: the join event, presence and the
// session's stored position. A join with pages left goes on when the edge
// took this page (the core's replayTaken calls GoLive again). The
// positions of the rooms that went live are stored with one call after
// the loop (SetRooms; SetRoom for one room): a resume of n rooms waits for
// one store round trip, not n.
func (f *Lifecycle) GoLive(ctx context.Context, s *Session, ep Endpoint, qs []*JoinReq) {
	// The first room's position apart: a join of one room (the common
	// case) builds no map.
	var first string
	var firstPos sessions.Position
	var stored map[string]sessions.Position
	for _, q := range qs {
		pos, live := q.Room.GoLive(s, ep, &q.Join, pageWait{s, q})
		if !live {
			continue
		}
		f.Events.EmitJoined(s, q.Name, q.Resumed)
		if q.Presence {
			f.Presence.Join(ctx, s, q.Room, q.State)
		} else {
			f.Presence.Leave(s, q.Name, true) // rejoined without presence
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
		err = f.Store.SetRooms(ctx, s.SessionID(), stored)
	case first != "":
		err = f.Store.SetRoom(ctx, s.SessionID(), first, firstPos)
	}
	if err != nil {
		f.Logger.Warn("session store: set rooms failed", "session", s.SessionID(), "first", first, "rooms", max(len(stored), 1), "err", err)
	}
}

// Detach ends a connection's attachment: the session leaves its rooms' live
// fan-out but stays resumable until its TTL. A detach of a connection s
// is no longer attached to (taken over) does nothing.
func (f *Lifecycle) Detach(s *Session, l *linkserver.Link, conn uint64, clean bool) {
	_, rooms, ok := s.End(&Endpoint{Link: l, Conn: conn})
	if !ok {
		return
	}
	for _, r := range rooms {
		r.Leave(s, nil)
		f.Rooms.ReleaseMember(r)
	}
	f.Events.EmitDisconnected(s, rooms, clean)
	f.Presence.Detach(s, clean)
	f.Table.Detach(s, clean, time.Now())
	// Buffered, not awaited: a storm of drops must not take an in-flight
	// slot of the session store per connection (10,000 at once made the
	// creates of the rejoins that followed fail with "busy").
	f.Store.TouchLater(s.SessionID())
}

// TouchLoop keeps the sessions of connected clients from expiring, and
// forgets the losses of connection older than the TTL, every third of
// the TTL until ctx ends.
func (f *Lifecycle) TouchLoop(ctx context.Context) {
	period := f.TTL / 3
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f.Table.Sweep(time.Now().Add(-f.TTL))
		for _, s := range f.Table.All() {
			tctx, cancel := context.WithTimeout(ctx, period)
			if err := f.Store.Touch(tctx, s.SessionID()); err != nil && !errors.Is(err, sessions.ErrNotFound) {
				f.Logger.Warn("session touch failed", "session", s.SessionID(), "err", err)
			}
			cancel()
		}
	}
}

// pageWait is what q's room calls of the session while s goes live in it
// (croom.JoinHooks), under the room's lock: the wait for the edge to take
// a replay page.
type pageWait struct {
	s *Session
	q *JoinReq
}

func (w pageWait) WaitPage() { w.s.WaitPage(w.q) }
