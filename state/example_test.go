package state_test

import (
	"context"
	"fmt"

	"github.com/corral-rt/corral/state"
)

// A member joins with a snapshot, then continues from its position.
func Example() {
	ctx := context.Background()
	s := state.NewMemory(state.MemoryOptions{})
	s.Set(ctx, "doc:1", state.Set{Key: "title", Value: []byte(`"Draft"`)})
	snap, _ := s.Snapshot(ctx, "doc:1")
	fmt.Println(snap.Position, snap.Entries[0].Key, string(snap.Entries[0].Value), snap.Entries[0].Version)

	// Compare-and-set: only the writer that saw version 1 wins.
	_, err := s.Set(ctx, "doc:1", state.Set{Key: "title", Value: []byte(`"Final"`), CAS: true, Version: 1})
	fmt.Println(err)
	_, err = s.Set(ctx, "doc:1", state.Set{Key: "title", Value: []byte(`"Other"`), CAS: true, Version: 1})
	fmt.Println(err)

	changes, _ := s.Since(ctx, "doc:1", snap.Epoch, snap.Position, 0)
	for _, c := range changes {
		fmt.Println(c.Position, c.Key, string(c.Value), c.Version)
	}
	// Output:
	// 1 title "Draft" 1
	// <nil>
	// state: set "title" in "doc:1": version 2, not 1: state: version conflict
	// 2 title "Final" 2
}
