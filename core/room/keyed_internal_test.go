package room

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
	f := newFixture(t)
	f.opts.StateGapWait = time.Hour // the test closes the gaps, or reads them itself
	ctx := context.Background()
	r := New("doc", f.opts)
	k := r.Keyed()
	write := func(key, value string) (string, state.Change) {
		res, err := f.state.Set(ctx, "doc", state.Set{Key: key, Value: []byte(value)})
		if err != nil {
			t.Fatal(err)
		}
		return res.Epoch, state.Change{Position: res.Position, Key: key, Value: []byte(value), Version: res.Version}
	}
	write("a", "1")
	write("b", "1")
	if err := k.Load(ctx); err != nil {
		t.Fatal(err)
	}
	at := func() (string, uint64, int) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return k.epoch, k.pos, len(k.pending)
	}
	if _, pos, _ := at(); pos != 2 {
		t.Fatalf("loaded at %d, want 2", pos)
	}
	epoch, c3 := write("a", "2")
	_, c4 := write("c", "1")
	_, c5 := write("b", "2")
	k.Apply(epoch, c5)
	k.Apply(epoch, c4)
	if _, pos, held := at(); pos != 2 || held != 2 {
		t.Fatalf("before the gap closes: at %d with %d held, want 2 with 2", pos, held)
	}
	k.Apply(epoch, c3)
	k.Apply(epoch, c4) // a duplicate
	if _, pos, held := at(); pos != 5 || held != 0 {
		t.Fatalf("after the gap closed: at %d with %d held, want 5 with 0", pos, held)
	}
	// 6 never arrives: 7 makes the mirror read it.
	write("d", "1")
	_, c7 := write("d", "2")
	k.Apply(epoch, c7)
	if _, pos, held := at(); pos != 5 || held != 1 {
		t.Fatalf("ahead of a gap: at %d with %d held, want 5 with 1", pos, held)
	}
	k.fill() // what the gap's timer runs
	if _, pos, held := at(); pos != 7 || held != 0 {
		t.Fatalf("after the read: at %d with %d held, want 7 with 0", pos, held)
	}
	r.mu.Lock()
	got := string(k.keys["d"].Value)
	r.mu.Unlock()
	if got != "2" {
		t.Fatalf("d = %q after the read, want 2", got)
	}
	// A change of another epoch: the store's snapshot replaces the mirror.
	k.Apply("other", state.Change{Position: 8, Key: "x", Value: []byte("1"), Version: 1})
	k.fill()
	if e, pos, held := at(); e != epoch || pos != 7 || held != 0 {
		t.Fatalf("after a change of another epoch: %s/%d with %d held, want the store's %s/7 with 0", e, pos, held, epoch)
	}
}
