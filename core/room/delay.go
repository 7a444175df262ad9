package room

import (
	"time"

	"github.com/corral-rt/corral/core/frame"
	"github.com/corral-rt/corral/core/linkserver"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/roomclass"
)

// A room whose class has a write delay (roomclass.Class.WriteDelay) holds
// its live messages for up to that long and sends them to each link as
// one RoomLive carrying a Batch, which the edge encodes once and writes to
// each socket in one write: past the one-write-per-message ceiling of a
// busy room, at the cost of that much added latency.
//
// The window starts with the first held message (a timer per room, only
// while something is held: an idle room does not tick). A window ends
// early at MaxDelayedMessages or maxDelayedBytes, and at once before
// anything that must not overtake the held messages: a member going live
// (a join or a resume: its Joined and replay are cut at r.last, so the
// held ones must reach the link before it becomes a member there), a
// member leaving (it must get what was published before it left), and a
// reset (the held messages belong to the old epoch). A room is forgotten
// only when it has no member, so nothing held is then owed to anyone.
// Joining members' catch-up buffers take each message at once, as without
// a delay.
//
// Acks are not delayed: a publisher may get its Published before its own
// message comes back in the room.

const (
	// MaxDelayedMessages and maxDelayedBytes end a window early: one
	// batch stays a bounded queue entry and a bounded write.
	MaxDelayedMessages = 256
	maxDelayedBytes    = 64 << 10
)

// Flush reasons, the label of corral_core_live_batch_flushes_total.
const (
	flushTimer = "timer"
	flushFull  = "full"
	flushEvent = "event"
)

// delay is a room's held live messages. Room.mu guards these fields,
// not a lock of their own: the held messages are cut against the room's
// position and members (r.last, r.links) and must go out before a member
// goes live, leaves or the room resets, all under Room.mu; a second lock
// taken in fanoutLocked, per message, would buy nothing. Lock must be
// held for every method but flushTimer, which takes it.
type delay[M Member] struct {
	room   *Room[M]
	frames []*corralv1.ServerFrame // held messages, in seq order
	bytes  int                     // their approximate encoded size
	last   uint64                  // seq of the newest held message
	timer  *time.Timer             // ends the window; nil when nothing is held
	gen    uint64                  // counts windows: a stale timer finds another
	// table and delay cache the class's write delay for the table in
	// force: one class lookup per reload, not per message.
	table *roomclass.Table
	delay time.Duration
}

// delayLocked is the room's write delay in the class table in force.
// Lock must be held.
func (d *delay[M]) delayLocked() time.Duration {
	r := d.room
	if t := r.opts.Classes.Table(); t != d.table {
		d.table, d.delay = t, t.Lookup(r.name).WriteDelay
	}
	return d.delay
}

// holdLocked holds msg for the current window, starting one if none is
// open, and reports false when the room has no write delay (the caller
// sends msg at once). Lock must be held.
func (d *delay[M]) holdLocked(msg *corralv1.Message) bool {
	if len(d.frames) == 0 {
		delay := d.delayLocked()
		if delay <= 0 {
			return false
		}
		gen := d.gen
		d.timer = time.AfterFunc(delay, func() { d.flushTimer(gen) })
	}
	d.frames = append(d.frames, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Message{Message: msg}})
	d.bytes += len(msg.GetPayload()) + 64
	d.last = msg.GetSeq()
	if len(d.frames) >= MaxDelayedMessages || d.bytes >= maxDelayedBytes {
		d.flushLocked(flushFull)
	}
	return true
}

// flushTimer ends window gen, unless an earlier flush ended it.
func (d *delay[M]) flushTimer(gen uint64) {
	d.room.mu.Lock()
	defer d.room.mu.Unlock()
	if d.gen == gen {
		d.flushLocked(flushTimer)
	}
}

// flushLocked sends the held messages, if any, as one frame per link and
// closes the window. Lock must be held.
func (d *delay[M]) flushLocked(reason string) {
	n := len(d.frames)
	if n == 0 {
		return
	}
	d.gen++
	if reason != flushTimer {
		d.timer.Stop() // if it fires anyway, it finds another gen
	}
	d.timer = nil
	f := d.frames[0]
	if n > 1 {
		f = &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Batch{Batch: &corralv1.Batch{Frames: d.frames}}}
	}
	last := d.last
	// The frames now belong to the queued batch: start a fresh slice.
	d.frames, d.bytes, d.last = nil, 0, 0
	r := d.room
	r.opts.Metrics.LiveBatchMessages.Observe(float64(n))
	r.opts.Metrics.LiveBatchFlushes.WithLabelValues(reason).Inc()
	if len(r.links) > 0 {
		linkserver.EnqueueEach(r.links, frame.Live(r.name, last, r.epoch, f))
	}
}
