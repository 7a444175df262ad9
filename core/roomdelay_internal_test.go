package core

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corral-rt/corral/core/linkserver"
	croom "github.com/corral-rt/corral/core/room"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/roomclass"
	dto "github.com/prometheus/client_model/go"
)

// delayCore is a core whose rooms "d:*" have a 20 ms write delay, with
// one fake link.
func delayCore(t *testing.T) (*Core, *linkserver.Link) {
	c := New(Config{
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Classes: oneClass("d:*", func(c *roomclass.Class) { c.WriteDelay = 20 * time.Millisecond }),
	})
	t.Cleanup(func() { c.Close() })
	return c, fakeLink(c)
}

// joinConn attaches conn on l and joins room, returning the session once
// its Joined is queued (the frames before it are taken).
func joinConn(t *testing.T, c *Core, l *linkserver.Link, conn uint64, room string) *session {
	t.Helper()
	ctx := context.Background()
	id := &corralv1.Identity{UserId: "u", Join: []string{"*"}, Publish: []string{"*"}}
	s := c.life.Attach(ctx, l, conn, nil, &linkv1.Attach{Identity: id, Hello: &corralv1.Hello{}})
	if s == nil {
		t.Fatal("attach refused")
	}
	c.handleClient(ctx, s, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: room}}})
	synctest.Wait()
	return s
}

// taken is what is queued on l now, as the server frames it carries.
func taken(l *linkserver.Link) []*corralv1.ServerFrame {
	var out []*corralv1.ServerFrame
	for _, f := range l.Take(1<<20, 1<<30) {
		if sf := serverFrameOf(f); sf != nil {
			out = append(out, sf)
		}
	}
	return out
}

// liveSeqs are the message seqs of fs, batches opened, in order.
func liveSeqs(fs []*corralv1.ServerFrame) []uint64 {
	var out []uint64
	for _, f := range fs {
		if m := f.GetMessage(); m != nil {
			out = append(out, m.GetSeq())
		}
		out = append(out, liveSeqs(f.GetBatch().GetFrames())...)
	}
	return out
}

func publishN(t *testing.T, c *Core, room string, n int) {
	t.Helper()
	for range n {
		if _, err := apiPublish(context.Background(), c, room, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
}

func flushes(t *testing.T, c *Core, reason string) float64 {
	t.Helper()
	return value(t, c.metrics.liveBatchFlushes.WithLabelValues(reason))
}

func wantSeqs(t *testing.T, what string, got []uint64, from, to uint64) {
	t.Helper()
	if len(got) != int(to-from+1) {
		t.Fatalf("%s: seqs %v, want %d..%d", what, got, from, to)
	}
	for i, s := range got {
		if s != from+uint64(i) {
			t.Fatalf("%s: seqs %v, want %d..%d", what, got, from, to)
		}
	}
}

// TestWriteDelayWindow: a delayed room holds its messages (the publisher
// has its acks) until the window ends, then sends one batch per link; a
// room without a delay sends each at once; an idle room starts no timer.
func TestWriteDelayWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, l := delayCore(t)
		joinConn(t, c, l, 1, "d:r")
		joinConn(t, c, l, 2, "plain")
		taken(l)
		publishN(t, c, "d:r", 5)
		publishN(t, c, "plain", 2)
		synctest.Wait()
		if got := liveSeqs(taken(l)); len(got) != 2 {
			t.Fatalf("before the window ended: %v, want only plain's 2", got)
		}
		time.Sleep(20 * time.Millisecond)
		synctest.Wait()
		got := taken(l)
		if len(got) != 1 || len(got[0].GetBatch().GetFrames()) != 5 {
			t.Fatalf("after the window: %v, want one batch of 5", got)
		}
		wantSeqs(t, "batch", liveSeqs(got), 1, 5)
		if n := flushes(t, c, "timer"); n != 1 {
			t.Fatalf("%v timer flushes, want 1", n)
		}
		var h dto.Metric
		if err := c.metrics.liveBatchMessages.Write(&h); err != nil {
			t.Fatal(err)
		}
		if h.GetHistogram().GetSampleCount() != 1 || h.GetHistogram().GetSampleSum() != 5 {
			t.Fatalf("histogram %v, want one flush of 5", h.GetHistogram())
		}
		// A lone message goes as itself, not as a batch of one.
		publishN(t, c, "d:r", 1)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := taken(l); len(got) != 1 || got[0].GetMessage().GetSeq() != 6 {
			t.Fatalf("lone message: %v", got)
		}
		if n := flushes(t, c, "timer"); n != 2 {
			t.Fatalf("%v timer flushes, want 2 (no timer while idle)", n)
		}
	})
}

// TestWriteDelayFull: a window ends early at croom.MaxDelayedMessages.
func TestWriteDelayFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, l := delayCore(t)
		joinConn(t, c, l, 1, "d:r")
		taken(l)
		publishN(t, c, "d:r", croom.MaxDelayedMessages+10)
		synctest.Wait()
		first := taken(l)
		wantSeqs(t, "full batch", liveSeqs(first), 1, croom.MaxDelayedMessages)
		time.Sleep(20 * time.Millisecond)
		synctest.Wait()
		wantSeqs(t, "rest", liveSeqs(taken(l)), croom.MaxDelayedMessages+1, croom.MaxDelayedMessages+10)
		if f, tm := flushes(t, c, "full"), flushes(t, c, "timer"); f != 1 || tm != 1 {
			t.Fatalf("flushes full %v timer %v, want 1 and 1", f, tm)
		}
	})
}

// TestWriteDelayEvents: a join and a leave within a window flush the held
// messages first, so each member gets every message once, in order: the
// joiner's Joined follows the held ones, the leaver's Left too.
func TestWriteDelayEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, l := delayCore(t)
		joinConn(t, c, l, 1, "d:r")
		taken(l)
		publishN(t, c, "d:r", 3)
		s2 := joinConn(t, c, l, 2, "d:r")
		got := taken(l)
		// Welcome of conn 2, then the held batch, then conn 2's Joined at 3.
		var order []string
		for _, f := range got {
			switch {
			case f.GetBatch() != nil:
				order = append(order, "batch")
			case f.GetJoined() != nil:
				if f.GetJoined().GetSeq() != 3 {
					t.Fatalf("Joined at %d, want 3", f.GetJoined().GetSeq())
				}
				order = append(order, "joined")
			}
		}
		if len(order) != 2 || order[0] != "batch" || order[1] != "joined" {
			t.Fatalf("order %v (frames %v), want the batch before conn 2's Joined", order, got)
		}
		wantSeqs(t, "held at the join", liveSeqs(got), 1, 3)

		publishN(t, c, "d:r", 2)
		c.handleClient(context.Background(), s2, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Leave{Leave: &corralv1.Leave{Room: "d:r"}}})
		synctest.Wait()
		got = taken(l)
		if len(got) != 2 || got[1].GetLeft() == nil {
			t.Fatalf("at the leave: %v, want the held batch, then Left", got)
		}
		wantSeqs(t, "held at the leave", liveSeqs(got), 4, 5)
		// A reset (history lost: a new epoch) sends the held messages,
		// of the old epoch, before it.
		publishN(t, c, "d:r", 2)
		r := c.rooms.get("d:r")
		_, _, old := r.Info()
		r.Reset("new-epoch", 0)
		var lives []*linkv1.RoomLive
		for _, f := range l.Take(1<<20, 1<<30) {
			if lv := f.GetLive(); lv != nil {
				lives = append(lives, lv)
			}
		}
		if len(lives) != 2 || lives[0].GetEpoch() != old || lives[0].GetSeq() != 7 || lives[1].GetFrame().GetReset_() == nil {
			t.Fatalf("at the reset: %v, want the held batch at 7 of the old epoch, then the Reset", lives)
		}
		wantSeqs(t, "held at the reset", liveSeqs([]*corralv1.ServerFrame{lives[0].GetFrame()}), 6, 7)
		if n := flushes(t, c, "event"); n != 3 {
			t.Fatalf("%v event flushes, want 3", n)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := taken(l); len(got) != 0 {
			t.Fatalf("after the window: %v, want nothing more", got)
		}
	})
}
