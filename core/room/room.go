package room

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/corral-rt/corral/core/frame"
	"github.com/corral-rt/corral/core/linkserver"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/presence"
	"github.com/corral-rt/corral/roomclass"
	"github.com/corral-rt/corral/state"
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
	// GapWait is how long a gap may stay open before history fills it. A
	// gap is normally two publishes of this process finishing out of order
	// and closes at once; a message lost by pub/sub needs the fill.
	GapWait = 50 * time.Millisecond
	// replayBatch is how many missed messages one replay batch carries.
	replayBatch      = 256
	replayBatchBytes = 256 << 10
)

// Room is one room's live state: its position in history, its members
// and the links they are on, the live messages held for joining members
// and for a write delay, its signals, its presence and its keyed state.
//
// Messages reach deliverLocked in any order (concurrent publishes finish
// out of order; with Redis, pub/sub brings other processes' messages); the
// room hands them to members strictly in seq order, holding early ones
// until the gap closes or is filled from history.
//
// M is the core's member (a session).
type Room[M Member] struct {
	opts *Options[M]
	name string

	loadMu  sync.Mutex // guards reading; never held with mu
	reading *stateRead // the state read in flight, shared by Load's callers

	mu     sync.Mutex // guards the following fields
	loaded bool
	// synced: the state was read after the room's pub/sub subscription
	// was confirmed. The subscription stays while the room is in the
	// core's table (a lost one is caught up by fill: CatchUp), so later
	// joins need no state read of their own.
	synced  bool
	last    uint64 // newest seq handed to members
	epoch   string
	members map[M]Endpoint
	// links counts members per link: a room frame goes once to each link.
	links map[*linkserver.Link]int
	// joining are members whose history is being read; live messages are
	// kept for them until they go live.
	joining map[M]*Catchup
	pending map[uint64]*corralv1.Message // ahead of a gap
	filling bool                         // a gap fill is scheduled or running
	// advanced, made by a waiter (WaitDelivered), is closed and dropped
	// when r.last or r.epoch moves (wakeLocked): nil, no waiter.
	advanced chan struct{}
	wantFill bool // fill even without a known gap
	// live: the live messages held for a write delay (delay.go).
	live delay[M]
	// grown: the open growing messages' bodies, for deltas and the
	// joiners' prefixes (grow.go).
	grown GrowView[M]
	// pres: the room's presence (presence.go).
	pres Presence[M]
	// keyed: the room's keyed state (keyed.go).
	keyed Keyed[M]

	// signals is made on the room's first signal (SignalsOrNew): most
	// rooms never get one, and a room is made for each publish to a room
	// nobody here joined. Its own lock, taken after mu (signals.go).
	signals atomic.Pointer[Signals[M]]
}

// Member is what a room knows of a member: the core's session. A room
// compares members by identity, so M is a pointer.
type Member interface {
	comparable
	// Gone reports that the member detached: a join that began before
	// then does nothing.
	Gone() bool
}

// Endpoint is where a member gets the room's frames: a connection on a
// link.
type Endpoint struct {
	Link *linkserver.Link
	Conn uint64
}

// Options are what every room of a core shares: the stores, the class
// table, the metrics and the few calls a room makes of the core
// (Subscribe, StateFollow, Go, Held). A core makes one and passes it to
// each New.
type Options[M Member] struct {
	// History holds the rooms' messages.
	History history.Store
	// Subscribe makes sure pub/sub brings a room's messages; nil without
	// pub/sub.
	Subscribe func(ctx context.Context, room string) error
	// Classes is the room class table (max members, write delay, signal
	// tick).
	Classes *roomclass.Live
	// Ctx ends with the core: no fill or timer starts after it.
	Ctx    context.Context
	Logger *slog.Logger
	// Metrics are the core's.
	Metrics Metrics
	// PresenceList reads a room's presence from the shared store
	// (presence.go); it is called without the room's lock.
	PresenceList func(ctx context.Context, room string) (presence.Snapshot, error)
	// PresenceTick is how often a room sends its presence changes.
	PresenceTick time.Duration
	// State is the keyed state store's reads (keyed.go), made without
	// the room's lock.
	State KeyedStore
	// StateFollow, when not nil, makes sure the store's changes of a
	// room reach Keyed.Apply (the store's feed, or the room's message
	// subscription that carries them) before its mirror is read.
	StateFollow func(ctx context.Context, room string) error
	// StateGapWait is how long a gap in a room's keyed changes may stay
	// open before a read closes it (as GapWait for its messages).
	StateGapWait time.Duration
	// Go runs f on a goroutine the core waits for when it closes.
	Go func(f func())
	// Held reports that r is still the core's room of its name: a room
	// no longer held lets its keyed state's expiry timer go.
	Held func(r *Room[M]) bool
}

// KeyedStore is what a room's keyed state reads of the state store
// (state.Store).
type KeyedStore interface {
	Snapshot(ctx context.Context, room string) (state.Snapshot, error)
	Since(ctx context.Context, room, epoch string, position uint64, maxBytes int) ([]state.Change, error)
	Expire(ctx context.Context, room string) (time.Time, error)
}

// Metrics are the core's metrics a room counts into.
type Metrics struct {
	// StoreOp times one store operation: call what it returns when done.
	StoreOp func(op string) func(error)
	// Published counts the messages handed to members.
	Published prometheus.Counter
	// CatchupFull counts a joining member's held live messages let go
	// past maxCatchupBuffer or maxCatchupBytes (a drop).
	CatchupFull func()
	// LiveBatchMessages and LiveBatchFlushes (by reason) count the
	// batches of a write delay (delay.go).
	LiveBatchMessages prometheus.Observer
	LiveBatchFlushes  *prometheus.CounterVec
	// Signals: set, sent, replaced before they went, left for the next
	// tick (signals.go).
	SignalsIn, SignalsOut, SignalsCoalesced, SignalsDeferred prometheus.Counter
	// PresenceFlushes counts the presence frames flushed to rooms (each
	// goes once per link).
	PresenceFlushes prometheus.Counter
	// Keyed state (keyed.go): changes delivered, of them sent as deltas,
	// snapshots sent to every member after a catch-up read, and a
	// resume's state by how it was served (since, store, snapshot).
	StateChanges, StateDeltas, StateSnapshots prometheus.Counter
	StateResumes                              *prometheus.CounterVec
}

// NopMetrics are Metrics that count into collectors no registry holds:
// a room's options where nothing reads its metrics (tests, tools). A
// caller that counts something sets that field after.
func NopMetrics() Metrics {
	counter := func(name string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name})
	}
	return Metrics{
		StoreOp:           func(string) func(error) { return func(error) {} },
		Published:         counter("published"),
		CatchupFull:       func() {},
		LiveBatchMessages: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "batch"}),
		LiveBatchFlushes:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flushes"}, []string{"reason"}),
		SignalsIn:         counter("in"),
		SignalsOut:        counter("out"),
		SignalsCoalesced:  counter("coalesced"),
		SignalsDeferred:   counter("deferred"),
		PresenceFlushes:   counter("presence_flushes"),
		StateChanges:      counter("state_changes"),
		StateDeltas:       counter("state_deltas"),
		StateSnapshots:    counter("state_snapshots"),
		StateResumes:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "state_resumes"}, []string{"how"}),
	}
}

// Catchup is a joining member's buffer of live messages. The room's lock
// guards it.
type Catchup struct {
	buf      []*corralv1.Message
	bytes    int // of buf, as CatchupSize counts them
	overflow bool
}

// CatchupSize is what msg counts against maxCatchupBytes: its payload (a
// growing message's chunk: its data) and a fixed overhead, as replay
// batches count it (replayBatchBytes).
func CatchupSize(msg *corralv1.Message) int {
	return len(msg.GetPayload()) + len(msg.GetChunk().GetData()) + 64
}

// New returns the room name, empty and not loaded.
func New[M Member](name string, opts *Options[M]) *Room[M] {
	r := &Room[M]{
		opts:    opts,
		name:    name,
		members: make(map[M]Endpoint),
		links:   make(map[*linkserver.Link]int),
		joining: make(map[M]*Catchup),
		pending: make(map[uint64]*corralv1.Message),
	}
	r.live.room, r.grown.room, r.pres.room, r.keyed.room = r, r, r, r
	return r
}

// Name is the room's name.
func (r *Room[M]) Name() string { return r.name }

// Info is the room's number of members, the newest seq handed to them
// and its history epoch, read together.
func (r *Room[M]) Info() (members int, last uint64, epoch string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.members), r.last, r.epoch
}

// Members is the room's members (joined: not those still joining); false
// when there are more than limit, and then none.
func (r *Room[M]) Members(limit int) ([]M, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.members) > limit {
		return nil, false
	}
	out := make([]M, 0, len(r.members))
	for m := range r.members {
		out = append(out, m)
	}
	return out, true
}

// Links is the links the room's members are on.
func (r *Room[M]) Links() []*linkserver.Link {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*linkserver.Link, 0, len(r.links))
	for l := range r.links {
		out = append(out, l)
	}
	return out
}

// Grown is the room's view of its open growing messages (its exported
// methods take the room's lock).
func (r *Room[M]) Grown() *GrowView[M] { return &r.grown }

// Load reads the room's state from history once. With forJoin and a shared
// store, it first subscribes to the room's live messages, so that nothing
// appended after the state read is missed. Joins of the room that arrive
// while a state read is in flight share it (a rejoin storm: one read per
// room, not one per member, and no member waits behind the others' reads):
// the subscription was confirmed before that read began (it stays while
// the room is held), so the read is as good as one of their own. For the
// same reason, once such a read is done (synced), joins read nothing.
func (r *Room[M]) Load(ctx context.Context, forJoin bool) error {
	subscribe := forJoin && r.opts.Subscribe != nil
	if subscribe {
		if err := r.opts.Subscribe(ctx, r.name); err != nil {
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

// stateRead is one state read of a room in flight (Room.reading), shared
// by the joins that arrive meanwhile.
type stateRead struct {
	done       chan struct{} // closed once err is set and the state applied
	subscribed bool          // began after the room's subscription was confirmed
	err        error
}

// readState reads the room's state from history and applies it.
func (r *Room[M]) readState(ctx context.Context) error {
	done := r.opts.Metrics.StoreOp("state")
	st, err := r.opts.History.State(ctx, r.name)
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
		wakeLocked(r)
		clear(r.pending)
	case st.Last > r.last:
		r.scheduleFillLocked()
	}
	return nil
}

// Publish appends msg to history, then hands it to the members. A
// non-zero sender holds the append to the sender's order
// (history.SenderOrder; a store that does not keep it appends as is).
func (r *Room[M]) Publish(ctx context.Context, msg *corralv1.Message, dedupe string, sender history.Sender) (res history.AppendResult, err error) {
	ctx, span := tracing.Start(ctx, tracing.SpanPublish, r.name, 0)
	defer func() { tracing.End(span, err) }()
	done := r.opts.Metrics.StoreOp("append")
	actx, aspan := tracing.Start(ctx, tracing.SpanAppend, r.name, 0)
	// Pass what this process saw, so that a history that lost its tail
	// (Redis failover) moves to a new epoch instead of reusing a seq: see
	// history.LossFence.
	r.mu.Lock()
	known := history.State{Epoch: r.epoch, Last: r.last}
	r.mu.Unlock()
	so, ordered := r.opts.History.(history.SenderOrder)
	lf, fenced := r.opts.History.(history.LossFence)
	switch {
	case ordered && sender.Stream != "":
		res, err = so.AppendOrdered(actx, r.name, msg, dedupe, sender, known)
	case fenced:
		res, err = lf.AppendKnown(actx, r.name, msg, dedupe, known)
	default:
		res, err = r.opts.History.Append(actx, r.name, msg, dedupe)
	}
	tracing.End(aspan, err)
	done(err)
	if err != nil || res.Duplicate {
		return res, err
	}
	tracing.SetSeq(span, res.Seq)
	_, fspan := tracing.Start(ctx, tracing.SpanFanout, r.name, res.Seq)
	defer fspan.End()
	r.Stored(msg, res)
	return res, nil
}

// Stored hands msg, which history just stored as res, to the members (a
// publish, or a growing message's chunk: grow.go).
func (r *Room[M]) Stored(msg *corralv1.Message, res history.AppendResult) {
	r.opts.Metrics.Published.Inc()
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

// Deliver hands a message from pub/sub to the members. While a catch-up
// is due, it only holds the message: after a failover another process
// may have moved the room to a new epoch, and its messages reuse seqs of
// the old one (history.Subscription), so nothing is delivered before the
// fill has read the room's epoch.
func (r *Room[M]) Deliver(msg *corralv1.Message) {
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
func (r *Room[M]) deliverLocked(msg *corralv1.Message) {
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
func (r *Room[M]) fanoutLocked(msg *corralv1.Message) {
	r.last = msg.GetSeq()
	wakeLocked(r)
	for _, cu := range r.joining {
		if cu.overflow {
			continue
		}
		if size := CatchupSize(msg); len(cu.buf) < maxCatchupBuffer && cu.bytes+size <= maxCatchupBytes {
			cu.buf = append(cu.buf, msg)
			cu.bytes += size
			continue
		}
		cu.overflow = true
		cu.buf, cu.bytes = nil, 0
		r.opts.Metrics.CatchupFull()
	}
	if msg.GetChunk() != nil {
		msg = r.grown.liveLocked(msg) // with a delta, maybe (grow.go)
	}
	if len(r.links) == 0 || r.live.holdLocked(msg) {
		return
	}
	f := frame.Live(r.name, msg.GetSeq(), r.epoch, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Message{Message: msg}})
	linkserver.EnqueueEach(r.links, f)
}

// scheduleFillLocked arranges for history to fill the gap before the
// pending messages if it does not close by itself. Lock must be held.
func (r *Room[M]) scheduleFillLocked() {
	if r.filling {
		return
	}
	r.filling = true
	wait := GapWait
	if len(r.pending) >= maxPending {
		wait = 0
	}
	if r.opts.Ctx.Err() != nil {
		return
	}
	time.AfterFunc(wait, r.fill)
}

// fill reads history after the last delivered seq and delivers it; an
// epoch change or a range history no longer holds becomes a Reset.
func (r *Room[M]) fill() {
	ctx, cancel := context.WithTimeout(r.opts.Ctx, 5*time.Second)
	defer cancel()
	for range 100 {
		r.mu.Lock()
		dropDeliveredLocked(r)
		after := r.last
		if len(r.pending) == 0 && !r.wantFill {
			r.filling = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		done := r.opts.Metrics.StoreOp("read")
		page, err := r.opts.History.Read(ctx, history.Query{Room: r.name, After: after})
		done(err)
		if err == nil {
			page.State, err = r.fenceLoss(ctx, page.State)
		}
		r.mu.Lock()
		switch {
		case err != nil:
			r.filling = false
			if r.opts.Ctx.Err() == nil {
				r.opts.Logger.Warn("gap fill failed; retrying", "room", r.name, "err", err)
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
func dropDeliveredLocked[M Member](r *Room[M]) {
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
func (r *Room[M]) fenceLoss(ctx context.Context, st history.State) (history.State, error) {
	lf, ok := r.opts.History.(history.LossFence)
	if !ok {
		return st, nil
	}
	r.mu.Lock()
	known := history.State{Epoch: r.epoch, Last: r.last}
	r.mu.Unlock()
	if st.Epoch != known.Epoch || st.Last >= known.Last {
		return st, nil
	}
	done := r.opts.Metrics.StoreOp("fence")
	fenced, err := lf.Fence(ctx, r.name, known)
	done(err)
	if err != nil || fenced.Epoch == "" {
		return st, err
	}
	// The same epoch back: nothing was lost, st was only read before this
	// process delivered a message appended after the read.
	if fenced.Epoch != known.Epoch {
		r.opts.Logger.Warn("history lost acknowledged messages (Redis failover?): room moves to a new epoch",
			"room", r.name, "seen", known.Last, "stored", fenced.Last)
	}
	return history.State{Epoch: fenced.Epoch, First: st.First, Last: fenced.Last}, nil
}

// CatchUp checks history for messages pub/sub may have missed (after its
// connection to Redis broke).
func (r *Room[M]) CatchUp() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wantFill = true
	r.scheduleFillLocked()
}

// Reset moves the room to another history epoch: members and joining
// members are told to refetch, and delivery continues after last.
func (r *Room[M]) Reset(epoch string, last uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resetLocked(epoch, last)
}

// resetLocked is Reset. Lock must be held.
func (r *Room[M]) resetLocked(epoch string, last uint64) {
	r.live.flushLocked(flushEvent) // the held messages are of the old epoch
	r.epoch, r.last = epoch, last
	wakeLocked(r)
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

// Join is one member's join of a room (or a room of its resume): where
// the client continues, and what BeginJoin, the core's history read and
// GoLive fill in.
type Join struct {
	Since uint64
	Epoch string
	// Position: (Since, Epoch) is where the client continues, checked
	// against the room's epoch; without it the join is live from now.
	Position bool
	Resumed  bool
	// OpenPrefix: with a position, the client lacks the bodies of the
	// growing messages open there (RoomPosition.open_prefix): it gets
	// them as prefixes, as a join that is no resume does.
	OpenPrefix bool
	// Filled by BeginJoin:
	Catchup   *Catchup // the live messages the room holds for this join
	Target    uint64   // the room's last seq when the join began
	RoomEpoch string
	Replay    bool // history must be read: (Since, Target]
	// Filled by the core's history read:
	Msgs   []*corralv1.Message
	ReadOK bool
	// Filled by GrowView.ReadOpen: the room's open growing messages
	// (the store's, at OpenEpoch), the joiner's prefixes.
	Open      []*corralv1.Message
	OpenEpoch string
	// A replay is read and sent a page at a time: From is the last seq
	// sent (Since, until the first page); More: history holds more of
	// (From, Target] than Msgs; Paging: Joined was sent and the member
	// waits for the edge to take a page (JoinHooks.WaitPage).
	From   uint64
	More   bool
	Paging bool
	// StatePos, StateEpoch: the keyed state the client holds (keyed.go).
	StatePos   uint64
	StateEpoch string
	// StateOld: the store's changes after StatePos when the room's mirror
	// no longer keeps them (Keyed.ReadOld).
	StateOld []state.Change
}

// JoinHooks are the core's parts a member going live gets, called by
// GoLive with the room's lock held.
type JoinHooks interface {
	// WaitPage: the member waits for the edge to take a replay page.
	WaitPage()
}

// BeginJoin registers s as joining: live messages are kept for it from now
// on. It decides whether history must be read. It reports false, and
// registers nothing, when the room holds its class's max-members (counted
// on this core) and s is not one of them.
func (r *Room[M]) BeginJoin(s M, ep Endpoint, q *Join) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.Gone() {
		return true // goLive finds nothing to do
	}
	_, member := r.members[s]
	if limit := r.opts.Classes.Lookup(r.name).MaxMembers; limit > 0 && !member && len(r.members)+len(r.joining) >= limit {
		return false
	}
	if old, ok := r.members[s]; ok {
		r.removeLocked(s, old)
		ep.Link.Enqueue(frame.Membership(old.Conn, r.name, false))
	}
	q.Catchup = &Catchup{}
	r.joining[s] = q.Catchup
	q.Target, q.RoomEpoch = r.last, r.epoch
	q.Replay = q.Position && q.Epoch == r.epoch && q.Since < r.last
	return true
}

// GoLive finishes a join: the member gets Joined (or Reset and Joined), the
// messages it missed in order, then live traffic. It returns the position
// the member continues from, and false if the join was cancelled or
// waits for the edge to take a page of its replay: a replay longer than
// the page read (q.More) is sent a page at a time, the last batch of
// each page asking the edge to report it taken (ConnReplay.ack, then
// the core's replayTaken), while the room keeps holding live messages
// for the joiner; only the last page is followed by those, ReplayEnd
// and live.
func (r *Room[M]) GoLive(s M, ep Endpoint, q *Join, h JoinHooks) (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cu, ok := r.joining[s]
	if !ok || (q.Catchup != nil && cu != q.Catchup) {
		return 0, false // left, detached or joined again meanwhile
	}
	if s.Gone() {
		delete(r.joining, s)
		return 0, false // detached meanwhile; detach found nothing to undo
	}
	if q.More && q.ReadOK && q.RoomEpoch == r.epoch && !cu.overflow && q.Epoch == r.epoch {
		if r.replayPageLocked(ep, q, cu, h) {
			return 0, false
		}
	}
	delete(r.joining, s)
	// Held messages go before s becomes a member at the edge: s gets
	// them in its catch-up, up to r.last, and not a second time.
	r.live.flushLocked(flushEvent)
	send := ep.Link.Enqueue
	joined := func(seq uint64, replay bool) {
		send(frame.Position(ep.Conn, r.name, seq, r.epoch, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Joined{Joined: &corralv1.Joined{
			Room: r.name, Seq: seq, Epoch: r.epoch, Resumed: q.Resumed, Replay: replay,
		}}}))
	}
	fresh := false // joined at r.last without a replay: gets the prefixes
	switch {
	case !q.Position:
		joined(r.last, false)
		fresh = true
	case q.Epoch != r.epoch || q.Since > r.last:
		// An empty epoch never matches: a position the server cannot
		// check is a Reset, never a silent skip.
		send(frame.Position(ep.Conn, r.name, r.last, r.epoch, frame.Reset(r.name, r.last, r.epoch)))
		joined(r.last, false)
		fresh = true
	case q.Since == r.last && !q.Paging:
		joined(q.Since, false)
		// A position that lacks the open messages' bodies gets them
		// here, as a live join does (grow.go).
		fresh = q.OpenPrefix
	default:
		// Missed messages: (since, target] from history (when replay),
		// then what was delivered live meanwhile, up to r.last.
		var out []*corralv1.Message
		next := max(q.Since, q.From) + 1
		take := func(ms []*corralv1.Message) {
			for _, m := range ms {
				if m.GetSeq() == next && next <= r.last {
					out = append(out, m)
					next++
				}
			}
		}
		if (q.ReadOK || !q.Replay) && q.RoomEpoch == r.epoch && !cu.overflow {
			take(q.Msgs)
			take(cu.buf)
		}
		if next != r.last+1 {
			send(frame.Position(ep.Conn, r.name, r.last, r.epoch, frame.Reset(r.name, r.last, r.epoch)))
			joined(r.last, false)
			fresh = true
			break
		}
		if !q.Paging {
			joined(q.Since, true)
		}
		// A join from a position inside a growing message gets it whole
		// after the replay instead of its chunks (grow.go).
		out, prefixes := r.grown.replayPrefixesLocked(q, cu, out)
		sendReplayLocked(r, ep, out, false)
		// The replay ends here: what follows is live.
		send(frame.Position(ep.Conn, r.name, r.last, r.epoch, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_ReplayEnd{ReplayEnd: &corralv1.ReplayEnd{
			Room: r.name, Seq: r.last,
		}}}))
		for _, p := range prefixes {
			send(frame.Conn(ep.Conn, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Message{Message: p}}))
		}
	}
	if fresh {
		r.grown.sendPrefixesLocked(ep, q, cu)
	}
	for _, snap := range r.signals.Load().Snapshot() {
		send(frame.Snapshot(ep.Conn, r.name, snap))
	}
	r.keyed.joinLocked(ep, q)
	ep.Link.Enqueue(frame.Membership(ep.Conn, r.name, true))
	r.members[s] = ep
	r.links[ep.Link]++
	return r.last, true
}

// replayPageLocked sends q's page of a paged replay (q.Msgs, read by
// readMissed, with more of the replay left in history) and leaves s
// joining until the edge took it (core/session's Session.WaitPage,
// then the core's replayTaken). It reports false, sending nothing, when
// the page does not follow what was sent: goLive then ends the join (a
// Reset). Lock must be held.
func (r *Room[M]) replayPageLocked(ep Endpoint, q *Join, cu *Catchup, h JoinHooks) bool {
	next := max(q.Since, q.From) + 1
	var out []*corralv1.Message
	for _, m := range q.Msgs {
		if m.GetSeq() == next && next <= r.last {
			out = append(out, m)
			next++
		}
	}
	if len(out) == 0 || out[0].GetSeq() != max(q.Since, q.From)+1 {
		return false
	}
	if !q.Paging {
		ep.Link.Enqueue(frame.Position(ep.Conn, r.name, q.Since, r.epoch, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Joined{Joined: &corralv1.Joined{
			Room: r.name, Seq: q.Since, Epoch: r.epoch, Resumed: q.Resumed, Replay: true,
		}}}))
	}
	q.From, q.Paging, q.Msgs = next-1, true, nil
	out, _ = r.grown.replayPrefixesLocked(q, cu, out) // chunks only: the prefixes come after the last page
	if len(out) == 0 {
		// Every message of the page was a chunk the prefixes replace: an
		// empty batch still carries the ack.
		ep.Link.Enqueue(frame.ReplayAck(ep.Conn, r.name, q.From, r.epoch, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Batch{Batch: &corralv1.Batch{}}}))
	} else {
		sendReplayLocked(r, ep, out, true)
	}
	h.WaitPage()
	return true
}

// sendReplayLocked sends out (missed messages, in seq order) to ep as
// replay batches; with ack, the last asks the edge to report it taken.
// Lock must be held.
func sendReplayLocked[M Member](r *Room[M], ep Endpoint, out []*corralv1.Message, ack bool) {
	for len(out) > 0 {
		n, size := 0, 0
		for n < len(out) && n < replayBatch && (n == 0 || size < replayBatchBytes) {
			size += CatchupSize(out[n])
			n++
		}
		frames := make([]*corralv1.ServerFrame, n)
		for i, m := range out[:n] {
			frames[i] = &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Message{Message: m}}
		}
		b := &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Batch{Batch: &corralv1.Batch{Frames: frames}}}
		if ack && n == len(out) {
			ep.Link.Enqueue(frame.ReplayAck(ep.Conn, r.name, out[n-1].GetSeq(), r.epoch, b))
		} else {
			ep.Link.Enqueue(frame.Replay(ep.Conn, r.name, out[n-1].GetSeq(), r.epoch, b))
		}
		out = out[n:]
	}
}

// removeLocked removes member s; the held live messages go first, so s
// gets what was published before it left. Lock must be held.
func (r *Room[M]) removeLocked(s M, ep Endpoint) {
	r.live.flushLocked(flushEvent)
	delete(r.members, s)
	r.pres.unsubscribeLocked(s)
	if n := r.links[ep.Link] - 1; n > 0 {
		r.links[ep.Link] = n
	} else {
		delete(r.links, ep.Link)
	}
}

// Leave removes s (a member or a joining one). With notify, the member's
// connection stops receiving the room and gets a Left frame. It reports
// whether s was in the room.
func (r *Room[M]) Leave(s M, notify *corralv1.Left) bool {
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
	r.signals.Load().Clear(s)
	if notify != nil {
		ep.Link.Enqueue(frame.Membership(ep.Conn, r.name, false))
		ep.Link.Enqueue(frame.Left(ep.Conn, notify))
	}
	return true
}

// WaitDelivered waits, at most wait, until r handed seq (of epoch) to
// its members, or moved to another epoch.
func (r *Room[M]) WaitDelivered(ctx context.Context, seq uint64, epoch string, wait time.Duration) {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		r.mu.Lock()
		if !r.loaded || r.epoch != epoch || r.last >= seq {
			r.mu.Unlock()
			return
		}
		if r.advanced == nil {
			r.advanced = make(chan struct{})
		}
		moved := r.advanced
		r.mu.Unlock()
		select {
		case <-moved:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// Empty reports that the room has no member and no joining one.
func (r *Room[M]) Empty() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.members) == 0 && len(r.joining) == 0
}

// wakeLocked wakes whoever waits for the room's position to move
// (advanced). Lock must be held.
func wakeLocked[M Member](r *Room[M]) {
	if r.advanced != nil {
		close(r.advanced)
		r.advanced = nil
	}
}
