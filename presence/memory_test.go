package presence_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/corral-rt/corral/presence"
)

// TestMemoryForgetsEmptyRooms churns 100,000 room names through every
// method: afterwards the store holds only the room with a member left,
// and no room's version ever goes back, even across its forgetting.
func TestMemoryForgetsEmptyRooms(t *testing.T) {
	last := make(map[string]uint64)
	var back []presence.Change
	m := presence.NewMemory(presence.Options{OnChange: func(ch presence.Change) {
		if ch.Version <= last[ch.Room] {
			back = append(back, ch)
		}
		last[ch.Room] = ch.Version
	}})
	defer m.Close()
	ctx := context.Background()
	if err := m.Add(ctx, "kept", "ann", nil, nil); err != nil {
		t.Fatal(err)
	}
	const n = 100_000
	for i := range n {
		name := fmt.Sprintf("r%d", i%(n/2)) // each name used twice
		switch i % 3 {
		case 0:
			if _, err := m.List(ctx, name); err != nil {
				t.Fatal(err)
			}
			_ = m.SetState(ctx, name, "bob", []byte(`1`))
			_ = m.Remove(ctx, name, "bob")
		default:
			before, _ := m.List(ctx, name)
			_ = m.Add(ctx, name, "bob", nil, nil)
			_ = m.Add(ctx, name, "cid", []byte(`"x"`), nil)
			_ = m.Remove(ctx, name, "bob")
			_ = m.Remove(ctx, name, "cid")
			after, _ := m.List(ctx, name)
			if after.Version < before.Version+4 || len(after.Members) != 0 {
				t.Fatalf("room %s: version %d after four changes from %d, members %v", name, after.Version, before.Version, after.Members)
			}
		}
	}
	if len(back) > 0 {
		t.Fatalf("%d changes went back in version, first %+v", len(back), back[0])
	}
	if got := m.Len(); got != 1 {
		t.Fatalf("after the churn the store holds %d rooms, want 1", got)
	}
	snap, err := m.List(ctx, "kept")
	if err != nil || len(snap.Members) != 1 || snap.Members[0].User != "ann" {
		t.Fatalf("the room with a member: %+v %v", snap, err)
	}
}
