package edge

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
)

// queueConn is a conn with no socket and no writer: pushes only queue.
func queueConn(t *testing.T) *conn {
	t.Helper()
	cfg := (&Config{}).withDefaults()
	c := &conn{e: &Edge{cfg: cfg, metrics: newMetrics(nil)}, enc: protocol.JSON}
	c.ended = true // no writer goroutine: the test takes the queue itself
	return c
}

func signals(room string, kv ...string) (*corralv1.Batch, []byte) {
	b := &corralv1.Batch{}
	for i := 0; i < len(kv); i += 2 {
		b.Frames = append(b.Frames, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Signal{Signal: &corralv1.SignalEvent{
			Room: room, Key: kv[i], Payload: []byte(kv[i+1]),
		}}})
	}
	enc, _ := protocol.AppendServer(protocol.JSON, nil, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Batch{Batch: b}})
	return b, enc
}

func decodeBatch(t *testing.T, b []byte) []*corralv1.ServerFrame {
	t.Helper()
	var f corralv1.ServerFrame
	if err := protocol.DecodeServer(protocol.JSON, b, &f); err != nil {
		t.Fatal(err)
	}
	if f.GetBatch() == nil {
		return []*corralv1.ServerFrame{&f}
	}
	return f.GetBatch().GetFrames()
}

// TestSignalsMergeWhileQueued: a room's signal batches merge while they
// wait (latest value per key), never into another entry, and not after the
// writer took the queue.
func TestSignalsMergeWhileQueued(t *testing.T) {
	c := queueConn(t)
	b1, e1 := signals("r", "cursor:a", `1`, "cursor:b", `1`)
	c.enqueueSignals("r", b1, encoded{b: e1}, nil)
	b2, e2 := signals("r", "cursor:a", `2`)
	c.enqueueSignals("r", b2, encoded{b: e2}, nil)
	msg := []byte(`{"message":{"room":"r","seq":1}}`)
	c.enqueue(encoded{b: msg})

	c.mu.Lock()
	q := c.takeLocked()
	c.mu.Unlock()
	if len(q) != 2 {
		t.Fatalf("queue has %d entries, want the merged batch and the message", len(q))
	}
	got := decodeBatch(t, q[0])
	if len(got) != 2 || string(got[0].GetSignal().GetPayload()) != `2` || string(got[1].GetSignal().GetPayload()) != `1` {
		t.Fatalf("merged batch %v: want cursor:a=2, cursor:b=1", got)
	}
	if string(q[1]) != string(msg) {
		t.Fatalf("second entry %q, want the message untouched", q[1])
	}

	// After the take, a new batch is a new entry: the taken one is gone.
	c.enqueue(encoded{b: msg})
	b3, e3 := signals("r", "cursor:a", `3`)
	c.enqueueSignals("r", b3, encoded{b: e3}, nil)
	c.mu.Lock()
	q = c.takeLocked()
	c.mu.Unlock()
	if len(q) != 2 || string(q[0]) != string(msg) || string(decodeBatch(t, q[1])[0].GetSignal().GetPayload()) != `3` {
		t.Fatalf("after a take: %q", q)
	}
}

// TestReplayOutsideBounds: replays do not count against the live bounds;
// live traffic past them closes the connection as a slow consumer.
func TestReplayOutsideBounds(t *testing.T) {
	c := queueConn(t)
	c.e.cfg.QueueFrames = 2
	for range 5 {
		c.enqueueReplay([]byte(`{"batch":{}}`), false, "", nil)
	}
	if !c.enqueue(encoded{b: []byte(`a`)}) || !c.enqueue(encoded{b: []byte(`b`)}) {
		t.Fatal("live frames refused within the bound")
	}
	if c.enqueue(encoded{b: []byte(`c`)}) {
		t.Fatal("a live frame past the bound was queued")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closing || c.closeCode != corralv1.Code_CODE_SLOW_CONSUMER {
		t.Fatalf("closing %v code %v, want a slow-consumer close", c.closing, c.closeCode)
	}
}

// TestReplayBounded: replays count in the connection's queued bytes (the
// gauge and the link's report) but not against live traffic's bound, and
// have their own: a client that joins and leaves rooms with large
// histories and never reads is closed as a slow consumer (replay_full) at
// the replay past it, and what it held is released. Before, replays
// counted nowhere and such a client held a replay per join.
func TestReplayBounded(t *testing.T) {
	c := queueConn(t)
	c.e.cfg.QueueBytes = 1 << 10
	page := make([]byte, 64<<10)
	limit := c.e.cfg.replayBytes()
	n := 0
	for ; (n+1)*len(page) <= limit; n++ {
		c.enqueueReplay(page, false, "", nil)
	}
	c.mu.Lock()
	queued, closing := c.queued, c.closing
	c.mu.Unlock()
	if closing {
		t.Fatalf("closed within the replay bound (%d of %d bytes)", queued, limit)
	}
	if queued != n*len(page) {
		t.Fatalf("queued %d bytes, want the %d of the replays", queued, n*len(page))
	}
	// Live traffic keeps its own bound beside a full replay.
	if !c.enqueue(encoded{b: make([]byte, 512)}) {
		t.Fatal("a live frame within its bound refused behind a replay")
	}
	before := testutil.ToFloat64(c.e.metrics.slow.WithLabelValues("replay_full"))
	c.enqueueReplay(page, false, "", nil)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closing || c.closeCode != corralv1.Code_CODE_SLOW_CONSUMER {
		t.Fatalf("closing %v code %v past the replay bound, want a slow-consumer close", c.closing, c.closeCode)
	}
	if got := testutil.ToFloat64(c.e.metrics.slow.WithLabelValues("replay_full")) - before; got != 1 {
		t.Fatalf("replay_full counted %v times, want 1", got)
	}
	if c.queued != 0 || c.replayBytes != 0 {
		t.Fatalf("after the close %d bytes (%d of replays) still counted, want 0", c.queued, c.replayBytes)
	}
	for _, b := range c.queue {
		if len(b) == len(page) {
			t.Fatal("a replay is still held after the close")
		}
	}
}
