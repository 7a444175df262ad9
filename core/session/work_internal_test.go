package session

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/corral-rt/corral/core/linkserver"

	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/prometheus/client_golang/prometheus"
)

// idleOpts are a queue's options whose core is never called: the tests
// hold the link's only worker slot, so nothing queued runs.
func idleOpts() *WorkOptions {
	return &WorkOptions{
		Metrics: WorkMetrics{
			BacklogFrames:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "frames"}),
			BacklogBytes:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "bytes"}),
			Coalesced:      prometheus.NewCounter(prometheus.CounterOpts{Name: "coalesced"}),
			DropClosing:    func(int) {},
			DropBacklog:    func(int) {},
			DropDetached:   func(int) {},
			DropUnattached: func(int) {},
			RefuseBacklog:  func() {},
		},
	}
}

// TestWorkReplaceOrder: a queued presence update is replaced by a newer
// one of its room, but not across a join or leave of that room, whose
// order matters.
func TestWorkReplaceOrder(t *testing.T) {
	workers := make(chan struct{}, 1)
	workers <- struct{}{} // the core is busy: nothing runs
	w := NewWork(context.Background(), idleOpts(), nil, workers, 1)
	w.Push(&linkv1.EdgeFrame{Conn: 1, Kind: &linkv1.EdgeFrame_Attach{Attach: &linkv1.Attach{
		Hello: &corralv1.Hello{}, Identity: &corralv1.Identity{UserId: "u"},
	}}}, 0)
	set := func(room, state string) *linkv1.EdgeFrame {
		return &linkv1.EdgeFrame{Conn: 1, Kind: &linkv1.EdgeFrame_Frame{Frame: &corralv1.ClientFrame{
			Kind: &corralv1.ClientFrame_SetPresence{SetPresence: &corralv1.SetPresence{Room: room, State: []byte(state)}}}}}
	}
	leave := &linkv1.EdgeFrame{Conn: 1, Kind: &linkv1.EdgeFrame_Frame{Frame: &corralv1.ClientFrame{
		Kind: &corralv1.ClientFrame_Leave{Leave: &corralv1.Leave{Room: "r"}}}}}
	for i, f := range []*linkv1.EdgeFrame{set("r", "1"), set("s", "1"), set("r", "2"), leave, set("r", "3"), set("r", "4"), set("s", "2")} {
		w.Push(f, 10+i)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var got []string
	sum := 0
	for _, q := range w.queue {
		sum += q.size
	}
	if sum != w.bytes {
		t.Errorf("queued sizes sum to %d, the queue counts %d bytes", sum, w.bytes)
	}
	for _, q := range w.queue[1:] { // after the attach
		switch k := q.f.GetFrame().GetKind().(type) {
		case *corralv1.ClientFrame_SetPresence:
			got = append(got, k.SetPresence.GetRoom()+"="+string(k.SetPresence.GetState()))
		case *corralv1.ClientFrame_Leave:
			got = append(got, "leave "+k.Leave.GetRoom())
		}
	}
	want := fmt.Sprint([]string{"r=2", "s=2", "leave r", "r=4"})
	if fmt.Sprint(got) != want {
		t.Fatalf("queue %v, want %v", got, want)
	}
}

// gateCore is a Core whose Attach (but connection 0's) waits until release is closed, counting
// the attaches in it at once; HandleClient reports each frame on handled.
type gateCore struct {
	release chan struct{}
	in, max atomic.Int32
	handled chan *corralv1.ClientFrame
}

func (g *gateCore) Attach(ctx context.Context, _ *linkserver.Link, conn uint64, _ *Work, _ *linkv1.Attach) *Session {
	if conn == 0 { // the live session's, before the herd
		return &Session{}
	}
	n := g.in.Add(1)
	for {
		m := g.max.Load()
		if n <= m || g.max.CompareAndSwap(m, n) {
			break
		}
	}
	select {
	case <-g.release:
	case <-ctx.Done():
	}
	g.in.Add(-1)
	return &Session{}
}

func (g *gateCore) HandleClient(_ context.Context, _ *Session, f *corralv1.ClientFrame) {
	g.handled <- f
}
func (*gateCore) Refresh(context.Context, *Session, *corralv1.Identity) {}
func (*gateCore) ReplayTaken(context.Context, *Session, string)         {}
func (*gateCore) Detach(*Session, *linkserver.Link, uint64, bool)       {}

// TestAttachesBounded: attaches run at most WorkOptions.Attaching at once
// however many connections arrive (a herd), and they do not hold the
// link's worker slots: a live session's frame runs while the herd's
// attaches wait. With the old code every attach took a worker slot, all
// ran at once, and a live frame waited behind them.
func TestAttachesBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const bound, herd, workers = 3, 20, 4
		g := &gateCore{release: make(chan struct{}), handled: make(chan *corralv1.ClientFrame, 1)}
		o := idleOpts()
		o.Core = g
		o.Attaching = make(chan struct{}, bound)
		slots := make(chan struct{}, workers)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		attach := &linkv1.EdgeFrame{Kind: &linkv1.EdgeFrame_Attach{Attach: &linkv1.Attach{}}}

		// A live session: attached before the herd.
		live := NewWork(ctx, o, nil, slots, 0)
		live.Push(attach, 0)
		synctest.Wait()

		for i := range herd {
			NewWork(ctx, o, nil, slots, uint64(i+1)).Push(attach, 0)
		}
		synctest.Wait() // every attach runs or waits for a slot
		if n := g.in.Load(); n != bound {
			t.Fatalf("%d attaches run at once, want %d (the bound)", n, bound)
		}
		ping := &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Ping{Ping: &corralv1.Ping{Id: 7}}}
		live.Push(&linkv1.EdgeFrame{Kind: &linkv1.EdgeFrame_Frame{Frame: ping}}, 10)
		synctest.Wait()
		select {
		case f := <-g.handled:
			if f.GetPing().GetId() != 7 {
				t.Fatalf("handled %v", f)
			}
		default:
			t.Fatal("a live session's frame waited behind the herd's attaches")
		}
		close(g.release)
		synctest.Wait()
		if n, m := g.in.Load(), g.max.Load(); n != 0 || m > bound {
			t.Fatalf("%d attaches still in, %d ran at once; want 0 and at most %d", n, m, bound)
		}
	})
}
