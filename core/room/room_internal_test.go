package room

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corral-rt/corral/core/linkserver"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/internal/linktest"
	"github.com/corral-rt/corral/presence"
	"github.com/corral-rt/corral/roomclass"
	"github.com/corral-rt/corral/state"
)

// member is a test's member: compared by identity, as a session.
type member struct {
	id   string
	gone atomic.Bool
}

func (m *member) Gone() bool { return m.gone.Load() }

type testRoom = Room[*member]

// fixture is what a test room shares: a memory history, a memory
// presence store, a memory state store, a default class table and the
// metrics, read back by the test.
type fixture struct {
	opts        *Options[*member]
	hist        *history.Memory
	pres        *presence.Memory
	state       *state.Memory
	reads       atomic.Int64 // history reads (StoreOp "read")
	catchupFull atomic.Int64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := &fixture{hist: history.NewMemory(history.MemoryOptions{}), pres: presence.NewMemory(presence.Options{}),
		state: state.NewMemory(state.MemoryOptions{})}
	f.opts = &Options[*member]{
		History:      f.hist,
		Classes:      roomclass.NewLive(roomclass.NewTable(roomclass.Default(), nil)),
		Ctx:          ctx,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		PresenceList: f.pres.List,
		PresenceTick: 500 * time.Millisecond,
		State:        f.state,
		StateGapWait: GapWait,
		Go:           func(fn func()) { go fn() },
		Held:         func(*testRoom) bool { return true },
	}
	f.opts.Metrics = NopMetrics()
	f.opts.Metrics.StoreOp = func(op string) func(error) {
		if op == "read" {
			f.reads.Add(1)
		}
		return func(error) {}
	}
	f.opts.Metrics.CatchupFull = func() { f.catchupFull.Add(1) }
	return f
}

// loaded is the room name, its state read from history, as a join
// loads it.
func (f *fixture) loaded(t *testing.T, name string) *testRoom {
	t.Helper()
	f.hist.Hold(name)
	t.Cleanup(func() { f.hist.Release(name) })
	r := New(name, f.opts)
	if err := r.Load(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	return r
}

func fakeLink() *linkserver.Link { return linkserver.Unserved(linkserver.Options{}) }

// frames is package linktest's.
var frames = linktest.Frames

// TestFanoutOncePerLink: a room's message goes onto each link with
// members once, however many members the link carries (the edge fans it
// out to them), and onto no link without members.
func TestFanoutOncePerLink(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	r := f.loaded(t, "r")
	busy, lone, other := fakeLink(), fakeLink(), fakeLink()
	r.mu.Lock()
	r.links[busy], r.links[lone] = 3, 1
	r.mu.Unlock()
	res, err := f.hist.Append(ctx, "r", &corralv1.Message{Room: "r"}, "")
	if err != nil {
		t.Fatal(err)
	}
	r.Deliver(&corralv1.Message{Room: "r", Seq: res.Seq})
	for name, tc := range map[string]struct {
		l    *linkserver.Link
		want int
	}{"three members": {busy, 1}, "one member": {lone, 1}, "no member": {other, 0}} {
		if n, _, _ := tc.l.Backlog(); n != tc.want {
			t.Errorf("%s: %d frames queued, want %d", name, n, tc.want)
		}
	}
}

// TestCatchupBytesBounded: the live messages held for a joining member are
// bounded in bytes as well as count: past maxCatchupBytes what was held is
// let go, the join is marked for a Reset, and the drop is counted once.
func TestCatchupBytesBounded(t *testing.T) {
	f := newFixture(t)
	r := f.loaded(t, "r")
	payload := make([]byte, 1<<20) // shared: the test holds 1 MiB, not 64
	cu := &Catchup{}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.joining[&member{}] = cu
	seq := r.last
	// Past the bytes, short of the count: the bytes must trip it.
	for range min(maxCatchupBytes/len(payload)+2, maxCatchupBuffer-1) {
		seq++
		r.fanoutLocked(&corralv1.Message{Room: "r", Seq: seq, Payload: payload})
		if cu.bytes > maxCatchupBytes {
			t.Fatalf("%d bytes held for a joining member, bound %d", cu.bytes, maxCatchupBytes)
		}
	}
	if !cu.overflow || cu.buf != nil || cu.bytes != 0 {
		t.Fatalf("after %d MiB: overflow %v, %d messages (%d bytes) still held", seq, cu.overflow, len(cu.buf), cu.bytes)
	}
	if n := f.catchupFull.Load(); n != 1 {
		t.Fatalf("catchup_full counted %v times, want 1", n)
	}
}

func TestRoomOrderAndGapFill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newFixture(t)
		r := f.loaded(t, "r")
		l := fakeLink()
		r.mu.Lock()
		r.links[l] = 1
		r.mu.Unlock()

		// Three messages appended elsewhere; this room hears of 3, then 1,
		// never of 2: 3 waits, 1 goes out, and the fill brings 2 and 3.
		var msgs []*corralv1.Message
		for i := range 3 {
			m := &corralv1.Message{Room: "r", Payload: []byte{byte('a' + i)}}
			res, err := f.hist.Append(ctx, "r", m, "")
			if err != nil {
				t.Fatal(err)
			}
			m.Seq = res.Seq
			msgs = append(msgs, m)
		}
		r.Deliver(msgs[2])
		r.Deliver(msgs[0])
		r.Deliver(msgs[0]) // a duplicate is dropped
		got := frames(t, l, 3)
		time.Sleep(2 * GapWait) // fake time: past any gap timer
		synctest.Wait()         // nothing more may come
		got = append(got, frames(t, l, 0)...)
		if len(got) != 3 {
			t.Fatalf("got %d frames, want 3: %v", len(got), got)
		}
		for i, f := range got {
			if seq := f.GetMessage().GetSeq(); seq != uint64(i+1) {
				t.Fatalf("frame %d has seq %d, want %d (frames %v)", i, seq, i+1, got)
			}
		}
	})
}

// TestGapFillEndsAfterStalePending: a message pub/sub brought before the
// room's position moved past it (a state read that finished later) is
// not a gap: the fill forgets it and stops reading history, where it
// once read forever.
func TestGapFillEndsAfterStalePending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newFixture(t)
		r := f.loaded(t, "r")
		for range 3 {
			if _, err := f.hist.Append(ctx, "r", &corralv1.Message{Room: "r", Payload: []byte("x")}, ""); err != nil {
				t.Fatal(err)
			}
		}
		r.mu.Lock()
		r.pending[2] = &corralv1.Message{Room: "r", Seq: 2}
		r.last = 3
		r.scheduleFillLocked()
		r.mu.Unlock()
		deadline := time.Now().Add(5 * time.Second)
		for {
			r.mu.Lock()
			filling, left := r.filling, len(r.pending)
			r.mu.Unlock()
			if !filling {
				if left != 0 {
					t.Fatalf("%d pending messages left after the fill", left)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the fill still runs after 5 s, %d history reads", f.reads.Load())
			}
			time.Sleep(GapWait)
		}
		if n := f.reads.Load(); n > 1 {
			t.Fatalf("the fill read history %d times for a stale pending message, want at most 1", n)
		}
	})
}

func TestSignalTick(t *testing.T) {
	def := roomclass.Default()
	def.SignalTick = 33 * time.Millisecond
	class := func(name, pattern string, tick time.Duration) roomclass.Class {
		c := def
		c.Name, c.Match, c.SignalTick = name, roomclass.Patterns{pattern}, tick
		return c
	}
	classes := roomclass.NewLive(roomclass.NewTable(def, []roomclass.Class{
		class("canvas", "canvas:*", 16*time.Millisecond),
		class("typing", "typing:lobby", 100*time.Millisecond),
	}))
	tests := map[string]time.Duration{
		"canvas:board-1": 16 * time.Millisecond,
		"typing:lobby":   100 * time.Millisecond,
		"typing:other":   33 * time.Millisecond,
		"lobby":          33 * time.Millisecond,
	}
	for room, want := range tests {
		t.Run(room, func(t *testing.T) {
			if got := signalTick(classes, room); got != want {
				t.Fatalf("tick %v, want %v", got, want)
			}
		})
	}
}

// TestSignalSetUnderItsOwnLock: a signal is set while the room's lock is
// held (a publish's fan-out in progress) without waiting for it, and the
// next flush, which takes both locks, sends it.
func TestSignalSetUnderItsOwnLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		r := New("r", f.opts)
		l := fakeLink()
		s := &member{id: "s1"}
		r.mu.Lock()
		r.links[l] = 1
		done := make(chan struct{})
		go func() {
			r.SignalsOrNew().Set(s, &corralv1.SignalEvent{Room: "r", Key: "cursor", Sender: "u", Payload: []byte("1")})
			close(done)
		}()
		synctest.Wait()
		select {
		case <-done:
		default:
			r.mu.Unlock()
			<-done
			t.Fatal("a signal waited for the room's lock")
		}
		r.mu.Unlock()
		got := frames(t, l, 1)
		sigs := got[0].GetBatch().GetFrames()
		if len(sigs) != 1 || sigs[0].GetSignal().GetKey() != "cursor" {
			t.Fatalf("flush sent %v, want the cursor signal", got)
		}
	})
}

// TestSignalLocksConcurrent: sets under the signals' lock alone race with
// snapshots, clears and flushes under both locks (run with -race); once
// every owner cleared its keys and a flush ran, no key is left.
func TestSignalLocksConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		r := New("r", f.opts)
		l := fakeLink()
		r.mu.Lock()
		r.links[l] = 1
		r.mu.Unlock()
		var wg sync.WaitGroup
		members := make([]*member, 4)
		for i := range members {
			s := &member{id: fmt.Sprint("u", i)}
			members[i] = s
			wg.Go(func() {
				for j := range 50 {
					r.SignalsOrNew().Set(s, &corralv1.SignalEvent{Room: "r", Key: fmt.Sprint(s.id, ":", j%8), Sender: s.id, Payload: []byte{byte(j)}})
				}
			})
		}
		wg.Go(func() {
			for range 50 {
				r.mu.Lock()
				_ = r.Signals().Snapshot()
				r.mu.Unlock()
			}
		})
		wg.Wait()
		r.mu.Lock()
		if n := len(r.Signals().Snapshot()); n == 0 {
			t.Error("no signal in the snapshot before the clears")
		}
		for _, s := range members {
			r.Signals().Clear(s)
		}
		r.mu.Unlock()
		time.Sleep(time.Second) // fake time: past every flush
		synctest.Wait()
		r.mu.Lock()
		defer r.mu.Unlock()
		if snap := r.Signals().Snapshot(); len(snap) != 0 {
			t.Fatalf("after the clears the snapshot holds %v", snap)
		}
		st := r.Signals()
		st.mu.Lock()
		defer st.mu.Unlock()
		if len(st.latest)+len(st.owned)+len(st.dirty) != 0 {
			t.Fatalf("signals left after the clears: %d latest, %d owners, %d dirty", len(st.latest), len(st.owned), len(st.dirty))
		}
	})
}

// TestSignalKeysBounded: a member's new key past MaxSignalKeys is
// refused (Set reports false and keeps nothing of it); a key it holds can
// still change, and another member's keys are not counted against it.
func TestSignalKeysBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		r := New("r", f.opts)
		a, b := &member{id: "a"}, &member{id: "b"}
		st := r.SignalsOrNew()
		set := func(m *member, key string) bool {
			return st.Set(m, &corralv1.SignalEvent{Room: "r", Key: key, Sender: m.id})
		}
		for i := range MaxSignalKeys {
			if !set(a, fmt.Sprint("k", i)) {
				t.Fatalf("key %d of %d refused", i+1, MaxSignalKeys)
			}
		}
		if set(a, "one-more") {
			t.Fatal("a key past MaxSignalKeys was taken")
		}
		if !set(a, "k0") {
			t.Fatal("a held key could not change")
		}
		if !set(b, "b0") {
			t.Fatal("another member's first key was refused")
		}
		st.mu.Lock()
		_, kept := st.latest["one-more"]
		st.mu.Unlock()
		if kept {
			t.Fatal("the refused key was kept")
		}
	})
}

// joinHooks are a test join's core parts: none, and a count of the
// replay pages it waited for.
type joinHooks struct{ pages int }

func (h *joinHooks) WaitPage() { h.pages++ }

// kinds names the frames queued on l, in order: what a member's
// connection gets from its join to its leave.
func kinds(l *linkserver.Link) []string {
	var out []string
	for _, f := range l.Take(1<<20, 1<<30) {
		var sf *corralv1.ServerFrame
		switch k := f.GetKind().(type) {
		case *linkv1.CoreFrame_Membership:
			out = append(out, fmt.Sprint("member:", k.Membership.GetMember()))
			continue
		case *linkv1.CoreFrame_Live:
			sf = k.Live.GetFrame()
		case *linkv1.CoreFrame_Position:
			sf = k.Position.GetFrame()
		case *linkv1.CoreFrame_Replay:
			sf = k.Replay.GetFrame()
		case *linkv1.CoreFrame_Left:
			sf = k.Left.GetFrame()
		}
		switch {
		case sf.GetJoined() != nil:
			out = append(out, fmt.Sprintf("joined:%d:replay=%v", sf.GetJoined().GetSeq(), sf.GetJoined().GetReplay()))
		case sf.GetBatch() != nil:
			var seqs []uint64
			for _, m := range sf.GetBatch().GetFrames() {
				seqs = append(seqs, m.GetMessage().GetSeq())
			}
			out = append(out, fmt.Sprint("batch:", seqs))
		case sf.GetMessage() != nil:
			out = append(out, fmt.Sprint("message:", sf.GetMessage().GetSeq()))
		case sf.GetReplayEnd() != nil:
			out = append(out, fmt.Sprint("replay-end:", sf.GetReplayEnd().GetSeq()))
		case sf.GetReset_() != nil:
			out = append(out, "reset")
		case sf.GetLeft() != nil:
			out = append(out, "left")
		default:
			out = append(out, fmt.Sprintf("%T", f.GetKind()))
		}
	}
	return out
}

// TestJoinReplayThenLive: a member joining from a position gets Joined,
// then what it missed (the history read and what the room fanned out
// while the read ran, each once, in order), ReplayEnd and its
// membership; then live messages once per link; and a leave with a
// notice ends it with its membership gone and Left.
func TestJoinReplayThenLive(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	r := f.loaded(t, "r")
	publish := func() {
		t.Helper()
		if _, err := r.Publish(ctx, &corralv1.Message{Room: "r", Payload: []byte("x")}, "", history.Sender{}); err != nil {
			t.Fatal(err)
		}
	}
	publish()
	publish()
	r.mu.Lock()
	epoch := r.epoch
	r.mu.Unlock()

	l := fakeLink()
	m, ep := &member{id: "m"}, Endpoint{Link: l, Conn: 7}
	j := &Join{Since: 1, Epoch: epoch, Position: true}
	if !r.BeginJoin(m, ep, j) {
		t.Fatal("join refused")
	}
	if !j.Replay || j.Target != 2 {
		t.Fatalf("BeginJoin: replay %v target %d, want a replay of (1, 2]", j.Replay, j.Target)
	}
	// The history read, as the core's, while a message is published.
	page, err := f.hist.Read(ctx, history.Query{Room: "r", After: j.Since})
	if err != nil {
		t.Fatal(err)
	}
	j.Msgs, j.ReadOK = page.Messages, true
	publish() // seq 3: held for the join
	h := &joinHooks{}
	pos, live := r.GoLive(m, ep, j, h)
	if !live || pos != 3 {
		t.Fatalf("GoLive: at %d, live %v; want 3, true", pos, live)
	}
	publish() // seq 4: live
	want := []string{"joined:1:replay=true", "batch:[2 3]", "replay-end:3", "member:true", "message:4"}
	if got := kinds(l); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("frames %v, want %v", got, want)
	}
	if !r.Leave(m, &corralv1.Left{Room: "r"}) {
		t.Fatal("Leave: not in the room")
	}
	publish() // nobody here now
	if got, want := kinds(l), []string{"member:false", "left"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("at the leave: %v, want %v", got, want)
	}
	if !r.Empty() || h.pages != 0 {
		t.Fatalf("after the leave: empty %v, %d pages waited for", r.Empty(), h.pages)
	}
}

// TestJoinMaxMembers: a room at its class's max-members refuses a new
// member (BeginJoin false, nothing registered) but not a member's
// rejoin.
func TestJoinMaxMembers(t *testing.T) {
	f := newFixture(t)
	def := roomclass.Default()
	def.MaxMembers = 1
	f.opts.Classes = roomclass.NewLive(roomclass.NewTable(def, nil))
	r := f.loaded(t, "r")
	l := fakeLink()
	a, b := &member{id: "a"}, &member{id: "b"}
	ja := &Join{}
	if !r.BeginJoin(a, Endpoint{Link: l, Conn: 1}, ja) {
		t.Fatal("the first member was refused")
	}
	if _, live := r.GoLive(a, Endpoint{Link: l, Conn: 1}, ja, &joinHooks{}); !live {
		t.Fatal("the first member did not go live")
	}
	if r.BeginJoin(b, Endpoint{Link: l, Conn: 2}, &Join{}) {
		t.Fatal("a second member past max-members 1 was let in")
	}
	if !r.BeginJoin(a, Endpoint{Link: l, Conn: 1}, &Join{}) {
		t.Fatal("the member's own rejoin was refused")
	}
	r.mu.Lock()
	n := len(r.joining) + len(r.members)
	r.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d members and joiners, want 1", n)
	}
}
