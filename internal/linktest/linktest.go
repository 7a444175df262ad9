// Package linktest reads, in tests, what a core queued on a link: the
// client frames its link frames carry, in order. It is for the tests of
// core and core/room, which each had a copy. Not safe for concurrent use
// on one queue (a link's queue has one reader).
package linktest

import (
	"testing"
	"time"

	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// ServerFrame is the client's frame a link frame carries, of any kind;
// nil for membership and close.
func ServerFrame(f *linkv1.CoreFrame) *corralv1.ServerFrame {
	switch k := f.GetKind().(type) {
	case *linkv1.CoreFrame_Live:
		return k.Live.GetFrame()
	case *linkv1.CoreFrame_Signals:
		return k.Signals.GetFrame()
	case *linkv1.CoreFrame_Presence:
		return k.Presence.GetFrame()
	case *linkv1.CoreFrame_Replay:
		return k.Replay.GetFrame()
	case *linkv1.CoreFrame_Snapshot:
		return k.Snapshot.GetFrame()
	case *linkv1.CoreFrame_Position:
		return k.Position.GetFrame()
	case *linkv1.CoreFrame_Left:
		return k.Left.GetFrame()
	case *linkv1.CoreFrame_Session:
		return k.Session.GetFrame()
	case *linkv1.CoreFrame_Conn:
		return k.Conn.GetFrame()
	}
	return nil
}

// Queue is what a test reads a link's queue through: an unserved
// linkserver.Link, or the core's per-link connections.
type Queue interface {
	Take(maxFrames, maxBytes int) []*linkv1.CoreFrame
	Ready() <-chan struct{}
}

// Frames returns the client frames queued on l, in order, waiting until
// want have arrived (failing the test after 10 s).
func Frames(t testing.TB, l Queue, want int) []*corralv1.ServerFrame {
	t.Helper()
	var out []*corralv1.ServerFrame
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < want {
		for _, f := range l.Take(1<<20, 1<<30) {
			if sf := ServerFrame(f); sf != nil {
				out = append(out, sf)
			}
		}
		if len(out) >= want {
			break
		}
		select {
		case <-l.Ready():
		case <-time.After(time.Until(deadline)):
			t.Fatalf("got %d frames, want %d: %v", len(out), want, out)
		}
	}
	return out
}
