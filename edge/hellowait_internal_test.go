package edge

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestHelloWaitHoldsNoReadBuffer: upgraded connections whose clients have
// not sent their hello yet (a reconnect herd's, by the thousand) hold no
// read buffer while they wait; connections that send theirs are served.
// On the old code, which borrowed the buffer before the read blocked,
// this saw 33 taken.
func TestHelloWaitHoldsNoReadBuffer(t *testing.T) {
	var taken atomic.Int64
	old := readBufs.New
	readBufs = sync.Pool{New: func() any { taken.Add(1); return new([readBufferSize]byte) }}
	t.Cleanup(func() { readBufs = sync.Pool{New: old} })
	te := startEdge(t, false, nil)
	addr := strings.TrimSuffix(strings.TrimPrefix(te.url, "ws://"), "/ws")
	const waiting = 30
	for range waiting {
		rawDial(t, addr, nil)
	}
	waitFor(t, "the upgraded connections to be tracked", func() bool { return te.conns() == waiting })
	// The waiting connections' readers have run as far as they can before
	// a hello well before this client's hello and join are answered.
	te.dialJoin(t, "u", "r")
	// The joined client's reads take a few (the race detector's pool
	// drops some of what is put back); the waiting ones none.
	if n := taken.Load(); n >= waiting/2 {
		t.Fatalf("%d read buffers taken with %d connections waiting for their hello and 1 joined; want fewer than %d", n, waiting, waiting/2)
	}
}
