package integration_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	"github.com/corral-rt/corral/protocol"
	"golang.org/x/sync/errgroup"
)

// TestBusyRoomCoalescesWrites: a busy room (eight members, four of them
// publishing at once, JSON and protobuf mixed). The edge writes a busy
// socket's frames together (more than one frame per write), and every
// member still reads every message once, in the room's order; the send
// queues are empty afterwards.
func TestBusyRoomCoalescesWrites(t *testing.T) {
	d := start(t, "serve", nil, withoutRateLimits(nil))
	ctx := testCtx(t)
	const room, members, senders, total = "busy", 8, 4, 2000
	metrics := edgeBase(d) + "/metrics"
	w0 := metricValue(t, metrics, "corral_edge_frames_per_flush_count")
	f0 := metricValue(t, metrics, "corral_edge_frames_per_flush_sum")

	conns := make([]*client.Conn, members)
	for i := range conns {
		enc := protocol.JSON
		if i%2 == 1 {
			enc = protocol.Proto
		}
		conns[i] = dial(t, d, fmt.Sprintf("m%d", i), enc)
		if _, err := conns[i].Join(ctx, room, 0, ""); err != nil {
			t.Fatal(err)
		}
	}
	chk := checker.New()
	var recv sync.WaitGroup
	for i, c := range conns {
		name := fmt.Sprintf("m%d", i)
		chk.Member(name, room, 0, total)
		recv.Add(1)
		go func() {
			defer recv.Done()
			n := 0
			for f := range c.Frames() {
				if m := f.GetMessage(); m != nil {
					chk.Received(name, m.GetRoom(), m.GetSeq(), m.GetId())
					if n++; n == total {
						return
					}
				}
			}
		}()
	}
	g, gctx := errgroup.WithContext(ctx)
	for i := range senders {
		c := conns[i]
		g.Go(func() error {
			for k := i; k < total; k += senders {
				id := fmt.Sprintf("p%d", k)
				p, err := c.Publish(gctx, room, id, payload(k))
				if err != nil {
					return fmt.Errorf("publish %s: %w", id, err)
				}
				chk.Acked(room, p.GetSeq(), id)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	recv.Wait()
	if err := chk.Check(); err != nil {
		t.Fatal(err)
	}
	for i := range conns {
		if n := chk.Count(fmt.Sprintf("m%d", i), room); n != total {
			t.Fatalf("m%d received %d messages, want %d", i, n, total)
		}
	}
	// A write is counted just after it returns, so a member can read the
	// last frames before their write is counted: wait for the count (a
	// frame never written times this out).
	var writes, frames float64
	waitUntil(t, fmt.Sprintf("the %d messages' writes to be counted", members*total), func() bool {
		writes = metricValue(t, metrics, "corral_edge_frames_per_flush_count") - w0
		frames = metricValue(t, metrics, "corral_edge_frames_per_flush_sum") - f0
		return frames >= members*total
	})
	if frames < 1.5*writes {
		t.Fatalf("%v frames in %v writes: a busy room's sockets were written one frame at a time", frames, writes)
	}
	if q := metricValue(t, metrics, "corral_edge_queued_frames"); q != 0 {
		t.Fatalf("corral_edge_queued_frames is %v after every member read everything", q)
	}
	t.Logf("%v frames in %v writes (%.1f per write)", frames, writes, frames/writes)
}
