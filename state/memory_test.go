package state_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corral-rt/corral/state"
)

// TestMemoryForgets checks that a room's state is forgotten TTL after
// its last write, and comes back under a new epoch: a reader of the old
// one is told to snapshot, never continued silently.
func TestMemoryForgets(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	s := state.NewMemory(state.MemoryOptions{Now: c.Now, TTL: time.Hour})
	old, err := s.Set(ctx, "r", state.Set{Key: "k", Value: []byte("1")})
	if err != nil {
		t.Fatal(err)
	}
	c.Advance(59 * time.Minute)
	if snap, _ := s.Snapshot(ctx, "r"); len(snap.Entries) != 1 {
		t.Fatalf("forgotten before its TTL: %+v", snap)
	}
	c.Advance(time.Minute)
	if snap, _ := s.Snapshot(ctx, "r"); len(snap.Entries) != 0 || snap.Epoch != "" || snap.Position != 0 {
		t.Fatalf("kept past its TTL: %+v", snap)
	}
	now, err := s.Set(ctx, "r", state.Set{Key: "k", Value: []byte("2")})
	if err != nil {
		t.Fatal(err)
	}
	if now.Epoch == old.Epoch || now.Position != 1 || now.Version != 1 {
		t.Fatalf("written again: %+v (before %+v)", now, old)
	}
	if _, err := s.Since(ctx, "r", old.Epoch, old.Position, 0); !errors.Is(err, state.ErrTooOld) {
		t.Fatalf("since in the forgotten epoch: %v", err)
	}
	// Rooms nobody touches are swept too: the store holds none after.
	for _, room := range []string{"a", "b", "c"} {
		s.Set(ctx, room, state.Set{Key: "k"})
	}
	c.Advance(2 * time.Hour)
	s.Snapshot(ctx, "elsewhere")
	if n := s.Len(); n != 0 {
		t.Fatalf("%d rooms held after their TTL", n)
	}
}
