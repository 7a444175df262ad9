package edge

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-rt/corral/client"
)

// TestHelloWaitHoldsNoReadBuffer: upgraded connections whose clients have
// not sent their hello yet (a reconnect herd's, by the thousand) hold no
// read buffer while they wait; connections that send theirs are served.
// On the old code, which borrowed the buffer before the read blocked,
// this saw 33 taken.
func TestHelloWaitHoldsNoReadBuffer(t *testing.T) {
	held, stop := readBufs.Count()
	t.Cleanup(stop)
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
	// The joined client's reads gave theirs back; the waiting ones take none.
	if n := held(); n >= waiting/2 {
		t.Fatalf("%d read buffers held with %d connections waiting for their hello and 1 joined; want fewer than %d", n, waiting, waiting/2)
	}
}

// TestFrameWaitHoldsNoReadBuffer: joined connections whose readers wait
// for the next frame (here they never park: no poller) hold no read
// buffer while they wait, and still read what comes. On the old code, whose
// read borrowed the buffer before it blocked, each waiting reader held
// one.
func TestFrameWaitHoldsNoReadBuffer(t *testing.T) {
	held, stop := readBufs.Count()
	t.Cleanup(stop)
	te := startEdge(t, false, nil)
	const waiting = 30
	var conns []*client.Conn
	for i := range waiting {
		conns = append(conns, te.dialJoin(t, "u"+strconv.Itoa(i), "r"))
	}
	// Each joined reader went back to its read right after its join was
	// passed on, before the next client's handshake was answered.
	if n := held(); n >= waiting/2 {
		t.Fatalf("%d read buffers held with %d joined connections waiting for their next frame; want fewer than %d", n, waiting, waiting/2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := conns[0].Publish(ctx, "r", "after-wait", []byte(`"hi"`)); err != nil {
		t.Fatalf("a publish after the wait: %v", err)
	}
}
