package edge

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-rt/corral/client"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	dto "github.com/prometheus/client_model/go"
)

// TestNoFrameWaitsForATimer: frames sent one after another to a socket
// that can take them each arrive while the next is not yet sent, however
// long Config.CoalesceWindow (ignored): nothing waits for a timer. The old
// write path held a busy socket's third frame for the window (an hour here).
func TestNoFrameWaitsForATimer(t *testing.T) {
	te := startEdge(t, false, func(cfg *Config) { cfg.CoalesceWindow = time.Hour })
	cl := te.dialJoin(t, "u", "r")
	c := memberConn(t, te, "r")
	for i := range 20 {
		c.link.dispatch(roomMessages("r", uint64(i), 1))
		readMessages(t, cl, uint64(i), 1) // fails after 10 s
	}
	settled(t, c)
	var d dto.Metric
	if err := te.e.metrics.flushPass.Write(&d); err != nil {
		t.Fatal(err)
	}
	if d.GetHistogram().GetSampleCount() == 0 {
		t.Fatal("corral_edge_flush_pass_seconds counted no pass")
	}
}

// TestFramesMergeWhileWriteInFlight: frames queued while the socket's
// write is in flight go together in the next write, not one write each.
// The write is held in flight by holding the wire, as a control frame
// written to a full socket would.
func TestFramesMergeWhileWriteInFlight(t *testing.T) {
	te := startEdge(t, false, nil)
	cl := te.dialJoin(t, "u", "r")
	c := memberConn(t, te, "r")
	settled(t, c)
	w0, f0 := flushes(t, te)
	c.wire.mu.Lock()
	c.link.dispatch(roomMessages("r", 0, 1))
	waitFor(t, "the writer to take the first frame", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.writing && len(c.queue) == 0
	})
	const burst = 40
	for i := range burst {
		c.link.dispatch(roomMessages("r", uint64(1+i), 1))
	}
	c.wire.mu.Unlock()
	readMessages(t, cl, 0, 1+burst)
	var w uint64
	var f float64
	waitFor(t, "the writes' count", func() bool { // counted just after a write
		w, f = flushes(t, te)
		return f-f0 >= 1+burst
	})
	if w-w0 != 2 {
		t.Fatalf("%d writes for %v frames, want 2: the one in flight, then the %d queued meanwhile together", w-w0, f-f0, burst)
	}
}

// TestFullSocketWaitsForRoom: a client that stops reading fills its
// socket; its writer then waits for room in the poller (no goroutine
// blocked in a write, the frames still queued count) and, once the client
// reads again, every frame arrives, in order, once.
func TestFullSocketWaitsForRoom(t *testing.T) {
	te := startEdge(t, false, func(cfg *Config) { cfg.QueueBytes = 64 << 20 })
	if te.e.poller == nil {
		t.Skip("no poller on this platform: a full socket's writer blocks on a goroutine")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, te.url, client.Options{Token: "u", FrameBuffer: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.CloseNow)
	joined := make(chan error, 1)
	go func() { _, err := cl.Join(ctx, "r", 0, ""); joined <- err }()
	c := memberConn(t, te, "r")
	big := []byte(`"` + strings.Repeat("b", 16<<10) + `"`)
	sent := 0
	for ; sent < 4000; sent++ {
		fs := roomMessages("r", uint64(sent), 1)
		fs[0].GetLive().GetFrame().GetMessage().Payload = big
		c.link.dispatch(fs)
		te.e.poller.mu.Lock()
		full := te.e.poller.full[c.id] == c
		te.e.poller.mu.Unlock()
		if full {
			sent++
			break
		}
	}
	c.mu.Lock()
	stalled, writing := c.stalled, c.writing
	c.mu.Unlock()
	if !stalled || !writing {
		t.Fatalf("after %d frames of 16 KiB unread: stalled %v, writer %v; want a writer waiting for room", sent, stalled, writing)
	}
	if got := te.e.queuedFrames(); got < 1 {
		t.Fatalf("corral_edge_queued_frames = %v with a write stalled", got)
	}
	// More while it waits: they queue behind the tail.
	for i := range 10 {
		fs := roomMessages("r", uint64(sent+i), 1)
		c.link.dispatch(fs)
	}
	sent += 10
	want := uint64(1)
	for want <= uint64(sent) {
		select {
		case f, ok := <-cl.Frames():
			if !ok {
				t.Fatalf("ended at seq %d: %v", want, cl.Err())
			}
			if m := f.GetMessage(); m != nil {
				if m.GetSeq() != want {
					t.Fatalf("seq %d, want %d (order, loss or duplicate)", m.GetSeq(), want)
				}
				want++
			}
		case <-ctx.Done():
			t.Fatalf("seq %d of %d never arrived once the client read again", want, sent)
		}
	}
	waitFor(t, "the writer to give its token back", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.writing && !c.stalled && len(c.queue) == 0
	})
}

// TestEveryFrameWrittenAfterTrafficStops: many busy sockets in one room,
// bursts at uneven intervals, then nothing: every member reads every
// message, in order, once, through the last one. A frame left queued
// after the last burst fails this. Some messages are large, so that
// sockets fill and their writers wait for room and come back.
func TestEveryFrameWrittenAfterTrafficStops(t *testing.T) {
	const members, total = 30, 1500
	te := startEdge(t, false, func(cfg *Config) {
		// Bounds no member can reach (all of it is less), so a slow
		// reader under -race is never a slow consumer.
		cfg.QueueFrames, cfg.QueueBytes = 4096, 8<<20
	})
	cls := make([]*client.Conn, members)
	for i := range cls {
		cls[i] = te.dialJoin(t, fmt.Sprint("u", i), "r")
	}
	var links []*link
	waitFor(t, "every member", func() bool {
		seen := map[*link]bool{}
		links = links[:0]
		n := 0
		for _, c := range serverConns(te) {
			c.link.mu.Lock()
			_, ok := c.link.rooms["r"][c]
			c.link.mu.Unlock()
			if ok {
				n++
				if !seen[c.link] {
					seen[c.link] = true
					links = append(links, c.link)
				}
			}
		}
		return n == members
	})

	// 60 s: on a loaded machine, -race clients take tens of seconds to
	// decode the large messages after the edge has written them all (a
	// failure logs the edge's side below: nothing queued, no writer).
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errs := make(chan error, members)
	var wg sync.WaitGroup
	for i, cl := range cls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := uint64(1)
			for want <= total {
				select {
				case f, ok := <-cl.Frames():
					if !ok {
						errs <- fmt.Errorf("member %d: ended at seq %d: %v", i, want, cl.Err())
						return
					}
					m := f.GetMessage()
					if m == nil {
						continue
					}
					if m.GetSeq() != want {
						errs <- fmt.Errorf("member %d: seq %d, want %d (order, loss or duplicate)", i, m.GetSeq(), want)
						return
					}
					want++
				case <-ctx.Done():
					errs <- fmt.Errorf("member %d: seq %d of %d never arrived after traffic stopped", i, want, total)
					return
				}
			}
		}()
	}
	big := make([]byte, 40<<10)
	for i := range big {
		big[i] = 'a'
	}
	for sent := 0; sent < total; {
		n := min(1+rand.IntN(20), total-sent)
		fs := roomMessages("r", uint64(sent), n)
		if rand.IntN(3) == 0 {
			fs[rand.IntN(n)].GetLive().GetFrame().GetMessage().Payload = []byte(`"` + string(big) + `"`)
		}
		for _, l := range links {
			l.dispatch(fs)
		}
		sent += n
		time.Sleep(time.Duration(1000+rand.IntN(7000)) * time.Microsecond)
	}
	wg.Wait()
	close(errs)
	failed := false
	for err := range errs {
		t.Error(err)
		failed = true
	}
	if failed {
		// A writer that lost its wake-up, or a loaded machine?
		for _, c := range serverConns(te) {
			c.mu.Lock()
			queued, writing, stalled := len(c.queue), c.writing, c.stalled
			c.mu.Unlock()
			t.Logf("conn %d: %d queued, writer %v, waiting for room %v", c.id, queued, writing, stalled)
		}
	}
}

// TestBurstLeavesInOneWritePerSocket: a batch from the core carrying a
// burst of room messages is queued whole before the members' sockets go to
// their writers (handoff), so each idle member gets the burst in one write
// (frames per write = the burst), in order, nothing lost or repeated. It
// counts writes: no timing is involved.
func TestBurstLeavesInOneWritePerSocket(t *testing.T) {
	// One link: one batch reaches every member.
	te := startEdge(t, false, func(cfg *Config) { cfg.Links = 1 })
	const members, burst = 3, 30
	cls := make([]*client.Conn, members)
	for i := range cls {
		cls[i] = te.dialJoin(t, fmt.Sprint("u", i), "r")
	}
	var cs []*conn
	waitFor(t, "the members", func() bool {
		cs = serverConns(te)
		if len(cs) != members {
			return false
		}
		for _, c := range cs {
			c.link.mu.Lock()
			_, ok := c.link.rooms["r"][c]
			c.link.mu.Unlock()
			if !ok {
				return false
			}
		}
		return true
	})
	for _, c := range cs {
		settled(t, c)
	}
	w0, f0 := flushes(t, te)
	// A frame for each connection first (a publisher's Published, say):
	// it leaves with the burst, before it.
	published := &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Published{Published: &corralv1.Published{Room: "r", Id: "p1", Seq: 1}}}
	var batch []*linkv1.CoreFrame
	for _, c := range cs {
		batch = append(batch, &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Conn{Conn: &linkv1.ConnFrame{Conn: c.id, Frame: published}}})
	}
	cs[0].link.dispatch(append(batch, roomMessages("r", 0, burst)...))
	for _, cl := range cls {
		if f := next(t, cl, func(f *corralv1.ServerFrame) bool { return f.GetPublished() != nil || isMessage(f) }); f.GetPublished() == nil {
			t.Fatalf("got %v before the Published queued ahead of it", f)
		}
		readMessages(t, cl, 0, burst)
	}
	const frames = members * (1 + burst)
	var w uint64
	var f float64
	waitFor(t, "every write's count", func() bool { // counted just after a write
		w, f = flushes(t, te)
		return f-f0 >= frames
	})
	if w-w0 != members || f-f0 != frames {
		t.Fatalf("%d writes for %v frames, want %d writes (%d frames): a batch left in several writes per socket",
			w-w0, f-f0, members, frames)
	}
}
