package core

import (
	"context"
	"testing"

	"github.com/corral-rt/corral/core/linkserver"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// TestFanoutOncePerLink: a room's message goes onto each link with
// members once, however many members the link carries (the edge fans it
// out to them), and onto no link without members.
func TestFanoutOncePerLink(t *testing.T) {
	ctx := context.Background()
	c := newTestCore(t, Config{})
	r, err := c.acquireRoom(ctx, "r", true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.releaseRoom(r)
	busy, lone, other := fakeLink(c), fakeLink(c), fakeLink(c)
	r.mu.Lock()
	r.links[busy], r.links[lone] = 3, 1
	r.mu.Unlock()
	res, err := c.hist.Append(ctx, "r", &corralv1.Message{Room: "r"}, "")
	if err != nil {
		t.Fatal(err)
	}
	r.deliver(&corralv1.Message{Room: "r", Seq: res.Seq})
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
	ctx := context.Background()
	c := newTestCore(t, Config{})
	r, err := c.acquireRoom(ctx, "r", true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.releaseRoom(r)
	full := c.metrics.dropped.WithLabelValues(droppedCatchupFull.String())
	before := counterValue(full)
	payload := make([]byte, 1<<20) // shared: the test holds 1 MiB, not 64
	cu := &catchup{}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.joining[&session{}] = cu
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
	if n := counterValue(full) - before; n != 1 {
		t.Fatalf("catchup_full counted %v times, want 1", n)
	}
}
