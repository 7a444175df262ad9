package edge

import (
	"testing"
	"time"
	"unsafe"
)

// TestSettleAfterBurst: the heap is settled once per burst of accepts,
// once they have been quiet for settleQuiet; not during a burst, not
// after a trickle, not twice for one burst. Times are injected (now).
func TestSettleAfterBurst(t *testing.T) {
	freed := 0
	s := &settler{free: func() { freed++ }}
	sec := int64(time.Second)
	now := 100 * sec
	for range settleBurst - 1 {
		s.accepted(now)
	}
	if s.settle(now+10*sec) != 0 || freed != 0 {
		t.Fatalf("settled after %d accepts, want a burst of %d first", settleBurst-1, settleBurst)
	}
	s.accepted(now)
	if s.due(now + int64(settleQuiet) - 1) {
		t.Fatal("settle due while accepts are not yet quiet for settleQuiet")
	}
	s.settle(now + int64(settleQuiet))
	if freed != 1 {
		t.Fatalf("%d settles after a burst and a quiet spell, want 1", freed)
	}
	if s.settle(now+60*sec) != 0 || freed != 1 {
		t.Fatal("settled again without a new burst")
	}
	// A steady stream of accepts is never quiet: no settle while it lasts.
	for i := range int64(3 * settleBurst) {
		s.accepted(now + 100*sec + i*sec/1000)
		s.settle(now + 100*sec + i*sec/1000)
	}
	if freed != 1 {
		t.Fatalf("%d settles during a stream of accepts, want none", freed-1)
	}
	s.settle(now + 110*sec)
	if freed != 2 {
		t.Fatalf("%d settles once the stream went quiet, want 2 in all", freed)
	}
	var none *settler
	none.accepted(now) // an Edge built by hand has none: no panic
	if none.settle(now) != 0 {
		t.Fatal("a nil settler settled")
	}
}

// TestConnSmall keeps what an idle connection's struct costs in check:
// the channels only some connections need (welcome) are made on demand,
// and none the reader alone would close (done) is kept.
func TestConnSmall(t *testing.T) {
	if n := unsafe.Sizeof(conn{}); n > 448 {
		t.Fatalf("conn is %d bytes, want at most 448 (the 448-byte size class)", n)
	}
}
