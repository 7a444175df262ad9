package core

import (
	"context"
	"testing"
	"time"

	"github.com/corral-rt/corral/state"
)

// TestKeyedMirrorOrder: a room's mirror applies changes strictly in
// position order whatever order they arrive in (held ahead of a gap,
// duplicates dropped), and closes a gap nobody fills with a read of the
// store (Since); a change of another epoch makes it read a snapshot.
func TestKeyedMirrorOrder(t *testing.T) {
	c := newTestCore(t, Config{})
	ctx := context.Background()
	r := c.rooms.acquire("doc")
	t.Cleanup(func() { c.releaseRoom(r) })
	k := c.keyed
	k.gapWait = time.Hour // the test closes the gaps, or reads them itself
	write := func(key, value string) (string, state.Change) {
		res, err := k.store.Set(ctx, "doc", state.Set{Key: key, Value: []byte(value)})
		if err != nil {
			t.Fatal(err)
		}
		return res.Epoch, state.Change{Position: res.Position, Key: key, Value: []byte(value), Version: res.Version}
	}
	write("a", "1")
	write("b", "1")
	if err := k.load(ctx, r); err != nil {
		t.Fatal(err)
	}
	at := func() (string, uint64, int) {
		r.Lock()
		defer r.Unlock()
		return r.Parts().keyed.epoch, r.Parts().keyed.pos, len(r.Parts().keyed.pending)
	}
	if _, pos, _ := at(); pos != 2 {
		t.Fatalf("loaded at %d, want 2", pos)
	}
	epoch, c3 := write("a", "2")
	_, c4 := write("c", "1")
	_, c5 := write("b", "2")
	k.apply(r, epoch, c5)
	k.apply(r, epoch, c4)
	if _, pos, held := at(); pos != 2 || held != 2 {
		t.Fatalf("before the gap closes: at %d with %d held, want 2 with 2", pos, held)
	}
	k.apply(r, epoch, c3)
	k.apply(r, epoch, c4) // a duplicate
	if _, pos, held := at(); pos != 5 || held != 0 {
		t.Fatalf("after the gap closed: at %d with %d held, want 5 with 0", pos, held)
	}
	// 6 never arrives: 7 makes the mirror read it.
	write("d", "1")
	_, c7 := write("d", "2")
	k.apply(r, epoch, c7)
	if _, pos, held := at(); pos != 5 || held != 1 {
		t.Fatalf("ahead of a gap: at %d with %d held, want 5 with 1", pos, held)
	}
	k.fill(r) // what the gap's timer runs
	if _, pos, held := at(); pos != 7 || held != 0 {
		t.Fatalf("after the read: at %d with %d held, want 7 with 0", pos, held)
	}
	r.Lock()
	got := string(r.Parts().keyed.keys["d"].Value)
	r.Unlock()
	if got != "2" {
		t.Fatalf("d = %q after the read, want 2", got)
	}
	// A change of another epoch: the store's snapshot replaces the mirror.
	k.apply(r, "other", state.Change{Position: 8, Key: "x", Value: []byte("1"), Version: 1})
	k.fill(r)
	if e, pos, held := at(); e != epoch || pos != 7 || held != 0 {
		t.Fatalf("after a change of another epoch: %s/%d with %d held, want the store's %s/7 with 0", e, pos, held, epoch)
	}
}
