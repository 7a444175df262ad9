package core

import (
	"context"
	"testing"

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
		l    *link
		want int
	}{"three members": {busy, 1}, "one member": {lone, 1}, "no member": {other, 0}} {
		if n, _ := tc.l.queue.Len(); n != tc.want {
			t.Errorf("%s: %d frames queued, want %d", name, n, tc.want)
		}
	}
}
