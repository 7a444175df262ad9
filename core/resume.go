package core

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"time"

	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/sessions"
)

// Sessions and resume, top to bottom: a connection attaches (attach) with
// a new session or resumes one (resume), taking it over from an older
// connection (takeOver); its rooms pass the door (door.go, admit) and are
// joined at the client's positions (join): each room keeps live messages
// for the session while the missed history is read in one batch
// (readMissed), then the session goes live (room.goLive: Joined, the
// replay, ReplayEnd, live traffic). When the connection ends, detach takes
// the session out of its rooms; it stays resumable until its TTL, which
// touchLoop extends while it is connected.

// maxInstance bounds Resume.instance.
const maxInstance = 64

// attach starts or resumes the session of a new connection, whose work
// queue is w (nil in tests that drive the core without one). It returns
// nil when the connection was refused (a close is already queued).
func (c *Core) attach(ctx context.Context, l *link, conn uint64, w *connWork, a *linkv1.Attach) *session {
	id := a.GetIdentity()
	if id.GetUserId() == "" {
		l.close(conn, corralv1.Code_CODE_UNAUTHENTICATED, "no verified identity", 0)
		return nil
	}
	hello := a.GetHello()
	ep := endpoint{link: l, conn: conn}
	if r := hello.GetResume(); r != nil {
		return c.resume(ctx, ep, w, id, a.GetInfo(), r)
	}
	done := c.metrics.storeOp("session_create")
	st, err := c.sess.Create(ctx, id.GetUserId())
	done(err)
	if err != nil {
		c.cfg.Logger.Warn("session create failed", "err", err)
		l.close(conn, corralv1.Code_CODE_UNAVAILABLE, "session store unavailable", 1000)
		return nil
	}
	s := &session{id: st.ID, user: id.GetUserId(), ep: ep, work: w, rooms: make(map[string]*room), info: a.GetInfo()}
	s.ident.Store(id)
	c.attached.attach(s)
	l.enqueue(sessionFrame(conn, c.welcome(st, id, false)))
	return s
}

func (c *Core) welcome(st *sessions.Session, id *corralv1.Identity, resumed bool) *corralv1.ServerFrame {
	return &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Welcome{Welcome: &corralv1.Welcome{
		SessionId:    st.ID,
		ResumeToken:  st.Token,
		UserId:       st.UserID,
		Resumed:      resumed,
		HeartbeatMs:  uint32(c.cfg.Heartbeat / time.Millisecond),
		SessionTtlMs: uint32(c.cfg.SessionTTL / time.Millisecond),
		ExpiresUnix:  id.GetExpiresUnix(),
	}}}
}

// resume continues an earlier session on a new connection: it verifies the
// token and the user, takes the session over from any older connection, and
// rejoins every room from where the client left it.
func (c *Core) resume(ctx context.Context, ep endpoint, w *connWork, id *corralv1.Identity, info []byte, r *corralv1.Resume) *session {
	done := c.metrics.storeOp("session_resume")
	at := sessions.Attempt{Instance: r.GetInstance(), N: r.GetAttempt()}
	if len(at.Instance) > maxInstance {
		ep.link.close(ep.conn, corralv1.Code_CODE_BAD_FRAME, "resume.instance longer than 64 bytes", 0)
		return nil
	}
	// The store authorizes (token, user, attempt) before it changes
	// anything, and rotates the token.
	st, err := c.sess.Resume(ctx, r.GetSessionId(), r.GetResumeToken(), id.GetUserId(), at)
	done(err)
	switch {
	case errors.Is(err, sessions.ErrStale):
		// The client gave up on this attempt and holds the session on a
		// newer connection: leave that one alone.
		c.metrics.refused.WithLabelValues("stale_resume").Inc()
		ep.link.close(ep.conn, corralv1.Code_CODE_SESSION_TAKEN_OVER, "a newer resume attempt of this client holds the session", 0)
		return nil
	case errors.Is(err, sessions.ErrNotFound):
		ep.link.close(ep.conn, corralv1.Code_CODE_SESSION_EXPIRED, "session unknown or expired: connect without resume", 0)
		return nil
	case errors.Is(err, sessions.ErrTokenMismatch):
		ep.link.close(ep.conn, corralv1.Code_CODE_RESUME_REFUSED, "resume token does not match (tokens rotate: use the latest Welcome's)", 0)
		return nil
	case errors.Is(err, sessions.ErrUserMismatch):
		ep.link.close(ep.conn, corralv1.Code_CODE_RESUME_REFUSED, "session belongs to another user", 0)
		return nil
	case err != nil:
		c.cfg.Logger.Warn("session resume failed", "err", err)
		ep.link.close(ep.conn, corralv1.Code_CODE_UNAVAILABLE, "session store unavailable", 1000)
		return nil
	}
	s := &session{id: st.ID, user: st.UserID, ep: ep, work: w, rooms: make(map[string]*room), info: info}
	s.ident.Store(id)
	old, droppedAt, dropped := c.attached.attach(s)
	if dropped {
		c.metrics.reconnectSeconds.Observe(time.Since(droppedAt).Seconds())
	}
	if old != nil {
		c.takeOver(old)
	}
	c.metrics.resumes.Inc()
	ep.link.enqueue(sessionFrame(ep.conn, c.welcome(st, id, true)))

	// The client's own positions win: it knows what it processed. Rooms
	// the store knows but the client did not mention resume from the last
	// ack. Every room passes the door (admit) as one batch: the client's
	// rooms in its order, then the store's by name.
	reqs := make([]*joinReq, 0, len(r.GetRooms())+len(st.Rooms))
	seen := make(map[string]bool, cap(reqs))
	for _, p := range r.GetRooms() {
		if seen[p.GetRoom()] {
			continue
		}
		seen[p.GetRoom()] = true
		_, stored := st.Rooms[p.GetRoom()]
		reqs = append(reqs, &joinReq{name: p.GetRoom(), since: p.GetSeq(), epoch: p.GetEpoch(),
			position: true, resumed: true, stored: stored, presence: p.GetPresence()})
	}
	rest := make([]string, 0, len(st.Rooms))
	for room := range st.Rooms {
		if !seen[room] {
			rest = append(rest, room)
		}
	}
	slices.Sort(rest)
	for _, room := range rest {
		pos := st.Rooms[room]
		reqs = append(reqs, &joinReq{name: room, since: pos.Seq, epoch: pos.Epoch,
			position: true, resumed: true, stored: true})
	}
	reqs = c.admit(ctx, s, reqs)
	c.join(ctx, s, reqs)
	return s
}

// takeOver detaches a session object whose connection was replaced by a
// resume elsewhere, and closes that older connection.
func (c *Core) takeOver(old *session) {
	old.mu.Lock()
	ep := old.ep
	rooms := old.rooms
	old.rooms = nil
	old.gone = true
	old.mu.Unlock()
	for _, r := range rooms {
		r.leave(old, nil)
		c.releaseMember(r)
	}
	// The new connection takes the count over if it rejoins within grace.
	c.presenceDetach(old, false)
	ep.link.close(ep.conn, corralv1.Code_CODE_SESSION_TAKEN_OVER, "session resumed on another connection", 0)
}

// join adds s to rooms. Each room keeps live messages for s while the
// history s missed is read (one batched read for all rooms), then s goes
// live: Joined, the missed messages, then live traffic, with no gap and no
// duplicate at the seam.
func (c *Core) join(ctx context.Context, s *session, reqs []*joinReq) {
	ep, ok := s.endpoint()
	if !ok {
		return
	}
	var began []*joinReq
	defer func() {
		for _, q := range began {
			c.releaseRoom(q.room)
		}
	}()
	for _, q := range reqs {
		r, err := c.acquireRoom(ctx, q.name, true)
		if err != nil {
			c.storeFailed(s, "join", err, q.name, "")
			continue
		}
		q.room = r
		s.mu.Lock()
		gone := s.gone
		if !gone {
			s.rooms[q.name] = r
		}
		s.mu.Unlock()
		if gone {
			c.releaseRoom(r)
			return
		}
		if !r.beginJoin(s, ep, q) {
			c.refuseFull(ctx, s, q)
			continue
		}
		began = append(began, q)
	}
	c.readMissed(ctx, began)
	for _, q := range began {
		pos, live := q.room.goLive(s, ep, q)
		if !live {
			continue
		}
		c.events.emitJoined(s, q.name, q.resumed)
		if q.presence {
			c.presenceJoin(ctx, s, q.room, q.state)
		} else {
			c.presenceLeave(s, q.name, true) // rejoined without presence
		}
		q.room.mu.Lock()
		epoch := q.room.epoch
		q.room.mu.Unlock()
		if err := c.sess.SetRoom(ctx, s.id, q.name, sessions.Position{Seq: pos, Epoch: epoch}); err != nil {
			c.cfg.Logger.Warn("session store: set room failed", "session", s.id, "room", q.name, "err", err)
		}
	}
}

// readMissed reads, in one batch, the history each joining room needs:
// (since, target]. A page limit may need further reads for long absences.
func (c *Core) readMissed(ctx context.Context, reqs []*joinReq) {
	var todo []*joinReq
	for _, q := range reqs {
		if q.replay {
			q.readOK = true
			todo = append(todo, q)
		}
	}
	for len(todo) > 0 {
		qs := make([]history.Query, len(todo))
		for i, q := range todo {
			after := q.since
			if n := len(q.msgs); n > 0 {
				after = q.msgs[n-1].GetSeq()
			}
			qs[i] = history.Query{Room: q.name, After: after, Limit: int(min(q.target-after, history.MaxPage))}
		}
		done := c.metrics.storeOp("read_many")
		pages, err := c.readJoined(ctx, qs)
		done(err)
		if err != nil {
			for _, q := range todo {
				q.readOK = false // goLive turns this into a Reset
			}
			c.cfg.Logger.Warn("history read for join failed", "err", err)
			return
		}
		next := todo[:0]
		for i, q := range todo {
			p := pages[i]
			if p.Epoch != q.roomEpoch || len(p.Messages) == 0 || p.Messages[0].GetSeq() != qs[i].After+1 {
				q.readOK = false // trimmed, expired, or another epoch
				continue
			}
			q.msgs = append(q.msgs, p.Messages...)
			if last := p.Messages[len(p.Messages)-1].GetSeq(); last < q.target && p.More {
				next = append(next, q)
			}
		}
		todo = next
	}
}

// missedReads batches the history reads of joins (readMissed) that
// arrive together, from many connections: while one batch is read, the
// reads asked meanwhile queue, and go to the store together in the next
// one, one ReadMany (one pipelined round trip); the reads of one room
// whose ranges fit one page merge into one query. A rejoin or resume storm
// then costs about one read per room per round trip, not one per session;
// a lone join waits for nothing. The zero value is ready.
type missedReads struct {
	mu      sync.Mutex // guards the following fields
	queue   []*missedCall
	reading bool // a batch goroutine runs; it takes the queue when done
}

// missedCall is one readMissed round of one connection's join.
type missedCall struct {
	qs    []history.Query
	pages []history.Page
	err   error
	done  chan struct{}
}

// readJoined is history.Store.ReadMany of a join's queries, batched with
// the other joins' (missedReads). The batch runs under the core's context
// and the store's own bounds; ctx bounds only this caller's wait.
func (c *Core) readJoined(ctx context.Context, qs []history.Query) ([]history.Page, error) {
	call := &missedCall{qs: qs, done: make(chan struct{})}
	m := &c.missed
	m.mu.Lock()
	m.queue = append(m.queue, call)
	start := !m.reading
	m.reading = true
	m.mu.Unlock()
	if start {
		go c.readBatches()
	}
	select {
	case <-call.done:
		return call.pages, call.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// readBatches reads what is queued in missedReads, batch after batch,
// until the queue is empty.
func (c *Core) readBatches() {
	m := &c.missed
	for {
		m.mu.Lock()
		batch := m.queue
		m.queue = nil
		if len(batch) == 0 {
			m.reading = false
			m.mu.Unlock()
			return
		}
		m.mu.Unlock()
		c.readBatch(c.ctx, batch)
		for _, call := range batch {
			close(call.done)
		}
	}
}

// readBatch reads the queries of calls in one ReadMany and gives each call
// the pages it asked for. Forward queries of one room whose ranges, taken
// together, fit one page are read as one query and each gets its slice
// of it (the same messages and state a read of its own would give, read
// after it was asked); other queries go as they are.
func (c *Core) readBatch(ctx context.Context, calls []*missedCall) {
	type span struct {
		q   history.Query // the merged query
		idx int           // its index in the ReadMany
	}
	end := func(q history.Query) uint64 { return q.After + uint64(pageLimit(q.Limit)) }
	spans := make(map[string]*span)
	var out []history.Query
	// First the union of each room's ranges...
	for _, call := range calls {
		for _, q := range call.qs {
			if !mergeable(q) {
				continue
			}
			sp := spans[q.Room]
			if sp == nil {
				spans[q.Room] = &span{q: q, idx: -1}
				continue
			}
			if sp.q.Limit < 0 {
				continue
			}
			lo, hi := min(sp.q.After, q.After), max(end(sp.q), end(q))
			if hi-lo <= history.MaxPage && sp.q.Peek == q.Peek {
				sp.q.After, sp.q.Limit = lo, int(hi-lo)
			} else {
				sp.q.Limit = -1 // too wide: this room's queries go as they are
			}
		}
	}
	// ...then one query per room that merged, and the others as asked.
	where := make([][]int, len(calls)) // per call and query: index in out
	for i, call := range calls {
		where[i] = make([]int, len(call.qs))
		for j, q := range call.qs {
			sp := spans[q.Room]
			if !mergeable(q) || sp == nil || sp.q.Limit < 0 {
				where[i][j] = len(out)
				out = append(out, q)
				continue
			}
			if sp.idx < 0 {
				sp.idx = len(out)
				out = append(out, sp.q)
			}
			where[i][j] = sp.idx
		}
	}
	pages, err := c.hist.ReadMany(ctx, out)
	for i, call := range calls {
		if err != nil {
			call.err = err
			continue
		}
		call.pages = make([]history.Page, len(call.qs))
		for j, q := range call.qs {
			k := where[i][j]
			if out[k] == q {
				call.pages[j] = pages[k]
				continue
			}
			call.pages[j] = slicePage(pages[k], q.After, end(q))
		}
	}
}

// mergeable reports whether q may share a read with other queries of its
// room: a forward read with a range.
func mergeable(q history.Query) bool {
	return !q.Reverse && q.Before == 0 && q.Limit > 0 && q.Limit <= history.MaxPage
}

// pageLimit is a query's limit as the store applies it.
func pageLimit(limit int) int {
	if limit <= 0 || limit > history.MaxPage {
		return history.MaxPage
	}
	return limit
}

// slicePage is the page a forward read of (after, upto] would have got,
// cut from p, a forward page that covers that range.
func slicePage(p history.Page, after, upto uint64) history.Page {
	ms := p.Messages
	i := sort.Search(len(ms), func(i int) bool { return ms[i].GetSeq() > after })
	j := sort.Search(len(ms), func(j int) bool { return ms[j].GetSeq() > upto })
	return history.Page{
		State:    p.State,
		Messages: ms[i:j:j],
		More:     p.More || j < len(ms),
	}
}

// joinReq is one room a session joins or resumes.
type joinReq struct {
	name  string
	room  *room
	since uint64
	epoch string
	// position: (since, epoch) is where the client continues, checked
	// against the room's epoch; without it the join is live from now.
	position bool
	resumed  bool
	// stored: the session store lists the room (a resumed room).
	stored bool
	// presence: count the session in the room's presence, with state.
	presence bool
	state    []byte
	// Filled by begin:
	target    uint64 // the room's last seq when the join began
	roomEpoch string
	replay    bool
	msgs      []*corralv1.Message
	readOK    bool
}

// detach ends a connection's attachment: the session leaves its rooms' live
// fan-out but stays resumable until its TTL.
func (c *Core) detach(s *session, l *link, conn uint64, clean bool) {
	s.mu.Lock()
	if s.gone || s.ep.link != l || s.ep.conn != conn {
		s.mu.Unlock()
		return
	}
	s.gone = true
	rooms := s.rooms
	s.rooms = nil
	s.mu.Unlock()
	for _, r := range rooms {
		r.leave(s, nil)
		c.releaseMember(r)
	}
	c.events.emitDisconnected(s, rooms, clean)
	c.presenceDetach(s, clean)
	c.attached.detach(s, clean, time.Now())
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	if err := c.sess.Touch(ctx, s.id); err != nil && !errors.Is(err, sessions.ErrNotFound) {
		c.cfg.Logger.Warn("session touch at detach failed", "session", s.id, "err", err)
	}
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
		c.attached.sweep(time.Now().Add(-c.cfg.SessionTTL))
		for _, s := range c.attached.all() {
			ctx, cancel := context.WithTimeout(c.ctx, period)
			if err := c.sess.Touch(ctx, s.id); err != nil && !errors.Is(err, sessions.ErrNotFound) {
				c.cfg.Logger.Warn("session touch failed", "session", s.id, "err", err)
			}
			cancel()
		}
	}
}
