package edge

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect/v2"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	"github.com/corral-rt/corral/gen/corral/link/v1/linkv1connect"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/buildinfo"
	"github.com/corral-rt/corral/internal/linkq"
	"github.com/corral-rt/corral/internal/retry"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/tracing"
	"google.golang.org/protobuf/proto"
)

const (
	// One LinkRequest carries at most this many frames and (unless one
	// frame alone is larger) this many bytes.
	maxFramesPerSend = 4096
	maxBytesPerSend  = 1 << 20
	// linkQueueFrames bounds the frames waiting to go to the core; past it
	// the connection that adds one is told to retry later.
	linkQueueFrames = 1 << 16
)

// link is one Link stream to the core, re-opened when it fails, carrying the
// frames of the connections assigned to it.
type link struct {
	e     *Edge
	idx   int
	queue *linkq.Queue[*linkv1.EdgeFrame]
	// queued is the bytes waiting in the send queues of the connections on
	// this link (conn.queued, summed as it changes: see addQueuedLocked),
	// which sendLoop reports to the core.
	queued atomic.Int64
	// core indexes Config.Cores: where the stream is opened. Only run
	// reads and writes it.
	core int

	mu    sync.Mutex // guards the following fields
	up    bool
	conns map[uint64]*conn
	// rooms maps a room to its local members on this link: the core sends a
	// room frame once per link and it goes to each of them.
	rooms map[string]map[*conn]struct{}
	// presence maps a room to its local members that receive its presence
	// frames (RoomFrame.presence): a subset of rooms.
	presence map[string]map[*conn]struct{}
	// roomSeq is the seq of the last message of each room delivered on
	// this link: where every member of the room is.
	roomSeq map[string]uint64
	// roomState is the keyed-state position of the last state frame of
	// each room delivered on this link (a change or a snapshot to every
	// member): where every member of the room is, unless a frame of its
	// own came later (stateMark.stamp).
	roomState map[string]stateMark
	// stateStamp orders the state positions recorded on this link.
	stateStamp uint64
	// orphans are connections whose link failed; they wait, open, for the
	// link to come back and are then resumed by the edge itself.
	orphans    map[uint64]*conn
	orphanedAt time.Time
	// handoff is dispatch's: the sockets a batch from the core gave frames
	// to, handed to their writers once the batch is queued.
	handoff handoff
}

// orphanWait is how long connections wait, open, for a failed link to the
// core to come back before they are told to reconnect.
const orphanWait = 30 * time.Second

func newLink(e *Edge, idx int) *link {
	return &link{
		e:     e,
		idx:   idx,
		core:  idx % len(e.cfg.Cores),
		queue: linkq.New[*linkv1.EdgeFrame](),
		conns: make(map[uint64]*conn),
		rooms: make(map[string]map[*conn]struct{}),

		presence:  make(map[string]map[*conn]struct{}),
		roomSeq:   make(map[string]uint64),
		roomState: make(map[string]stateMark),
		orphans:   make(map[uint64]*conn),
	}
}

func (l *link) isUp() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.up
}

// run keeps the link open until ctx ends, re-opening it with jittered
// exponential backoff (internal/retry).
func (l *link) run(ctx context.Context) {
	b := retry.Backoff{Base: 50 * time.Millisecond, Cap: 5 * time.Second, ResetAfter: 10 * time.Second}
	for ctx.Err() == nil {
		b.Start()
		err := l.serve(ctx)
		l.down()
		if ctx.Err() != nil {
			return
		}
		l.e.metrics.linkFailures.Inc()
		l.e.cfg.Logger.Warn("link to core failed", "link", l.idx, "core", l.core, "err", err)
		if n := len(l.e.cfg.Cores); n > 1 {
			// Fail over: the orphans resume on the next core.
			l.core = (l.core + 1) % n
			l.e.metrics.linkFailovers.Inc()
		}
		if !b.Wait(ctx) {
			return
		}
	}
}

// serve opens one stream and runs it until it fails.
func (l *link) serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The core lists its edges by these (RoomService.Info).
	ctx, info := connect.NewClientContext(ctx)
	info.RequestHeader().Set(edgeIDHeader, l.e.id)
	info.RequestHeader().Set(versionHeader, buildinfo.Version())
	stream, err := l.e.cfg.Cores[l.core].Link(ctx)
	if err != nil {
		return err
	}
	// Cancelling ctx does not always interrupt a pending Receive on an h2c
	// stream; closing the stream does.
	stopClose := context.AfterFunc(ctx, func() { stream.Close() })
	defer func() {
		if stopClose() {
			stream.Close()
		}
	}()
	if err := stream.SendHeaders(); err != nil {
		return err
	}
	l.mu.Lock()
	l.up = true
	l.reattachLocked()
	l.mu.Unlock()
	l.e.metrics.linkUp.Inc()
	defer l.e.metrics.linkUp.Dec()

	sendErr := make(chan error, 1)
	go func() { sendErr <- l.sendLoop(ctx, stream) }()
	for {
		resp, err := stream.Receive()
		if err != nil {
			cancel()
			<-sendErr
			return err
		}
		l.dispatch(resp.GetFrames())
	}
}

// queueReportEvery is how often a link tells the core the bytes waiting in
// its connections' send queues (LinkRequest.queued_bytes), when they
// changed: the core pushes back on internal API publishes while they are
// high.
const queueReportEvery = 100 * time.Millisecond

func (l *link) sendLoop(ctx context.Context, stream linkv1connect.LinkServiceLinkClientStream) error {
	report := time.NewTicker(queueReportEvery)
	defer report.Stop()
	var reported uint64
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-report.C:
			if n := uint64(max(l.queued.Load(), 0)); n != reported {
				reported = n
				if err := stream.Send(&linkv1.LinkRequest{QueuedBytes: &n}); err != nil {
					return err
				}
			}
			continue
		case <-l.queue.Ready():
		}
		for {
			batch := l.queue.Take(maxFramesPerSend, maxBytesPerSend)
			if len(batch) == 0 {
				break
			}
			if err := stream.Send(&linkv1.LinkRequest{Frames: batch}); err != nil {
				return err
			}
		}
	}
}

// down marks the link failed. Connections with a session stay open, as
// orphans, for orphanWait: when the link is back the edge resumes their
// sessions itself (reattach). The others are told to resume, spread over a
// second so they do not return at once.
func (l *link) down() {
	l.mu.Lock()
	l.up = false
	var lost []*conn
	for id, c := range l.conns {
		if c.session == "" {
			lost = append(lost, c)
			continue
		}
		// Remember where the connection is in each of its rooms.
		for i := range c.rooms {
			r := &c.rooms[i]
			if r.member {
				r.track(l.roomSeq[r.name])
				if m, ok := l.roomState[r.name]; ok {
					r.state.newer(m)
				}
				r.member = false
			}
		}
		l.orphans[id] = c
	}
	if len(l.orphans) > 0 && l.orphanedAt.IsZero() {
		l.orphanedAt = time.Now()
	}
	// What the core never answered is answered here, not dropped: a
	// client waits on its publish's (join's, set_state's ...) answer, and
	// silence costs it a resend timeout. That is every request passed to
	// the stream, queued still or sent, that no answer settled
	// (answers.go). A connection without a session has no Welcome yet:
	// its close below answers it.
	for _, c := range l.conns {
		for _, r := range c.takeUnansweredLocked() {
			if c.session != "" {
				c.refuseRequest(r, corralv1.Code_CODE_UNAVAILABLE, "lost the link to the core; retry", 0)
				l.e.metrics.refuse(refusedLinkLost)
			}
		}
	}
	l.conns = make(map[uint64]*conn)
	l.rooms = make(map[string]map[*conn]struct{})
	l.presence = make(map[string]map[*conn]struct{})
	l.roomSeq = make(map[string]uint64)
	l.roomState = make(map[string]stateMark)
	l.queue.Reset()
	l.mu.Unlock()
	for _, c := range lost {
		c.closeWith(corralv1.Code_CODE_CORE_UNAVAILABLE, "lost the link to the core", uint32(rand.IntN(1000)), true)
	}
}

// giveUpOrphans closes orphans that waited too long for the link.
func (l *link) giveUpOrphans() {
	l.mu.Lock()
	if len(l.orphans) == 0 || time.Since(l.orphanedAt) < orphanWait {
		l.mu.Unlock()
		return
	}
	orphans := l.orphans
	l.orphans = make(map[uint64]*conn)
	l.orphanedAt = time.Time{}
	l.mu.Unlock()
	for _, c := range orphans {
		c.closeWith(corralv1.Code_CODE_CORE_UNAVAILABLE, "lost the link to the core", uint32(rand.IntN(1000)), true)
	}
}

// enqueueLocked queues f for the core. Lock must be held.
func (l *link) enqueueLocked(f *linkv1.EdgeFrame) bool {
	return l.queue.Push(f, proto.Size(f), linkQueueFrames)
}

// attach registers c and sends its Attach. It reports false (and closes c)
// when the link is down or full.
func (l *link) attach(c *conn, a *linkv1.Attach) bool {
	l.mu.Lock()
	ok := l.up && l.enqueueLocked(&linkv1.EdgeFrame{Conn: c.id, Kind: &linkv1.EdgeFrame_Attach{Attach: a}})
	if ok {
		l.conns[c.id] = c
		c.attach = a
	}
	l.mu.Unlock()
	if !ok {
		c.closeWith(corralv1.Code_CODE_CORE_UNAVAILABLE, "no link to the core", uint32(100+rand.IntN(900)), false)
	}
	return ok
}

// forward sends a client frame to the core. It reports false (and closes
// c) when the link cannot take it.
func (l *link) forward(c *conn, f *corralv1.ClientFrame) bool {
	ef := &linkv1.EdgeFrame{Conn: c.id, Kind: &linkv1.EdgeFrame_Frame{Frame: f}}
	if p := f.GetPublish(); p != nil && tracing.Enabled() {
		// The publish's trace starts here; its context rides in the frame.
		span, tp := tracing.StartCarried(tracing.SpanEdgePublish, p.GetRoom())
		ef.Traceparent = tp
		ok := l.pass(c, f, ef, nil)
		var err error
		if !ok {
			err = errNotQueued
		}
		tracing.End(span, err)
		return ok
	}
	return l.pass(c, f, ef, nil)
}

// errNotQueued marks an edge span whose frame the link could not take.
var errNotQueued = errors.New("edge: the link to the core cannot take the frame")

// refresh sends c's refreshed identity to the core (f is the client's
// Refresh), keeps it for a reattach and re-arms c's expiry. It runs on
// c's reader. It reports false (and closes c) when the link cannot take
// it; an orphan's refresh is refused with a retry and changes nothing.
func (l *link) refresh(c *conn, f *corralv1.ClientFrame, id *corralv1.Identity) bool {
	return l.pass(c, f, &linkv1.EdgeFrame{Conn: c.id, Kind: &linkv1.EdgeFrame_Refresh{Refresh: id}}, func() {
		// A new Attach: the old one may be shared with the transport.
		a := c.attach
		c.attach = &linkv1.Attach{Hello: a.GetHello(), Identity: id, RemoteAddr: a.GetRemoteAddr(), Protocol: a.GetProtocol(), Info: a.GetInfo()}
		c.expireAt(id.GetExpiresUnix())
	})
}

// pass queues ef, made of c's client frame f, for the core; queued runs
// under the lock once it is. It reports false (and closes c) when the link
// cannot take it; an orphan's f is refused with a retry.
func (l *link) pass(c *conn, f *corralv1.ClientFrame, ef *linkv1.EdgeFrame, queued func()) bool {
	l.mu.Lock()
	_, attached := l.conns[c.id]
	_, orphan := l.orphans[c.id]
	ok := attached && l.enqueueLocked(ef)
	if ok {
		c.trackLocked(requestOf(f))
		if queued != nil {
			queued()
		}
	}
	l.mu.Unlock()
	if orphan {
		// The core is back soon; the client retries what it needs.
		c.refuse(f, corralv1.Code_CODE_UNAVAILABLE, "the core is restarting; retry shortly", 500)
		return true
	}
	if !attached {
		// The link went down under the connection; its close is queued.
		return false
	}
	if !ok {
		c.closeWith(corralv1.Code_CODE_OVERLOADED, "the core is not keeping up", uint32(500+rand.IntN(1500)), false)
	}
	return ok
}

// detach forgets c and tells the core it is gone.
func (l *link) detach(c *conn, clean bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.orphans[c.id] == c {
		delete(l.orphans, c.id)
		return
	}
	if l.conns[c.id] != c {
		return
	}
	delete(l.conns, c.id)
	for _, r := range c.rooms {
		if r.member {
			l.unlinkLocked(r.name, c)
		}
	}
	l.enqueueLocked(&linkv1.EdgeFrame{Conn: c.id, Kind: &linkv1.EdgeFrame_Detach{Detach: &linkv1.Detach{Clean: clean}}})
}

func (l *link) addMemberLocked(room string, c *conn) {
	m := l.rooms[room]
	if m == nil {
		m = make(map[*conn]struct{})
		l.rooms[room] = m
	}
	m[c] = struct{}{}
	c.roomLocked(room).member = true
}

// addPresenceLocked makes c, a member of room, receive its presence
// frames. Lock must be held.
func (l *link) addPresenceLocked(room string, c *conn) {
	m := l.presence[room]
	if m == nil {
		m = make(map[*conn]struct{})
		l.presence[room] = m
	}
	m[c] = struct{}{}
	c.roomLocked(room).presence = true
}

// removeMemberLocked makes c no longer a local member of room, nor a
// receiver of its presence. Lock must be held.
func (l *link) removeMemberLocked(room string, c *conn) {
	l.unlinkLocked(room, c)
	c.updateRoomLocked(room, func(r *connRoom) { r.member, r.presence = false, false })
}

// unlinkLocked removes c from the link's members of room. Lock must be
// held.
func (l *link) unlinkLocked(room string, c *conn) {
	if m := l.rooms[room]; m != nil {
		delete(m, c)
		if len(m) == 0 {
			delete(l.rooms, room)
			delete(l.roomSeq, room)
			delete(l.roomState, room)
		}
	}
	if m := l.presence[room]; m != nil {
		delete(m, c)
		if len(m) == 0 {
			delete(l.presence, room)
		}
	}
}

// dispatch delivers one batch from the core, in order. Each frame's kind
// says what it is; positions are kept only as the core states them. The
// batch's frames are all queued before their sockets go to the writers
// (handoff), so a burst leaves in one write per socket: a publisher's
// Published with the room's message, say.
func (l *link) dispatch(frames []*linkv1.CoreFrame) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dispatchLocked(frames, &l.handoff)
	l.handoff.flush(l.e.senders)
}

// handoffPart bounds the frames of one batch between two hand-offs
// (dispatchLocked): 256 frames in one write already cost a 256th of a
// write each.
const handoffPart = 256

// dispatchLocked is dispatch's part under the lock; the sockets it queues
// frames for are kept in h (a close hands its socket over at once). Lock
// must be held.
func (l *link) dispatchLocked(frames []*linkv1.CoreFrame, h *handoff) {
	// A long batch is handed over in parts: a socket never holds more of
	// it without a writer than a part, well within its queue's bound
	// (Config.QueueFrames), so a batch larger than the bound does not cut
	// a client that reads.
	part := max(1, min(handoffPart, l.e.cfg.QueueFrames/2))
	for i, f := range frames {
		if i > 0 && i%part == 0 {
			h.flush(l.e.senders)
		}
		switch k := f.GetKind().(type) {
		case *linkv1.CoreFrame_Live:
			rf := k.Live
			if len(l.rooms[rf.GetRoom()]) > 0 { // a room without members here is forgotten
				l.roomSeq[rf.GetRoom()] = rf.GetSeq()
			}
			l.deliverRoomLocked(rf.GetRoom(), rf.GetFrame(), l.rooms[rf.GetRoom()], false, h)
		case *linkv1.CoreFrame_Signals:
			l.deliverRoomLocked(k.Signals.GetRoom(), k.Signals.GetFrame(), l.rooms[k.Signals.GetRoom()], true, h)
		case *linkv1.CoreFrame_Presence:
			l.deliverRoomLocked(k.Presence.GetRoom(), k.Presence.GetFrame(), l.presence[k.Presence.GetRoom()], false, h)
		case *linkv1.CoreFrame_State:
			if len(l.rooms[k.State.GetRoom()]) > 0 {
				if m, ok := l.stateMarkOf(k.State.GetFrame()); ok {
					l.roomState[k.State.GetRoom()] = m
				}
			}
			l.deliverRoomLocked(k.State.GetRoom(), k.State.GetFrame(), l.rooms[k.State.GetRoom()], false, h)
		case *linkv1.CoreFrame_Replay:
			r := k.Replay
			if c := l.conns[r.GetConn()]; c != nil {
				c.roomLocked(r.GetRoom()).position(r.GetSeq(), r.GetEpoch())
				l.replayLocked(c, r.GetFrame(), r.GetAck(), r.GetRoom(), h)
			}
		case *linkv1.CoreFrame_Snapshot:
			if c := l.conns[k.Snapshot.GetConn()]; c != nil {
				if m, ok := l.stateMarkOf(k.Snapshot.GetFrame()); ok {
					c.roomLocked(k.Snapshot.GetRoom()).state.newer(m)
				}
				l.replayLocked(c, k.Snapshot.GetFrame(), false, "", h)
			}
		case *linkv1.CoreFrame_Position:
			p := k.Position
			if c := l.conns[p.GetConn()]; c != nil {
				c.roomLocked(p.GetRoom()).position(p.GetSeq(), p.GetEpoch())
				c.settleLocked(p.GetFrame())
				c.sendFrameVia(p.GetFrame(), h)
			}
		case *linkv1.CoreFrame_Left:
			if c := l.conns[k.Left.GetConn()]; c != nil {
				c.updateRoomLocked(k.Left.GetRoom(), func(r *connRoom) {
					// Nothing is kept of a room left: a connection
					// joining ever-new rooms must not grow.
					r.tracked, r.seq, r.presence, r.epoch = false, 0, false, ""
					r.state = stateMark{}
				})
				c.settleLocked(k.Left.GetFrame())
				c.sendFrameVia(k.Left.GetFrame(), h)
			}
		case *linkv1.CoreFrame_Session:
			if c := l.conns[k.Session.GetConn()]; c != nil {
				c.session, c.token = k.Session.GetSessionId(), k.Session.GetResumeToken()
				// A reattach's Welcome goes to the client too: the resume
				// rotated the token, and the client must resume with the
				// new one if this connection drops (client.proto Welcome).
				c.sendFrameVia(k.Session.GetFrame(), h)
				c.markWelcomed() // after it is queued: see welcomed
			}
		case *linkv1.CoreFrame_Conn:
			if c := l.conns[k.Conn.GetConn()]; c != nil {
				c.settleLocked(k.Conn.GetFrame())
				c.sendFrameVia(k.Conn.GetFrame(), h)
			}
		case *linkv1.CoreFrame_Membership:
			m := k.Membership
			c := l.conns[m.GetConn()]
			if c == nil {
				continue
			}
			if m.GetMember() {
				l.addMemberLocked(m.GetRoom(), c)
				if m.GetPresence() {
					l.addPresenceLocked(m.GetRoom(), c)
				}
			} else {
				l.removeMemberLocked(m.GetRoom(), c)
			}
		case *linkv1.CoreFrame_Close:
			if c := l.conns[k.Close.GetConn()]; c != nil {
				h := k.Close.GetHint()
				c.closeWith(h.GetCode(), h.GetReason(), h.GetDelayMs(), true)
			}
		}
	}
}

// replayLocked queues f, frames for c alone outside the bounds of live
// traffic (a replay or a snapshot); c is kept in h (handoff). Lock must be
// held.
func (l *link) replayLocked(c *conn, f *corralv1.ServerFrame, ack bool, room string, h *handoff) {
	if b, err := protocol.AppendServer(c.enc, nil, f); err == nil {
		c.enqueueReplay(b, ack, room, h)
	}
}

// replayTaken tells the core that c's writer took the replay pages of
// rooms that asked for it (ConnReplay.ack): the core sends each room's
// next page. A link that cannot take the report closes c, as a client
// frame it cannot take does: the replay would never go on.
func (l *link) replayTaken(c *conn, rooms []string) {
	l.mu.Lock()
	ok := true
	if l.conns[c.id] == c {
		for _, room := range rooms {
			ok = ok && l.enqueueLocked(&linkv1.EdgeFrame{Conn: c.id, Kind: &linkv1.EdgeFrame_ReplayTaken{ReplayTaken: &linkv1.ReplayTaken{Room: room}}})
		}
	}
	l.mu.Unlock()
	if !ok {
		c.closeWith(corralv1.Code_CODE_OVERLOADED, "the core is not keeping up", uint32(500+rand.IntN(1500)), false)
	}
}

// deliverRoomLocked encodes (and frames) a room's frame f once per
// encoding in use and queues or writes the same bytes for each of members;
// signals marks a signal flush, merged while queued. The members' sockets
// are kept in h (handoff). Lock must be held.
func (l *link) deliverRoomLocked(room string, f *corralv1.ServerFrame, members map[*conn]struct{}, signals bool, h *handoff) {
	if len(members) == 0 {
		return
	}
	var batch *corralv1.Batch
	if signals {
		batch = f.GetBatch()
	}
	var byEnc [2]encoded
	for c := range members {
		e := byEnc[c.enc]
		if e.b == nil {
			var err error
			e, err = encode(c.enc, f)
			if err != nil {
				l.e.cfg.Logger.Error("encode room frame", "room", room, "err", err)
				return
			}
			byEnc[c.enc] = e
		}
		if batch != nil {
			c.enqueueSignals(room, batch, e, h)
		} else {
			c.push(e, pushLive, "", nil, h)
		}
	}
}
