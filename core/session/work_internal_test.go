package session

import (
	"context"
	"fmt"
	"testing"

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
