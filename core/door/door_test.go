package door_test

import (
	"context"
	"strings"
	"testing"

	"github.com/corral-rt/corral/core/door"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/grants"
	"github.com/corral-rt/corral/roomclass"
)

func newDoor(t *testing.T) *door.Door {
	t.Helper()
	return door.New(door.Options{
		Class:       func(string) *roomclass.Class { return &roomclass.Class{} },
		MaxRoomName: 8,
	})
}

func TestValidRoom(t *testing.T) {
	d := newDoor(t)
	if err := d.ValidRoom("lobby"); err != nil {
		t.Fatalf("ValidRoom(lobby) = %v", err)
	}
	for _, bad := range []string{"", strings.Repeat("x", 9), "a\x00b"} {
		if err := d.ValidRoom(bad); err == nil {
			t.Errorf("ValidRoom(%q) = nil, want an error", bad)
		}
	}
}

func TestGrantedTokenAndRuntime(t *testing.T) {
	d := newDoor(t)
	ctx := context.Background()
	id := &corralv1.Identity{Join: []string{"a"}, Publish: []string{"p"}}
	check := func(kind grants.Kind, room string, want bool) {
		t.Helper()
		ok, err := d.Granted(ctx, "u", id, kind, room)
		if err != nil || ok != want {
			t.Errorf("Granted(%v, %q) = %v, %v; want %v, nil", kind, room, ok, err, want)
		}
	}
	check(grants.Join, "a", true)
	check(grants.Join, "b", false)
	check(grants.Publish, "a", false)
	check(grants.Publish, "p", true)
	if err := d.Grants().Grant(ctx, "u", []string{"b"}, nil); err != nil {
		t.Fatal(err)
	}
	check(grants.Join, "b", true)
}

// Changed never blocks, however many users change before TakeChanged,
// and a change wakes the reader once.
func TestChangedNeverBlocks(t *testing.T) {
	d := newDoor(t)
	for _, u := range []string{"x", "y", "x"} {
		d.Changed(u)
	}
	select {
	case <-d.Wake():
	default:
		t.Fatal("no wake after Changed")
	}
	got := d.TakeChanged()
	if len(got) != 2 {
		t.Fatalf("TakeChanged = %v, want x and y", got)
	}
	if got := d.TakeChanged(); len(got) != 0 {
		t.Fatalf("second TakeChanged = %v, want none", got)
	}
}
