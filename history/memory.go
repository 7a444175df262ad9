package history

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-rt/corral/events"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"google.golang.org/protobuf/proto"
)

// MemoryOptions configures [NewMemory]. Zero fields mean defaults.
type MemoryOptions struct {
	// MaxLen is how many messages each room retains; default 1000.
	MaxLen int
	// DedupeWindow is how long a dedupe key is remembered; default 2m.
	DedupeWindow time.Duration
	// TTL is how long a room's history lives after its last append, or
	// after it was last held (see [Memory.Hold]), whichever is later;
	// default 24h, as [RedisOptions.TTL]. A room past it is forgotten
	// and comes back under a new epoch.
	TTL time.Duration
	// Events, when set, receives the event of every appended message in
	// the same step as the append, in seq order per room.
	Events *events.Memory
	// MaxBytes bounds the bytes of every room's retained messages
	// together (each counted as its payload, id and room name and 64
	// bytes); default 256 MiB. Past it the store sheds (see
	// [Memory.Stats]): first whole rooms nobody holds, least recently
	// used first, then the oldest half of the largest held rooms' history,
	// until it is under nine tenths of the bound. Without it, 1,040
	// abandoned rooms with one 60 KB message each held 118 MiB for the
	// 24 h lifetime. A room shed comes back under a new epoch, and a
	// history trimmed answers a position before it with a reset: nothing
	// is skipped silently.
	MaxBytes int64
	// MaxKeys bounds the dedupe keys and sender marks (SenderOrder)
	// every room together remembers within DedupeWindow; default
	// 1,048,576, negative: unbounded. Forgetting one early would break
	// its guarantee (a retry within the window stored twice, a sender's
	// order unchecked), so past the bound, once the keys past their
	// window are forgotten, an append that would add one is refused
	// with an error wrapping [ErrBusy] (counted in [MemoryStats]); a
	// duplicate is still answered. A room forgotten (its lifetime over,
	// or shed for MaxBytes) forgets its keys.
	MaxKeys int
	// Limits, when set, gives each room its own MaxLen and TTL (its room
	// class); a zero field keeps the default above. A room's MaxLen is
	// fixed when its ring is created (a change applies once the room is
	// forgotten); its TTL is looked up at each append and release.
	Limits func(room string) Limits
}

// Memory is a [Store] in process memory: a ring buffer per room. Its epochs
// derive from a random secret of the store, so a restart resets every
// room. All methods may be called concurrently.
//
// Memory holds a room only while it is in use: while it is held (see
// [Memory.Hold]) or while it has history younger than MemoryOptions.TTL.
// A room that has neither is forgotten (evicted), with its epoch: when it
// is used again it starts over at seq 1 under a new epoch, so a client
// holding a position from before gets a reset, never a silent gap. Reads
// (Read, ReadMany, State) of a room the store does not hold create
// nothing: they report an empty history under the epoch the room would
// be created with. That epoch is a hash of the room's name, a secret of
// the store and a count of evictions of rooms that had messages: it stays
// the same until such an eviction, and never repeats an epoch under which
// the room had messages. (A room evicted without ever having had a
// message may come back under its old epoch: a position in it cannot miss
// anything.)
type Memory struct {
	maxLen int
	window time.Duration
	ttl    time.Duration
	events *events.Memory // nil: no event log
	limits func(room string) Limits
	rooms  sync.Map // room name → *memRoom; see memRoom.dead
	salt   [16]byte // random: makes epochs unguessable and per store

	// genMu orders epoch choices (read lock) against evictions of rooms
	// with messages (write lock), so that a room created after such an
	// eviction gets an epoch of the new generation.
	genMu sync.RWMutex
	gen   uint64 // guarded by genMu: evictions of rooms with messages

	// minTTL is the shortest lifetime of a room so far (ns): the sweep
	// runs often enough for it.
	minTTL atomic.Int64

	sweepMu   sync.Mutex // guards nextSweep; held by one sweep at a time
	nextSweep time.Time

	// maxBytes bounds total, the bytes of every live room's messages
	// (memRoom.bytes summed); shedMu is held by the one shedding.
	maxBytes     int64
	total        atomic.Int64
	shedMu       sync.Mutex
	shedRooms    atomic.Uint64 // rooms evicted for the bound
	shedMessages atomic.Uint64 // messages trimmed from held rooms for it

	// maxKeys bounds keys, the dedupe keys and sender marks of every
	// live room (len(memRoom.dedupe)+len(memRoom.senders) summed).
	maxKeys      int64
	keys         atomic.Int64
	keysRefused  atomic.Uint64
	keySweepMu   sync.Mutex // guards nextKeySweep; held by one sweep
	nextKeySweep time.Time
}

// NewMemory returns an empty in-process store.
func NewMemory(opts MemoryOptions) *Memory {
	if opts.MaxLen <= 0 {
		opts.MaxLen = 1000
	}
	if opts.DedupeWindow <= 0 {
		opts.DedupeWindow = 2 * time.Minute
	}
	if opts.TTL <= 0 {
		opts.TTL = 24 * time.Hour
	}
	if opts.MaxBytes == 0 {
		opts.MaxBytes = 256 << 20
	} else if opts.MaxBytes < 0 {
		opts.MaxBytes = math.MaxInt64
	}
	if opts.MaxKeys == 0 {
		opts.MaxKeys = 1 << 20
	} else if opts.MaxKeys < 0 {
		opts.MaxKeys = math.MaxInt
	}
	m := &Memory{
		maxBytes: opts.MaxBytes, maxKeys: int64(opts.MaxKeys),
		maxLen: opts.MaxLen, window: opts.DedupeWindow, ttl: opts.TTL, events: opts.Events, limits: opts.Limits,
		nextSweep: time.Now().Add(sweepEvery(opts.TTL)),
	}
	m.minTTL.Store(int64(opts.TTL))
	_, _ = rand.Read(m.salt[:]) // never fails
	return m
}

// limitsOf is room's MaxLen and TTL: its Limits, or the defaults. It
// keeps minTTL, the sweep's period, no longer than a room's lifetime.
func (m *Memory) limitsOf(room string) (int, time.Duration) {
	maxLen, ttl := m.maxLen, m.ttl
	if m.limits == nil {
		return maxLen, ttl
	}
	l := m.limits(room)
	if l.MaxLen > 0 {
		maxLen = l.MaxLen
	}
	if l.TTL > 0 {
		ttl = l.TTL
	}
	for {
		cur := m.minTTL.Load()
		if int64(ttl) >= cur || m.minTTL.CompareAndSwap(cur, int64(ttl)) {
			return maxLen, ttl
		}
	}
}

// epochLocked is the epoch room gets when it is created now. genMu must
// be held (read or write).
func (m *Memory) epochLocked(room string) string {
	h := sha256.New()
	h.Write(m.salt[:])
	h.Write(binary.BigEndian.AppendUint64(nil, m.gen))
	h.Write([]byte(room))
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// epochOf is the epoch of a room the store does not hold.
func (m *Memory) epochOf(room string) string {
	m.genMu.RLock()
	defer m.genMu.RUnlock()
	return m.epochLocked(room)
}

// sweepEvery is how often the rooms past their lifetime are looked for:
// a room outlives its TTL by at most this much.
func sweepEvery(ttl time.Duration) time.Duration {
	return min(max(ttl/4, time.Millisecond), time.Minute)
}

// Events returns the log that receives the store's message events, or nil.
func (m *Memory) Events() events.Log {
	if m.events == nil {
		return nil
	}
	return m.events
}

type memRoom struct {
	epoch string

	mu sync.Mutex // guards the following fields
	// dead: the room was evicted (removed from Memory.rooms); a caller
	// that found it there before must look the room up again.
	dead bool
	// holds counts Hold calls not yet released; a held room is never
	// evicted.
	holds int
	// used is when the room was last appended to or released, the start
	// of its lifetime.
	used time.Time
	// ttl is the room's lifetime (its Limits at the last append or
	// release); maxLen, set at creation, bounds buf.
	ttl    time.Duration
	maxLen int
	// buf holds the retained messages; it grows to maxLen, then wraps.
	// head is the index of the oldest, n how many are retained.
	buf     []*corralv1.Message
	head, n int
	last    uint64
	bytes   int64 // what the retained messages count against MaxBytes
	dedupe  map[string]uint64
	// senders is each sender stream's last stored place (SenderOrder).
	senders map[string]senderMark
	expiry  []dedupeExpiry // in expiry order; expiry[qhead:] is live
	qhead   int
	// growing holds the growing messages by id (grow.go); their bodies
	// count in bytes.
	growing map[string]*growing
}

// dedupeExpiry is when a dedupe key, or a sender's mark (sender true),
// leaves the window.
type dedupeExpiry struct {
	key    string
	at     time.Time
	sender bool
}

// senderMark is a sender stream's last stored place and when it expires.
type senderMark struct {
	seq uint64
	at  time.Time
}

// lock returns name's room, locked and alive, creating it when needed.
func (m *Memory) lock(name string) *memRoom {
	for {
		v, ok := m.rooms.Load(name)
		if !ok {
			m.genMu.RLock()
			maxLen, ttl := m.limitsOf(name)
			v, _ = m.rooms.LoadOrStore(name, &memRoom{epoch: m.epochLocked(name), used: time.Now(), maxLen: maxLen, ttl: ttl})
			m.genMu.RUnlock()
		}
		r := v.(*memRoom)
		r.mu.Lock()
		if !r.dead {
			return r
		}
		r.mu.Unlock() // evicted meanwhile: its successor is not
	}
}

// lockLive is lock for a room about to be used: a room past its lifetime
// that the sweep has not evicted yet is evicted first (its history is
// gone), so the room starts over under a new epoch.
func (m *Memory) lockLive(name string) *memRoom {
	for {
		r := m.lock(name)
		now := time.Now()
		if r.n == 0 || r.holds > 0 || now.Sub(r.used) < r.ttl {
			return r
		}
		m.evictLocked(name, r, now)
		r.mu.Unlock()
	}
}

// lockIfAny returns name's room, locked and alive, or nil when the store
// holds none. It creates nothing.
func (m *Memory) lockIfAny(name string) *memRoom {
	for {
		v, ok := m.rooms.Load(name)
		if !ok {
			return nil
		}
		r := v.(*memRoom)
		r.mu.Lock()
		if !r.dead {
			return r
		}
		r.mu.Unlock()
	}
}

// evictLocked forgets r if nothing keeps it: no hold, and no message or
// none younger than the TTL. It reports whether r was evicted. Lock must
// be held.
func (m *Memory) evictLocked(name string, r *memRoom, now time.Time) bool {
	if r.dead || r.holds > 0 || (r.n > 0 && now.Sub(r.used) < r.ttl) {
		return false
	}
	m.forgetLocked(name, r)
	return true
}

// forgetLocked evicts r, whatever its lifetime. Lock must be held.
func (m *Memory) forgetLocked(name string, r *memRoom) {
	r.dead = true
	m.total.Add(-r.bytes)
	r.bytes = 0
	m.keys.Add(-int64(len(r.dedupe) + len(r.senders)))
	if r.last == 0 {
		m.rooms.CompareAndDelete(name, r)
		return
	}
	m.genMu.Lock()
	m.gen++
	m.rooms.CompareAndDelete(name, r)
	m.genMu.Unlock()
}

// Hold keeps room (its epoch and history) in memory until a matching
// [Memory.Release], even without messages or past its TTL: the core holds
// the rooms it has members in. Holds are counted.
func (m *Memory) Hold(room string) {
	r := m.lockLive(room)
	r.holds++
	r.mu.Unlock()
}

// Release drops a hold taken by [Memory.Hold]. The room's lifetime starts
// again; a room left without messages is forgotten at once.
func (m *Memory) Release(room string) {
	r := m.lockIfAny(room)
	if r == nil {
		return
	}
	defer r.mu.Unlock()
	if r.holds > 0 {
		r.holds--
	}
	now := time.Now()
	r.used = now
	_, r.ttl = m.limitsOf(room)
	m.evictLocked(room, r, now)
}

// Len reports how many rooms the store holds in memory.
func (m *Memory) Len() int {
	n := 0
	m.rooms.Range(func(any, any) bool { n++; return true })
	return n
}

// maybeSweep evicts the rooms past their lifetime, at most once per
// sweepEvery: its cost, one look at every room, is spread over the calls
// of that period, and no goroutine is needed.
func (m *Memory) maybeSweep() {
	now := time.Now()
	if !m.sweepMu.TryLock() {
		return // another caller sweeps
	}
	if now.Before(m.nextSweep) {
		m.sweepMu.Unlock()
		return
	}
	m.nextSweep = now.Add(sweepEvery(time.Duration(m.minTTL.Load())))
	m.sweepMu.Unlock()
	m.rooms.Range(func(k, v any) bool {
		r := v.(*memRoom)
		r.mu.Lock()
		m.evictLocked(k.(string), r, now)
		r.mu.Unlock()
		return true
	})
}

// Append implements [Store.Append].
func (m *Memory) Append(ctx context.Context, room string, msg *corralv1.Message, dedupeKey string) (AppendResult, error) {
	return m.AppendOrdered(ctx, room, msg, dedupeKey, Sender{}, State{})
}

// AppendOrdered implements [SenderOrder.AppendOrdered]; known is ignored
// (a memory history loses nothing it acknowledged).
func (m *Memory) AppendOrdered(_ context.Context, room string, msg *corralv1.Message, dedupeKey string, sender Sender, _ State) (AppendResult, error) {
	if err := checkAppend(room, msg); err != nil {
		return AppendResult{}, err
	}
	if sender.Stream != "" && dedupeKey == "" {
		return AppendResult{}, fmt.Errorf("history: append to %q: a sender's place needs a dedupe key", room)
	}
	m.maybeSweep()
	if dedupeKey != "" && m.keys.Load()+2 > m.maxKeys { // room for a key and a mark
		m.sweepKeys()
	}
	r := m.lockLive(room)
	res, err := m.appendLocked(r, room, msg, dedupeKey, sender)
	r.mu.Unlock()
	if m.total.Load() > m.maxBytes {
		m.shed(room)
	}
	return res, err
}

// msgBytes is what msg counts against MaxBytes: what it holds that
// grows with its sender's input, and a fixed overhead.
func msgBytes(msg *corralv1.Message) int64 {
	return int64(len(msg.GetPayload())+len(msg.GetId())+len(msg.GetRoom())+len(msg.GetChunk().GetData())) + 64
}

// appendLocked appends msg to r, at sender's place when sender.Stream is
// set, and commits msg's event. Lock must be held.
func (m *Memory) appendLocked(r *memRoom, room string, msg *corralv1.Message, dedupeKey string, sender Sender) (AppendResult, error) {
	return m.appendEventLocked(r, room, msg, dedupeKey, sender, msg)
}

// appendEventLocked is appendLocked committing event (nil: none) as the
// message's event. Lock must be held.
func (m *Memory) appendEventLocked(r *memRoom, room string, msg *corralv1.Message, dedupeKey string, sender Sender, event *corralv1.Message) (AppendResult, error) {
	now := time.Now()
	r.used = now
	_, r.ttl = m.limitsOf(room)
	if dedupeKey != "" {
		r.expireDedupe(m, now)
		if seq, ok := r.dedupe[dedupeKey]; ok {
			msg.Seq = seq
			return AppendResult{Seq: seq, Epoch: r.epoch, Duplicate: true}, nil
		}
	}
	if sender.Stream != "" {
		if mark, ok := r.senders[sender.Stream]; ok && mark.seq+1 < sender.Seq {
			return AppendResult{}, fmt.Errorf("history: append to %q: place %d after %d: %w", room, sender.Seq, mark.seq, ErrOutOfOrder)
		}
	}
	newKeys := int64(0)
	if dedupeKey != "" {
		newKeys++
		if _, ok := r.senders[sender.Stream]; sender.Stream != "" && !ok {
			newKeys++
		}
	}
	if newKeys > 0 && m.keys.Add(newKeys) > m.maxKeys {
		m.keys.Add(-newKeys)
		m.keysRefused.Add(1)
		return AppendResult{}, fmt.Errorf("history: append to %q: %d dedupe keys remembered within the window, the bound: %w", room, m.maxKeys, ErrBusy)
	}
	r.last++
	msg.Seq = r.last
	size := msgBytes(msg)
	r.bytes += size
	m.total.Add(size)
	if len(r.buf) < r.maxLen {
		r.buf = append(r.buf, msg)
		r.n++
	} else {
		// Full: overwrite the oldest.
		gone := msgBytes(r.buf[r.head])
		r.bytes -= gone
		m.total.Add(-gone)
		r.buf[r.head] = msg
		r.head++
		if r.head == len(r.buf) {
			r.head = 0
		}
	}
	if dedupeKey != "" {
		if r.dedupe == nil {
			r.dedupe = make(map[string]uint64)
		}
		r.dedupe[dedupeKey] = r.last
		r.expiry = append(r.expiry, dedupeExpiry{key: dedupeKey, at: now.Add(m.window)})
	}
	if sender.Stream != "" {
		if r.senders == nil {
			r.senders = make(map[string]senderMark)
		}
		at := now.Add(m.window)
		r.senders[sender.Stream] = senderMark{seq: sender.Seq, at: at}
		r.expiry = append(r.expiry, dedupeExpiry{key: sender.Stream, at: at, sender: true})
	}
	if m.events != nil && event != nil {
		m.events.CommitMessage(event)
	}
	return AppendResult{Seq: r.last, Epoch: r.epoch}, nil
}

// MemoryStats is what [Memory.Stats] reports.
type MemoryStats struct {
	// Bytes is what the retained messages count against MaxBytes.
	Bytes int64
	// ShedRooms counts rooms evicted to stay under MaxBytes, and
	// ShedMessages the messages trimmed from held rooms for it.
	ShedRooms, ShedMessages uint64
	// Keys is how many dedupe keys and sender marks the rooms remember
	// (bounded by MaxKeys), and Refused counts the appends of
	// [MemoryRefusal] reasons (by reason).
	Keys    int64
	Refused [NumMemoryRefusals]uint64
}

// MemoryRefusal is why the memory store refused an append; its names
// are [MemoryRefusalNames].
type MemoryRefusal uint8

const (
	// RefusedKeys: an append with a new dedupe key (or sender mark) while
	// MaxKeys are remembered within their window.
	RefusedKeys MemoryRefusal = iota
	NumMemoryRefusals
)

// MemoryRefusalNames are the label values of each [MemoryRefusal]
// (corral_history_memory_refused_total{reason}).
var MemoryRefusalNames = [NumMemoryRefusals]string{
	RefusedKeys: "dedupe_keys",
}

// Stats reports the store's bytes and what it shed to bound them.
func (m *Memory) Stats() MemoryStats {
	return MemoryStats{
		Bytes: m.total.Load(), ShedRooms: m.shedRooms.Load(), ShedMessages: m.shedMessages.Load(),
		Keys: m.keys.Load(), Refused: [NumMemoryRefusals]uint64{RefusedKeys: m.keysRefused.Load()},
	}
}

// sweepKeys forgets, in every room, the dedupe keys and sender marks past
// their window (and evicts the rooms past their lifetime), at most once
// per keySweepEvery: a flood at MaxKeys costs one look at every room per
// period, not per append. It locks one room at a time, never while the
// caller holds one.
func (m *Memory) sweepKeys() {
	if !m.keySweepMu.TryLock() {
		return
	}
	defer m.keySweepMu.Unlock()
	now := time.Now()
	if now.Before(m.nextKeySweep) {
		return
	}
	m.nextKeySweep = now.Add(min(max(m.window/16, time.Millisecond), time.Second))
	m.rooms.Range(func(k, v any) bool {
		r := v.(*memRoom)
		r.mu.Lock()
		if !m.evictLocked(k.(string), r, now) && !r.dead {
			r.expireDedupe(m, now)
		}
		r.mu.Unlock()
		return true
	})
}

// shed brings the store under nine tenths of MaxBytes (the slack keeps
// it from shedding at every append): whole rooms nobody holds first,
// least recently used first, then the oldest half of the largest held
// rooms' history (room, just appended to, counts as held: the seq its
// caller got stays readable). One caller sheds at a time; the others go on (the
// bound is passed by at most their appends meanwhile). It locks one room
// at a time, never while the caller holds one.
func (m *Memory) shed(room string) {
	if !m.shedMu.TryLock() {
		return
	}
	defer m.shedMu.Unlock()
	target := m.maxBytes / 10 * 9
	type cand struct {
		name  string
		r     *memRoom
		used  time.Time
		bytes int64
		held  bool
	}
	var cands []cand
	m.rooms.Range(func(k, v any) bool {
		r := v.(*memRoom)
		r.mu.Lock()
		if !r.dead && r.n > 0 {
			cands = append(cands, cand{k.(string), r, r.used, r.bytes, r.holds > 0 || k.(string) == room})
		}
		r.mu.Unlock()
		return true
	})
	slices.SortFunc(cands, func(a, b cand) int { return a.used.Compare(b.used) })
	for _, c := range cands {
		if m.total.Load() <= target {
			return
		}
		if c.held {
			continue
		}
		c.r.mu.Lock()
		if !c.r.dead && c.r.holds == 0 && c.name != room {
			m.forgetLocked(c.name, c.r)
			m.shedRooms.Add(1)
		}
		c.r.mu.Unlock()
	}
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Compare(b.bytes, a.bytes) })
	for _, c := range cands {
		for m.total.Load() > target {
			c.r.mu.Lock()
			n := 0
			if !c.r.dead && c.r.n > 1 {
				n = c.r.trimLocked(m, c.r.n/2)
			}
			c.r.mu.Unlock()
			if n == 0 {
				break
			}
			m.shedMessages.Add(uint64(n))
		}
	}
}

// trimLocked drops the k oldest messages of r, rebuilding its ring (head
// 0, so appends go on as before) and returns k. Lock must be held.
func (r *memRoom) trimLocked(m *Memory, k int) int {
	first := r.last - uint64(r.n) + 1
	kept := make([]*corralv1.Message, 0, r.maxLen)
	for i := 0; i < r.n; i++ {
		msg := r.at(first+uint64(i), first)
		if i < k {
			size := msgBytes(msg)
			r.bytes -= size
			m.total.Add(-size)
			continue
		}
		kept = append(kept, msg)
	}
	r.buf, r.head, r.n = kept, 0, len(kept)
	return k
}

// expireDedupe forgets dedupe keys older than the window. Lock must be held.
func (r *memRoom) expireDedupe(m *Memory, now time.Time) {
	for r.qhead < len(r.expiry) && !now.Before(r.expiry[r.qhead].at) {
		e := r.expiry[r.qhead]
		if !e.sender {
			if _, ok := r.dedupe[e.key]; ok {
				delete(r.dedupe, e.key)
				m.keys.Add(-1)
			}
		} else if mark, ok := r.senders[e.key]; ok && !now.Before(mark.at) {
			// A stream's mark is queued again at every append: only
			// the newest entry forgets it.
			delete(r.senders, e.key)
			m.keys.Add(-1)
		}
		r.expiry[r.qhead] = dedupeExpiry{}
		r.qhead++
	}
	if r.qhead == len(r.expiry) {
		r.expiry, r.qhead = r.expiry[:0], 0
	} else if r.qhead >= 1024 && r.qhead*2 >= len(r.expiry) {
		n := copy(r.expiry, r.expiry[r.qhead:])
		clear(r.expiry[n:])
		r.expiry, r.qhead = r.expiry[:n], 0
	}
}

// state returns the room's state. Lock must be held.
func (r *memRoom) state() State {
	s := State{Epoch: r.epoch, Last: r.last}
	if r.n > 0 {
		s.First = r.last - uint64(r.n) + 1
	}
	return s
}

// at returns the retained message with the given seq. Lock must be held.
func (r *memRoom) at(seq uint64, first uint64) *corralv1.Message {
	i := r.head + int(seq-first)
	if i >= len(r.buf) {
		i -= len(r.buf)
	}
	return r.buf[i]
}

// Read implements [Store.Read].
func (m *Memory) Read(_ context.Context, q Query) (Page, error) {
	if q.Room == "" {
		return Page{}, errEmptyRoom
	}
	r := m.live(q.Room)
	if r == nil {
		if q.Peek {
			return Page{}, nil
		}
		return Page{State: State{Epoch: m.epochOf(q.Room)}}, nil
	}
	defer r.mu.Unlock()
	p := Page{State: r.state()}
	if r.n == 0 {
		return p, nil
	}
	first, last, limit := p.First, p.Last, uint64(pageLimit(q.Limit))
	if !q.Reverse {
		from := max(q.After+1, first)
		if from > last {
			return p, nil
		}
		to := last
		if to-from+1 > limit {
			to = from + limit - 1
			p.More = true
		}
		if q.Assembled {
			return r.foldedLocked(p, from, to, 1, q.MaxBytes), nil
		}
		p.Messages = make([]*corralv1.Message, 0, to-from+1)
		for s := from; s <= to; s++ {
			p.Messages = append(p.Messages, r.at(s, first))
		}
		return cutPage(p, q.MaxBytes), nil
	}
	to := last
	if q.Before != 0 {
		if q.Before <= first {
			return p, nil
		}
		to = min(q.Before-1, last)
	}
	from := first
	if to-from+1 > limit {
		from = to - limit + 1
		p.More = true
	}
	if q.Assembled {
		return r.foldedLocked(p, to, from, -1, q.MaxBytes), nil
	}
	p.Messages = make([]*corralv1.Message, 0, to-from+1)
	for s := to; s >= from; s-- {
		p.Messages = append(p.Messages, r.at(s, first))
	}
	return cutPage(p, q.MaxBytes), nil
}

// foldedLocked fills p with the messages from seq a to seq b (step 1
// forward, -1 reverse) as [Query].Assembled folds them, at most maxBytes
// of them (<= 0: no bound) and at least one. Lock must be held.
func (r *memRoom) foldedLocked(p Page, a, b uint64, step int, maxBytes int) Page {
	size := 0
	for s := a; ; s = uint64(int64(s) + int64(step)) {
		m := r.at(s, p.First)
		if c := m.GetChunk(); c != nil {
			g := r.growing[m.GetId()]
			switch {
			case g == nil || g.base.GetSeq() != c.GetMessageSeq():
			case g.last != s:
				m = nil // the message is in the place of its last chunk
			default:
				m = g.assembled()
			}
		}
		if m != nil {
			n := proto.Size(m)
			if maxBytes > 0 && len(p.Messages) > 0 && size+n > maxBytes {
				p.More = true
				return p
			}
			size += n
			p.Messages = append(p.Messages, m)
		}
		p.Next = s
		if s == b {
			return p
		}
	}
}

// cutPage cuts p to maxBytes of messages ([Query].MaxBytes). The messages
// are shared with the store: only the page's own slice is cut.
func cutPage(p Page, maxBytes int) Page {
	ms := p.Messages
	if n := cutBytes(len(ms), maxBytes, func(i int) int { return proto.Size(ms[i]) }); n < len(ms) {
		p.Messages, p.More = ms[:n:n], true
	}
	return p
}

// ReadMany implements [Store.ReadMany].
func (m *Memory) ReadMany(ctx context.Context, qs []Query) ([]Page, error) {
	pages := make([]Page, len(qs))
	for i, q := range qs {
		var err error
		if pages[i], err = m.Read(ctx, q); err != nil {
			return nil, err
		}
	}
	return pages, nil
}

// State implements [Store.State].
func (m *Memory) State(_ context.Context, room string) (State, error) {
	if room == "" {
		return State{}, errEmptyRoom
	}
	r := m.live(room)
	if r == nil {
		return State{Epoch: m.epochOf(room)}, nil
	}
	defer r.mu.Unlock()
	return r.state(), nil
}

// live returns room locked when it is held or has history within its
// lifetime; else nil (a room past its lifetime is evicted on the way).
func (m *Memory) live(room string) *memRoom {
	m.maybeSweep()
	r := m.lockIfAny(room)
	if r == nil {
		return nil
	}
	if m.evictLocked(room, r, time.Now()) {
		r.mu.Unlock()
		return nil
	}
	return r
}

// Close implements [Store.Close]; it does nothing.
func (m *Memory) Close() error { return nil }

func checkAppend(room string, msg *corralv1.Message) error {
	if room == "" {
		return errEmptyRoom
	}
	if msg.GetRoom() != room {
		return fmt.Errorf("history: append to %q: message is for room %q", room, msg.GetRoom())
	}
	return nil
}

var errEmptyRoom = fmt.Errorf("history: empty room name")
