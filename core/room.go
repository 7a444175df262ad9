package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-rt/corral/core/frame"
	"github.com/corral-rt/corral/core/linkserver"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/tracing"
)

const (
	// maxCatchupBuffer and maxCatchupBytes bound the live messages held
	// for one joining member while its history is read; past either the
	// member gets a Reset (counted as dropped, catchup_full) and what was
	// held is let go at once. The bytes are about one history page of the
	// largest messages: what the edge takes as one connection's replay
	// (edge Config.replayBytes), which the held messages join; without
	// them 10,000 held messages of 64 KiB kept 640 MiB alive per join.
	maxCatchupBuffer = 10000
	maxCatchupBytes  = 64 << 20
	// maxPending bounds messages held ahead of a gap before a fill is forced.
	maxPending = 10000
	// gapWait is how long a gap may stay open before history fills it. A
	// gap is normally two publishes of this process finishing out of order
	// and closes at once; a message lost by pub/sub needs the fill.
	gapWait = 50 * time.Millisecond
	// replayBatch is how many missed messages one replay batch carries.
	replayBatch      = 256
	replayBatchBytes = 256 << 10
)

// room is one room's live state: its position in history and its members.
//
// Messages reach deliverLocked in any order (concurrent publishes finish out
// of order; with Redis, pub/sub brings other processes' messages); the room
// hands them to members strictly in seq order, holding early ones until the
// gap closes or is filled from history.
type room struct {
	core *Core
	name string

	refs int // guarded by the room table's lock (roomtable.go)

	loadMu  sync.Mutex // guards reading; never held with mu
	reading *stateRead // the state read in flight, shared by load's callers

	mu     sync.Mutex // guards the following fields
	loaded bool
	// synced: the state was read after the room's pub/sub subscription
	// was confirmed. The subscription stays while the room is in the
	// table (a lost one is caught up by fill: catchUp), so later joins
	// need no state read of their own.
	synced  bool
	last    uint64 // newest seq handed to members
	epoch   string
	members map[*session]endpoint
	// links counts members per link: a room frame goes once to each link.
	links map[*linkserver.Link]int
	// joining are members whose history is being read; live messages are
	// kept for them until they go live.
	joining map[*session]*catchup
	keyed   keyedRoom                    // the room's keyed state (keyed.go)
	grown   growView                     // open growing messages' bodies, for deltas (grow.go)
	pending map[uint64]*corralv1.Message // ahead of a gap
	filling bool                         // a gap fill is scheduled or running
	// advanced, made by a waiter (grow.go waitDelivered), is closed and
	// dropped when r.last or r.epoch moves (wakeLocked): nil, no waiter.
	advanced chan struct{}
	wantFill bool // fill even without a known gap
	// The room's parts under this lock: the live messages held for a
	// write delay (roomdelay.go) and the room's presence (presence.go).
	live roomDelay
	pres roomPresence

	// signals is made on the room's first signal (signalsOrNew): most
	// rooms never get one, and a room is made for each publish to a room
	// nobody here joined. Its own lock, taken after mu (signals.go).
	signals atomic.Pointer[roomSignals]
}

// catchup is a joining member's buffer of live messages.
type catchup struct {
	buf      []*corralv1.Message
	bytes    int // of buf, as catchupSize counts them
	overflow bool
}

// catchupSize is what msg counts against maxCatchupBytes: its payload (a
// growing message's chunk: its data) and a fixed overhead, as replay
// batches count it (replayBatchBytes).
func catchupSize(msg *corralv1.Message) int {
	return len(msg.GetPayload()) + len(msg.GetChunk().GetData()) + 64
}

func newRoom(c *Core, name string) *room {
	r := &room{
		core:    c,
		name:    name,
		members: make(map[*session]endpoint),
		links:   make(map[*linkserver.Link]int),
		joining: make(map[*session]*catchup),
		pending: make(map[uint64]*corralv1.Message),
	}
	r.live.room, r.pres.room = r, r
	return r
}

// load reads the room's state from history once. With forJoin and a shared
// store, it first subscribes to the room's live messages, so that nothing
// appended after the state read is missed. Joins of the room that arrive
// while a state read is in flight share it (a rejoin storm: one read per
// room, not one per member, and no member waits behind the others' reads):
// the subscription was confirmed before that read began (it stays while
// the room is held), so the read is as good as one of their own. For the
// same reason, once such a read is done (synced), joins read nothing.
func (r *room) load(ctx context.Context, forJoin bool) error {
	subscribe := forJoin && r.core.sub != nil
	if subscribe {
		if err := r.core.subscribe(ctx, r.name); err != nil {
			return fmt.Errorf("core: subscribe room %q: %w", r.name, err)
		}
	}
	for {
		r.mu.Lock()
		loaded, synced := r.loaded, r.synced
		r.mu.Unlock()
		if loaded && (!subscribe || synced) {
			return nil
		}
		r.loadMu.Lock()
		rd := r.reading
		lead := rd == nil
		if lead {
			rd = &stateRead{done: make(chan struct{}), subscribed: subscribe}
			r.reading = rd
		}
		r.loadMu.Unlock()
		if lead {
			rd.err = r.readState(ctx)
			if rd.err == nil && subscribe {
				r.mu.Lock()
				r.synced = true
				r.mu.Unlock()
			}
			r.loadMu.Lock()
			r.reading = nil
			r.loadMu.Unlock()
			close(rd.done)
			return rd.err
		}
		select {
		case <-rd.done:
		case <-ctx.Done():
			return fmt.Errorf("core: load room %q: %w", r.name, ctx.Err())
		}
		switch {
		case rd.err == nil && (rd.subscribed || !subscribe):
			return nil
		case rd.err != nil && !errors.Is(rd.err, context.Canceled) && !errors.Is(rd.err, context.DeadlineExceeded):
			return rd.err // the store failed: as if this join had read
		}
		// The read ended with its own caller's context, or began
		// unsubscribed: read again.
	}
}

// stateRead is one state read of a room in flight (room.reading), shared
// by the joins that arrive meanwhile.
type stateRead struct {
	done       chan struct{} // closed once err is set and the state applied
	subscribed bool          // began after the room's subscription was confirmed
	err        error
}

// readState reads the room's state from history and applies it.
func (r *room) readState(ctx context.Context) error {
	done := r.core.metrics.storeOp("state")
	st, err := r.core.hist.State(ctx, r.name)
	done(err)
	if err == nil {
		st, err = r.fenceLoss(ctx, st)
	}
	if err != nil {
		return fmt.Errorf("core: load room %q: %w", r.name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case !r.loaded:
		r.last, r.epoch, r.loaded = st.Last, st.Epoch, true
	case st.Epoch != r.epoch:
		r.resetLocked(st.Epoch, st.Last)
	case st.Last > r.last && len(r.members) == 0 && len(r.joining) == 0:
		// Nobody here saw the messages other processes appended meanwhile.
		r.last = st.Last
		r.wakeLocked()
		clear(r.pending)
	case st.Last > r.last:
		r.scheduleFillLocked()
	}
	return nil
}

// publish appends msg to history, then hands it to the members. A
// non-zero sender holds the append to the sender's order
// (history.SenderOrder; a store that does not keep it appends as is).
func (r *room) publish(ctx context.Context, msg *corralv1.Message, dedupe string, sender history.Sender) (res history.AppendResult, err error) {
	ctx, span := tracing.Start(ctx, tracing.SpanPublish, r.name, 0)
	defer func() { tracing.End(span, err) }()
	done := r.core.metrics.storeOp("append")
	actx, aspan := tracing.Start(ctx, tracing.SpanAppend, r.name, 0)
	// Pass what this process saw, so that a history that lost its tail
	// (Redis failover) moves to a new epoch instead of reusing a seq: see
	// history.LossFence.
	r.mu.Lock()
	known := history.State{Epoch: r.epoch, Last: r.last}
	r.mu.Unlock()
	so, ordered := r.core.hist.(history.SenderOrder)
	lf, fenced := r.core.hist.(history.LossFence)
	switch {
	case ordered && sender.Stream != "":
		res, err = so.AppendOrdered(actx, r.name, msg, dedupe, sender, known)
	case fenced:
		res, err = lf.AppendKnown(actx, r.name, msg, dedupe, known)
	default:
		res, err = r.core.hist.Append(actx, r.name, msg, dedupe)
	}
	tracing.End(aspan, err)
	done(err)
	if err != nil || res.Duplicate {
		return res, err
	}
	tracing.SetSeq(span, res.Seq)
	_, fspan := tracing.Start(ctx, tracing.SpanFanout, r.name, res.Seq)
	defer fspan.End()
	r.stored(msg, res)
	return res, nil
}

// stored hands msg, which history just stored as res, to the members (a
// publish, or a growing message's chunk: grow.go).
func (r *room) stored(msg *corralv1.Message, res history.AppendResult) {
	r.core.metrics.published.Inc()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.loaded {
		// Nobody joined this room here yet (a join loads the room first):
		// there is no one to deliver to, only the position to keep.
		r.loaded = true
		r.last, r.epoch = res.Seq, res.Epoch
		return
	}
	if res.Epoch != r.epoch {
		// History was lost under us (store flushed or expired).
		r.resetLocked(res.Epoch, res.Seq-1)
	}
	r.deliverLocked(msg)
}

// deliver hands a message from pub/sub to the members. While a catch-up
// is due, it only holds the message: after a failover another process
// may have moved the room to a new epoch, and its messages reuse seqs of
// the old one (history.Subscription), so nothing is delivered before the
// fill has read the room's epoch.
func (r *room) deliver(msg *corralv1.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.wantFill {
		if msg.GetSeq() > r.last {
			r.pending[msg.GetSeq()] = msg
		}
		return
	}
	r.deliverLocked(msg)
}

// deliverLocked hands msg to members in seq order: a duplicate is dropped,
// an early message waits for the gap to close. Lock must be held.
func (r *room) deliverLocked(msg *corralv1.Message) {
	seq := msg.GetSeq()
	switch {
	case seq <= r.last:
		return
	case seq > r.last+1:
		r.pending[seq] = msg
		r.scheduleFillLocked()
		return
	}
	r.fanoutLocked(msg)
	for {
		next, ok := r.pending[r.last+1]
		if !ok {
			break
		}
		delete(r.pending, r.last+1)
		r.fanoutLocked(next)
	}
}

// fanoutLocked sends msg once to every link with members, and keeps it for
// joining members. Lock must be held.
func (r *room) fanoutLocked(msg *corralv1.Message) {
	r.last = msg.GetSeq()
	r.wakeLocked()
	for _, cu := range r.joining {
		if cu.overflow {
			continue
		}
		if size := catchupSize(msg); len(cu.buf) < maxCatchupBuffer && cu.bytes+size <= maxCatchupBytes {
			cu.buf = append(cu.buf, msg)
			cu.bytes += size
			continue
		}
		cu.overflow = true
		cu.buf, cu.bytes = nil, 0
		r.core.metrics.drop(droppedCatchupFull, 1)
	}
	if msg.GetChunk() != nil {
		msg = r.grown.liveLocked(r, msg) // with a delta, maybe (grow.go)
	}
	if len(r.links) == 0 || r.live.holdLocked(msg) {
		return
	}
	f := frame.Live(r.name, msg.GetSeq(), r.epoch, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Message{Message: msg}})
	linkserver.EnqueueEach(r.links, f)
}

// scheduleFillLocked arranges for history to fill the gap before the
// pending messages if it does not close by itself. Lock must be held.
func (r *room) scheduleFillLocked() {
	if r.filling {
		return
	}
	r.filling = true
	wait := gapWait
	if len(r.pending) >= maxPending {
		wait = 0
	}
	if r.core.ctx.Err() != nil {
		return
	}
	time.AfterFunc(wait, r.fill)
}

// fill reads history after the last delivered seq and delivers it; an
// epoch change or a range history no longer holds becomes a Reset.
func (r *room) fill() {
	ctx, cancel := context.WithTimeout(r.core.ctx, 5*time.Second)
	defer cancel()
	for range 100 {
		r.mu.Lock()
		r.dropDeliveredLocked()
		after := r.last
		if len(r.pending) == 0 && !r.wantFill {
			r.filling = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		done := r.core.metrics.storeOp("read")
		page, err := r.core.hist.Read(ctx, history.Query{Room: r.name, After: after})
		done(err)
		if err == nil {
			page.State, err = r.fenceLoss(ctx, page.State)
		}
		r.mu.Lock()
		switch {
		case err != nil:
			r.filling = false
			if r.core.ctx.Err() == nil {
				r.core.cfg.Logger.Warn("gap fill failed; retrying", "room", r.name, "err", err)
				r.scheduleFillLocked()
			}
			r.mu.Unlock()
			return
		case page.Epoch != r.epoch:
			r.resetLocked(page.Epoch, page.Last)
		case r.last != after:
			// Delivered meanwhile; look again.
		case len(page.Messages) == 0 && page.Last > after:
			// History no longer holds anything after our position.
			r.resetLocked(page.Epoch, page.Last)
		case len(page.Messages) > 0 && page.Messages[0].GetSeq() > after+1:
			// History no longer holds the gap: tell members.
			r.resetLocked(page.Epoch, page.Messages[0].GetSeq()-1)
			fallthrough
		default:
			for _, m := range page.Messages {
				r.deliverLocked(m)
			}
			if !page.More {
				r.wantFill = false
			}
		}
		r.mu.Unlock()
	}
	r.mu.Lock()
	r.filling = false
	r.scheduleFillLocked()
	r.mu.Unlock()
}

// dropDeliveredLocked forgets the pending messages at or below r.last:
// the position moved past them by another path (a state read of a room
// that pub/sub reached first, a fill's page), and deliverLocked only
// ever takes r.last+1 out of pending. Left there, they would keep fill
// reading history forever (a rejoin storm with Redis made 138,000 reads
// of 100 rooms in 20 s). Lock must be held.
func (r *room) dropDeliveredLocked() {
	for seq := range r.pending {
		if seq <= r.last {
			delete(r.pending, seq)
		}
	}
}

// fenceLoss returns st, or the room's new epoch when st shows that history
// lost messages this process saw (it ends below r.last in r.epoch, as after
// a Redis failover): the store moves the room to a new epoch, so that the
// caller resets the members instead of leaving a gap or delivering a
// reused seq. Lock must not be held.
func (r *room) fenceLoss(ctx context.Context, st history.State) (history.State, error) {
	lf, ok := r.core.hist.(history.LossFence)
	if !ok {
		return st, nil
	}
	r.mu.Lock()
	known := history.State{Epoch: r.epoch, Last: r.last}
	r.mu.Unlock()
	if st.Epoch != known.Epoch || st.Last >= known.Last {
		return st, nil
	}
	done := r.core.metrics.storeOp("fence")
	fenced, err := lf.Fence(ctx, r.name, known)
	done(err)
	if err != nil || fenced.Epoch == "" {
		return st, err
	}
	// The same epoch back: nothing was lost, st was only read before this
	// process delivered a message appended after the read.
	if fenced.Epoch != known.Epoch {
		r.core.cfg.Logger.Warn("history lost acknowledged messages (Redis failover?): room moves to a new epoch",
			"room", r.name, "seen", known.Last, "stored", fenced.Last)
	}
	return history.State{Epoch: fenced.Epoch, First: st.First, Last: fenced.Last}, nil
}

// catchUp checks history for messages pub/sub may have missed (after its
// connection to Redis broke).
func (r *room) catchUp() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wantFill = true
	r.scheduleFillLocked()
}

// resetLocked moves the room to another history epoch: members and joining
// members are told to refetch, and delivery continues after last. Lock must
// be held.
func (r *room) resetLocked(epoch string, last uint64) {
	r.live.flushLocked(flushEvent) // the held messages are of the old epoch
	r.epoch, r.last = epoch, last
	r.wakeLocked()
	clear(r.pending)
	for _, cu := range r.joining {
		cu.overflow = true // they get a Reset when they go live
		cu.buf, cu.bytes = nil, 0
	}
	if len(r.links) == 0 {
		return
	}
	f := frame.Live(r.name, last, epoch, frame.Reset(r.name, last, epoch))
	linkserver.EnqueueEach(r.links, f)
}

// beginJoin registers s as joining: live messages are kept for it from now
// on. It decides whether history must be read. It reports false, and
// registers nothing, when the room holds its class's max-members (counted
// on this core) and s is not one of them.
func (r *room) beginJoin(s *session, ep endpoint, q *joinReq) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.isGone() {
		return true // goLive finds nothing to do
	}
	_, member := r.members[s]
	if limit := r.core.class(r.name).MaxMembers; limit > 0 && !member && len(r.members)+len(r.joining) >= limit {
		return false
	}
	if old, ok := r.members[s]; ok {
		r.removeLocked(s, old)
		ep.link.Enqueue(frame.Membership(old.conn, r.name, false))
	}
	q.cu = &catchup{}
	r.joining[s] = q.cu
	q.target, q.roomEpoch = r.last, r.epoch
	q.replay = q.position && q.epoch == r.epoch && q.since < r.last
	return true
}

// goLive finishes a join: the member gets Joined (or Reset and Joined), the
// messages it missed in order, then live traffic. It returns the position
// the member continues from, and false if the join was cancelled or
// waits for the edge to take a page of its replay: a replay longer than
// the page read (q.more) is sent a page at a time, the last batch of
// each page asking the edge to report it taken (ConnReplay.ack, then
// session.replayTaken), while the room keeps holding live messages for the
// joiner; only the last page is followed by those, ReplayEnd and live.
func (r *room) goLive(s *session, ep endpoint, q *joinReq) (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cu, ok := r.joining[s]
	if !ok || (q.cu != nil && cu != q.cu) {
		return 0, false // left, detached or joined again meanwhile
	}
	if s.isGone() {
		delete(r.joining, s)
		return 0, false // detached meanwhile; detach found nothing to undo
	}
	if q.more && q.readOK && q.roomEpoch == r.epoch && !cu.overflow && q.epoch == r.epoch {
		if r.replayPageLocked(s, ep, q, cu) {
			return 0, false
		}
	}
	delete(r.joining, s)
	// Held messages go before s becomes a member at the edge: s gets
	// them in its catch-up, up to r.last, and not a second time.
	r.live.flushLocked(flushEvent)
	send := ep.link.Enqueue
	joined := func(seq uint64, replay bool) {
		send(frame.Position(ep.conn, r.name, seq, r.epoch, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Joined{Joined: &corralv1.Joined{
			Room: r.name, Seq: seq, Epoch: r.epoch, Resumed: q.resumed, Replay: replay,
		}}}))
	}
	fresh := false // joined at r.last without a replay: gets the prefixes
	switch {
	case !q.position:
		joined(r.last, false)
		fresh = true
	case q.epoch != r.epoch || q.since > r.last:
		// An empty epoch never matches: a position the server cannot
		// check is a Reset, never a silent skip.
		send(frame.Position(ep.conn, r.name, r.last, r.epoch, frame.Reset(r.name, r.last, r.epoch)))
		joined(r.last, false)
		fresh = true
	case q.since == r.last && !q.paging:
		joined(q.since, false)
		// A position that lacks the open messages' bodies gets them
		// here, as a live join does (grow.go).
		fresh = q.openPrefix
	default:
		// Missed messages: (since, target] from history (when replay),
		// then what was delivered live meanwhile, up to r.last.
		var out []*corralv1.Message
		next := max(q.since, q.from) + 1
		take := func(ms []*corralv1.Message) {
			for _, m := range ms {
				if m.GetSeq() == next && next <= r.last {
					out = append(out, m)
					next++
				}
			}
		}
		if (q.readOK || !q.replay) && q.roomEpoch == r.epoch && !cu.overflow {
			take(q.msgs)
			take(cu.buf)
		}
		if next != r.last+1 {
			send(frame.Position(ep.conn, r.name, r.last, r.epoch, frame.Reset(r.name, r.last, r.epoch)))
			joined(r.last, false)
			fresh = true
			break
		}
		if !q.paging {
			joined(q.since, true)
		}
		// A join from a position inside a growing message gets it whole
		// after the replay instead of its chunks (grow.go).
		out, prefixes := r.core.grow.replayPrefixesLocked(r, q, cu, out)
		r.sendReplayLocked(ep, out, false)
		// The replay ends here: what follows is live.
		send(frame.Position(ep.conn, r.name, r.last, r.epoch, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_ReplayEnd{ReplayEnd: &corralv1.ReplayEnd{
			Room: r.name, Seq: r.last,
		}}}))
		for _, p := range prefixes {
			send(frame.Conn(ep.conn, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Message{Message: p}}))
		}
	}
	if fresh {
		r.core.grow.sendPrefixesLocked(r, ep, q, cu)
	}
	for _, snap := range r.signals.Load().snapshot() {
		send(frame.Snapshot(ep.conn, r.name, snap))
	}
	r.core.keyed.joinLocked(r, ep, q)
	ep.link.Enqueue(frame.Membership(ep.conn, r.name, true))
	r.members[s] = ep
	r.links[ep.link]++
	return r.last, true
}

// replayPageLocked sends q's page of a paged replay (q.msgs, read by
// readMissed, with more of the replay left in history) and leaves s
// joining until the edge took it (s.paging, session.replayTaken). It
// reports false, sending nothing, when the page does not follow what
// was sent: goLive then ends the join (a Reset). Lock must be held.
func (r *room) replayPageLocked(s *session, ep endpoint, q *joinReq, cu *catchup) bool {
	next := max(q.since, q.from) + 1
	var out []*corralv1.Message
	for _, m := range q.msgs {
		if m.GetSeq() == next && next <= r.last {
			out = append(out, m)
			next++
		}
	}
	if len(out) == 0 || out[0].GetSeq() != max(q.since, q.from)+1 {
		return false
	}
	if !q.paging {
		ep.link.Enqueue(frame.Position(ep.conn, r.name, q.since, r.epoch, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Joined{Joined: &corralv1.Joined{
			Room: r.name, Seq: q.since, Epoch: r.epoch, Resumed: q.resumed, Replay: true,
		}}}))
	}
	q.from, q.paging, q.msgs = next-1, true, nil
	out, _ = r.core.grow.replayPrefixesLocked(r, q, cu, out) // chunks only: the prefixes come after the last page
	if len(out) == 0 {
		// Every message of the page was a chunk the prefixes replace: an
		// empty batch still carries the ack.
		ep.link.Enqueue(frame.ReplayAck(ep.conn, r.name, q.from, r.epoch, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Batch{Batch: &corralv1.Batch{}}}))
	} else {
		r.sendReplayLocked(ep, out, true)
	}
	s.waitPage(q)
	return true
}

// sendReplayLocked sends out (missed messages, in seq order) to ep as
// replay batches; with ack, the last asks the edge to report it taken.
// Lock must be held.
func (r *room) sendReplayLocked(ep endpoint, out []*corralv1.Message, ack bool) {
	for len(out) > 0 {
		n, size := 0, 0
		for n < len(out) && n < replayBatch && (n == 0 || size < replayBatchBytes) {
			size += catchupSize(out[n])
			n++
		}
		frames := make([]*corralv1.ServerFrame, n)
		for i, m := range out[:n] {
			frames[i] = &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Message{Message: m}}
		}
		b := &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Batch{Batch: &corralv1.Batch{Frames: frames}}}
		if ack && n == len(out) {
			ep.link.Enqueue(frame.ReplayAck(ep.conn, r.name, out[n-1].GetSeq(), r.epoch, b))
		} else {
			ep.link.Enqueue(frame.Replay(ep.conn, r.name, out[n-1].GetSeq(), r.epoch, b))
		}
		out = out[n:]
	}
}

// removeLocked removes member s; the held live messages go first, so s
// gets what was published before it left. Lock must be held.
func (r *room) removeLocked(s *session, ep endpoint) {
	r.live.flushLocked(flushEvent)
	delete(r.members, s)
	r.pres.unsubscribeLocked(s)
	if n := r.links[ep.link] - 1; n > 0 {
		r.links[ep.link] = n
	} else {
		delete(r.links, ep.link)
	}
}

// leave removes s (a member or a joining one). With notify, the member's
// connection stops receiving the room and gets a Left frame. It reports
// whether s was in the room.
func (r *room) leave(s *session, notify *corralv1.Left) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.joining[s]; ok {
		delete(r.joining, s)
		return true
	}
	ep, ok := r.members[s]
	if !ok {
		return false
	}
	r.removeLocked(s, ep)
	r.signals.Load().clear(s)
	if notify != nil {
		ep.link.Enqueue(frame.Membership(ep.conn, r.name, false))
		ep.link.Enqueue(frame.Left(ep.conn, notify))
	}
	return true
}

func (r *room) empty() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.members) == 0 && len(r.joining) == 0
}

// wakeLocked wakes whoever waits for the room's position to move
// (advanced). Lock must be held.
func (r *room) wakeLocked() {
	if r.advanced != nil {
		close(r.advanced)
		r.advanced = nil
	}
}
