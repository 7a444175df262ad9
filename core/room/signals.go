package room

import (
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/corral-rt/corral/core/frame"
	"github.com/corral-rt/corral/core/linkserver"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/roomclass"
)

// Signals are ephemeral, keyed values (a cursor, a typing flag): never
// stored, and per room and key only the latest value matters. A room keeps
// the latest value per key and a dirty set; a flush every SignalTick sends
// only the keys that changed since the last one, as one batch, once per
// link. A key that does not change is never sent again; a cleared key is
// sent once as cleared and forgotten. (Seed W2: delivering every cursor
// event in order left 0.38% within 200 ms; latest-value-per-key on a 33 ms
// tick with a dirty flag reached 99.97%.)

// MaxSignalKeys bounds the keys one session holds in a room (set and not
// yet cleared): the room keeps every key's latest value until its owner
// clears it or goes, so keys without a bound would grow the room's memory
// with every distinct name a client makes up. A cursor, a selection and a
// typing flag per user fit many times over.
const MaxSignalKeys = 64

// maxSignalTickBytes bounds what one flush of a room sends (the sum of
// its signals' sizes): the keys past it stay dirty, their latest values
// kept, and go at the next tick, first. A tick's batch is one frame to
// every member; unbounded, one sender's 64 keys of 60 KB made a 3.8 MB
// frame, larger than a connection's whole send queue (edge QueueBytes,
// then 1 MiB), and every member was closed as a slow consumer, tight-loop
// readers too. 256 KiB a tick is ~7.6 MiB/s at the default 33 ms tick,
// what a reader on a good link takes; the edge's queue bound keeps 1 MiB
// for a tick of signals and presence (config.Edge.SenderBurstBytes).
// One signal larger than it still goes, alone.
const maxSignalTickBytes = 256 << 10

// Signals is a room's signals. Its own mu guards them, so that a
// busy room's signals do not wait behind its publishes' fan-out. The
// order is Room.mu, then Signals.mu, never the reverse: a flush
// holds both (it sends to the room's links, and a member going live must
// get either the snapshot or the flush of a value, in order, before the
// next flush), and a member leaving or going live takes mu within the
// room's lock (clear, snapshot). set takes mu alone.
type Signals[M Member] struct {
	room *Room[M]

	mu        sync.Mutex // guards the following fields
	latest    map[string]*corralv1.SignalEvent
	owner     map[string]M    // who set each key; cleared when they go
	owned     map[M]int       // keys per owner, at most MaxSignalKeys
	dirty     []string        // keys changed since the last flush, in order
	isDirty   map[string]bool // the keys in dirty
	scheduled bool            // a flush is pending
	tick      time.Duration   // this room's flush period, its class's at the last schedule
}

// SignalsOrNew is the room's signals, made on its first signal.
func (r *Room[M]) SignalsOrNew() *Signals[M] {
	if st := r.signals.Load(); st != nil {
		return st
	}
	r.signals.CompareAndSwap(nil, &Signals[M]{room: r})
	return r.signals.Load()
}

// Signals is the room's signals; nil before its first signal (a nil
// *Signals has none).
func (r *Room[M]) Signals() *Signals[M] { return r.signals.Load() }

// Set records the latest value of a key and schedules a flush. It
// reports false, recording nothing, for a new key past MaxSignalKeys of
// s: the caller refuses it.
func (st *Signals[M]) Set(s M, ev *corralv1.SignalEvent) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	metrics := &st.room.opts.Metrics
	metrics.SignalsIn.Inc()
	if st.latest == nil {
		st.latest = make(map[string]*corralv1.SignalEvent)
		st.owner = make(map[string]M)
		st.owned = make(map[M]int)
		st.isDirty = make(map[string]bool)
	}
	key := ev.GetKey()
	old, had := st.owner[key]
	if old != s {
		if st.owned[s] >= MaxSignalKeys {
			return false
		}
		st.owned[s]++
		if had {
			st.disownLocked(old)
		}
	}
	if st.isDirty[key] {
		metrics.SignalsCoalesced.Inc() // replaced before it went out
	} else {
		st.markDirtyLocked(key)
	}
	st.latest[key] = ev
	st.owner[key] = s
	st.scheduleLocked()
	return true
}

// disownLocked uncounts one key of s. Lock must be held.
func (st *Signals[M]) disownLocked(s M) {
	if n := st.owned[s] - 1; n > 0 {
		st.owned[s] = n
	} else {
		delete(st.owned, s)
	}
}

// markDirtyLocked queues key for the next flush. Lock must be held.
func (st *Signals[M]) markDirtyLocked(key string) {
	st.dirty = append(st.dirty, key)
	st.isDirty[key] = true
}

// Clear clears every key s set: its cursor disappears for everyone. A
// nil st (a room without signals) has none.
func (st *Signals[M]) Clear(s M) {
	if st == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for key, owner := range st.owner {
		if owner != s {
			continue
		}
		prev := st.latest[key]
		if prev.GetClear() {
			continue
		}
		if !st.isDirty[key] {
			st.markDirtyLocked(key)
		}
		st.latest[key] = &corralv1.SignalEvent{Room: st.room.name, Key: key, Sender: prev.GetSender(), Clear: true}
		st.scheduleLocked()
	}
}

// scheduleLocked arranges a flush when keys are dirty and none is
// pending. Lock must be held.
func (st *Signals[M]) scheduleLocked() {
	if st.scheduled || len(st.dirty) == 0 {
		return
	}
	st.scheduled = true
	// Looked up at each flush: a reloaded class applies to running rooms.
	st.tick = signalTick(st.room.opts.Classes, st.room.name)
	time.AfterFunc(st.tick, st.flush)
}

// flush sends the dirty keys' latest values as one batch per link.
func (st *Signals[M]) flush() {
	r := st.room
	r.mu.Lock()
	defer r.mu.Unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	st.scheduled = false
	if len(st.dirty) == 0 {
		return
	}
	frames := make([]*corralv1.ServerFrame, 0, len(st.dirty))
	size, sent := 0, 0
	for _, key := range st.dirty {
		ev := st.latest[key]
		n := proto.Size(ev)
		if sent > 0 && size+n > maxSignalTickBytes {
			break // the rest at the next tick
		}
		size += n
		sent++
		delete(st.isDirty, key)
		frames = append(frames, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Signal{Signal: ev}})
		if ev.GetClear() {
			delete(st.latest, key)
			st.disownLocked(st.owner[key])
			delete(st.owner, key)
		}
	}
	st.dirty = append(st.dirty[:0], st.dirty[sent:]...)
	if len(st.dirty) > 0 {
		r.opts.Metrics.SignalsDeferred.Add(float64(len(st.dirty)))
		st.scheduleLocked()
	}
	r.opts.Metrics.SignalsOut.Add(float64(len(frames)))
	if len(r.links) == 0 {
		return
	}
	f := frame.Signals(r.name, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Batch{Batch: &corralv1.Batch{Frames: frames}}})
	linkserver.EnqueueEach(r.links, f)
}

// Snapshot is the current value of every key, for a member going live,
// in batches of at most maxSignalTickBytes each (one signal larger than
// that alone), so that no snapshot frame is larger than a flush's; nil
// when there is none (and for a nil st, a room without signals). The
// room's lock must be held (the member goes live under it), not this one.
func (st *Signals[M]) Snapshot() []*corralv1.ServerFrame {
	if st == nil {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	var out, frames []*corralv1.ServerFrame
	size := 0
	cut := func() {
		if len(frames) > 0 {
			out = append(out, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Batch{Batch: &corralv1.Batch{Frames: frames}}})
		}
		frames, size = nil, 0
	}
	for _, ev := range st.latest {
		if ev.GetClear() {
			continue
		}
		n := proto.Size(ev)
		if len(frames) > 0 && size+n > maxSignalTickBytes {
			cut()
		}
		size += n
		frames = append(frames, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Signal{Signal: ev}})
	}
	cut()
	return out
}

// Values is the current value of every key that is not cleared, in no
// order. The room's lock may be held or not.
func (st *Signals[M]) Values() []*corralv1.SignalEvent {
	if st == nil {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []*corralv1.SignalEvent
	for _, ev := range st.latest {
		if !ev.GetClear() {
			out = append(out, ev)
		}
	}
	return out
}

// signalTick is the flush period of a room: its class's signal tick.
func signalTick(classes *roomclass.Live, room string) time.Duration {
	return classes.Lookup(room).SignalTick
}
