package edge

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/corral-rt/corral/client"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	dto "github.com/prometheus/client_model/go"
)

// flushes reads the frames-per-flush histogram: writes and frames written.
func flushes(t *testing.T, te *testEdge) (writes uint64, frames float64) {
	t.Helper()
	var d dto.Metric
	if err := te.e.metrics.framesPerFlush.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetHistogram().GetSampleCount(), d.GetHistogram().GetSampleSum()
}

// memberConn is the edge's conn of the only connection, once it is a
// member of room on its link.
func memberConn(t *testing.T, te *testEdge, room string) *conn {
	t.Helper()
	var c *conn
	waitFor(t, "the member", func() bool {
		cs := serverConns(te)
		if len(cs) != 1 {
			return false
		}
		c = cs[0]
		c.link.mu.Lock()
		defer c.link.mu.Unlock()
		_, ok := c.link.rooms[room][c]
		return ok
	})
	return c
}

// settled waits until c's writer has written everything and given its
// token back (the Joined's write, say, is counted).
func settled(t *testing.T, c *conn) {
	t.Helper()
	waitFor(t, "the writer to give its token back", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.writing && len(c.queue) == 0
	})
}

// roomMessages is a burst of n room messages, seqs from+1 to from+n, as the
// core sends them in one batch.
func roomMessages(room string, from uint64, n int) []*linkv1.CoreFrame {
	fs := make([]*linkv1.CoreFrame, n)
	for i := range fs {
		seq := from + uint64(i) + 1
		fs[i] = &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Live{Live: &linkv1.RoomLive{
			Room: room, Seq: seq,
			Frame: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Message{Message: &corralv1.Message{
				Room: room, Seq: seq, Id: fmt.Sprint("m", seq), Payload: []byte(`{"n":1}`),
			}}},
		}}}
	}
	return fs
}

// readMessages reads n messages from c and checks their seqs are from+1 to
// from+n, in order, each once.
func readMessages(t *testing.T, c *client.Conn, from uint64, n int) {
	t.Helper()
	for i := range n {
		m := next(t, c, isMessage).GetMessage()
		if want := from + uint64(i) + 1; m.GetSeq() != want {
			t.Fatalf("message %d has seq %d, want %d (order, loss or duplicate)", i, m.GetSeq(), want)
		}
	}
}

// TestCoalescedWritesKeepOrder: bursts to a busy socket are written
// several frames per write, and the client reads every message once, in
// order; interleaved bursts from several goroutines' batches too.
func TestCoalescedWritesKeepOrder(t *testing.T) {
	te := startEdge(t, false, nil)
	cl := te.dialJoin(t, "u", "r")
	c := memberConn(t, te, "r")
	settled(t, c)
	w0, f0 := flushes(t, te)

	const bursts, per = 20, 50
	for b := range bursts {
		c.link.dispatch(roomMessages("r", uint64(b*per), per))
		if b%4 == 0 {
			time.Sleep(time.Millisecond) // some bursts meet a flush in progress
		}
	}
	readMessages(t, cl, 0, bursts*per)

	// A write is counted just after it returns, so the client can read the
	// last frames before their write is counted: wait for the count.
	var w uint64
	var f float64
	waitFor(t, "every write's count", func() bool {
		w, f = flushes(t, te)
		return f-f0 >= bursts*per
	})
	writes, frames := w-w0, f-f0
	if frames != bursts*per {
		t.Fatalf("%v frames written, want %d", frames, bursts*per)
	}
	if writes >= bursts*per/2 {
		t.Fatalf("%d writes for %v frames: a busy socket's frames were not coalesced", writes, frames)
	}
}

// TestCoalescingKeepsQueueBound: a client that stops reading still meets
// the queue's bound and is closed as a slow consumer, while its writer
// waits for room (no goroutine blocked in a write).
func TestCoalescingKeepsQueueBound(t *testing.T) {
	te := startEdge(t, false, func(cfg *Config) { cfg.QueueFrames = 64 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A client whose frames nobody takes: its reader stops at once.
	cl, err := client.Dial(ctx, te.url, client.Options{Token: "u", FrameBuffer: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		go func() {
			for range cl.Frames() { // let its reader end
			}
		}()
		cl.CloseNow()
	})
	go func() { _, _ = cl.Join(ctx, "r", 0, "") }()
	c := memberConn(t, te, "r")
	big := make([]byte, 16<<10)
	for i := range 2000 {
		fs := roomMessages("r", uint64(i), 1)
		fs[0].GetLive().GetFrame().GetMessage().Payload = big
		c.link.dispatch(fs)
		c.mu.Lock()
		closing, code := c.closing, c.closeCode
		c.mu.Unlock()
		if closing {
			if code != corralv1.Code_CODE_SLOW_CONSUMER {
				t.Fatalf("closed with %v, want CODE_SLOW_CONSUMER", code)
			}
			return
		}
	}
	t.Fatal("2,000 frames of 16 KiB to a client that does not read: never closed as a slow consumer")
}

// TestLinkCountsQueuedBytes: the link's sum of its connections' queued
// bytes (what it reports to the core) follows a connection's queue as it
// grows behind a client that does not read, and returns to zero when the
// connection ends with frames still queued.
func TestLinkCountsQueuedBytes(t *testing.T) {
	te := startEdge(t, false, func(cfg *Config) { cfg.QueueBytes = 64 << 20 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, te.url, client.Options{Token: "u", FrameBuffer: 1})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = cl.Join(ctx, "r", 0, "") }()
	c := memberConn(t, te, "r")
	l := c.link
	big := make([]byte, 16<<10)
	grew := false
	for i := 0; i < 4000 && !grew; i++ {
		fs := roomMessages("r", uint64(i), 1)
		fs[0].GetLive().GetFrame().GetMessage().Payload = big
		l.dispatch(fs)
		// The link's sum changes only under the connection's lock
		// (addQueuedLocked): read both under it, or the writer's take
		// in between makes them differ.
		c.mu.Lock()
		q, closing, got := c.queued, c.closing, l.queued.Load()
		c.mu.Unlock()
		if closing {
			t.Fatal("closed before its queue grew")
		}
		if got != int64(q) {
			t.Fatalf("link counts %d queued bytes, the connection holds %d", got, q)
		}
		// Past what loopback's socket buffers take: the writer waits
		// for room and these wait behind it.
		grew = q > 8<<20
	}
	if !grew {
		t.Fatal("4,000 frames of 16 KiB to a client that does not read: its queue never passed 8 MiB")
	}
	go func() {
		for range cl.Frames() { // let its reader end
		}
	}()
	cl.CloseNow()
	waitFor(t, "the connection to end", func() bool { return len(serverConns(te)) == 0 })
	if got := l.queued.Load(); got != 0 {
		t.Fatalf("after the connection ended the link still counts %d queued bytes", got)
	}
}
