package room

import (
	"fmt"
	"strings"
	"testing"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"google.golang.org/protobuf/proto"
)

// TestSplitPresence: 1,000 members with 1 KB of state each (a 1 MB
// snapshot, which closed 200 of 1,000 readers 4001) go as frames of at
// most maxPresenceFrameBytes, and a client applying them in order (the
// first replaces its list, the rest add to it) holds all 1,000; a diff
// split the same way keeps its joins, updates and leaves in order.
func TestSplitPresence(t *testing.T) {
	state := []byte(strings.Repeat("x", 1024))
	p := &corralv1.Presence{Room: "r", Snapshot: true, Members: 1000, Connections: 1000}
	for i := range 1000 {
		p.Joins = append(p.Joins, &corralv1.PresenceMember{UserId: fmt.Sprintf("u%04d", i), State: state, Connections: 1})
	}
	parts := splitPresence(p, maxPresenceFrameBytes)
	if len(parts) < 2 {
		t.Fatalf("a %d-byte snapshot went as %d frame(s), want it split", proto.Size(p), len(parts))
	}
	roster := map[string]bool{"stale": true} // a list from before: the snapshot replaces it
	var order []string
	for i, part := range parts {
		f := &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Presence{Presence: part}}
		if n := proto.Size(f); n > maxPresenceFrameBytes+64 {
			t.Fatalf("frame %d is %d bytes, over the %d bound", i, n, maxPresenceFrameBytes)
		}
		if part.GetSnapshot() != (i == 0) {
			t.Fatalf("frame %d snapshot=%v: only the first replaces the list", i, part.GetSnapshot())
		}
		if part.GetMembers() != 1000 || part.GetConnections() != 1000 || part.GetRoom() != "r" {
			t.Fatalf("frame %d: room %q counts %d/%d, want r 1000/1000", i, part.GetRoom(), part.GetMembers(), part.GetConnections())
		}
		if part.GetSnapshot() {
			roster = map[string]bool{}
		}
		for _, m := range part.GetJoins() {
			roster[m.GetUserId()] = true
			order = append(order, m.GetUserId())
		}
	}
	if len(roster) != 1000 {
		t.Fatalf("after %d frames the client lists %d members, want 1000", len(parts), len(roster))
	}
	for i, u := range order {
		if u != fmt.Sprintf("u%04d", i) {
			t.Fatalf("member %d is %s: out of order", i, u)
		}
	}

	diff := &corralv1.Presence{Room: "r", Members: 2, Connections: 2}
	for i := range 400 {
		diff.Joins = append(diff.Joins, &corralv1.PresenceMember{UserId: fmt.Sprintf("j%d", i), State: state})
		diff.Updates = append(diff.Updates, &corralv1.PresenceMember{UserId: fmt.Sprintf("p%d", i), State: state})
		diff.Leaves = append(diff.Leaves, fmt.Sprintf("l%d", i))
	}
	var got []string
	for _, part := range splitPresence(diff, maxPresenceFrameBytes) {
		if part.GetSnapshot() {
			t.Fatal("a diff's part is a snapshot")
		}
		for _, m := range part.GetJoins() {
			got = append(got, m.GetUserId())
		}
		for _, m := range part.GetUpdates() {
			got = append(got, m.GetUserId())
		}
		got = append(got, part.GetLeaves()...)
	}
	var want []string
	for _, m := range diff.Joins {
		want = append(want, m.GetUserId())
	}
	for _, m := range diff.Updates {
		want = append(want, m.GetUserId())
	}
	want = append(want, diff.Leaves...)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("the split diff carries %d entries, not the %d of the diff in order", len(got), len(want))
	}

	small := &corralv1.Presence{Room: "r", Snapshot: true, Joins: p.Joins[:3]}
	if parts := splitPresence(small, maxPresenceFrameBytes); len(parts) != 1 || parts[0] != small {
		t.Fatal("a snapshot under the bound was split")
	}
}
