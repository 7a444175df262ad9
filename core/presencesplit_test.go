package core_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corral-rt/corral/client"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"google.golang.org/protobuf/proto"
)

// TestCorePresenceFramesBounded: 1,000 members with 1 KB of presence state
// each join one room (the attack that closed 200 of them 4001: one
// snapshot or diff frame was larger than a socket's queue takes). No
// presence frame passes 256 KiB (one member alone aside), and every
// member, applying what its edge would deliver to it in order (its
// snapshot frames, then the room's diffs once it is subscribed), lists
// all 1,000.
func TestCorePresenceFramesBounded(t *testing.T) {
	const members, bound = 1000, 256 << 10
	e := newEvictCore(t, time.Hour)
	state := []byte(`"` + strings.Repeat("s", 1022) + `"`)
	for first := 1; first <= members; first += 100 {
		req := &linkv1.LinkRequest{}
		for conn := uint64(first); conn < uint64(first+100); conn++ {
			req.Frames = append(req.Frames,
				&linkv1.EdgeFrame{Conn: conn, Kind: &linkv1.EdgeFrame_Attach{Attach: &linkv1.Attach{
					Hello:    &corralv1.Hello{Client: "test"},
					Identity: &corralv1.Identity{UserId: fmt.Sprintf("user%d", conn), Join: []string{"*"}},
					Protocol: "json",
				}}},
				&linkv1.EdgeFrame{Conn: conn, Kind: &linkv1.EdgeFrame_Frame{Frame: &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{
					Room: "p", Presence: true, PresenceState: state,
				}}}}})
		}
		if err := e.link.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	rosters := make(map[uint64]*client.Roster, members)
	subscribed := make(map[uint64]bool, members)
	complete := 0
	check := func(what string, f *corralv1.ServerFrame) {
		if n := proto.Size(f); n > bound+len(state)+128 {
			t.Fatalf("a presence %s of %d bytes (%d joins), want at most %d", what, n, len(f.GetPresence().GetJoins()), bound)
		}
	}
	apply := func(conn uint64, p *corralv1.Presence) {
		r := rosters[conn]
		if r == nil {
			r = &client.Roster{}
			rosters[conn] = r
		}
		before := r.Members == members && len(r.List()) == members
		r.Apply(p)
		if now := r.Members == members && len(r.List()) == members; now != before {
			if now {
				complete++
			} else {
				complete--
			}
		}
	}
	for complete < members {
		res, err := e.link.Receive()
		if err != nil {
			t.Fatalf("%d of %d members list everyone: %v", complete, members, err)
		}
		for _, cf := range res.GetFrames() {
			switch k := cf.GetKind().(type) {
			case *linkv1.CoreFrame_Conn:
				if p := k.Conn.GetFrame().GetPresence(); p != nil {
					check("snapshot", k.Conn.GetFrame())
					apply(k.Conn.GetConn(), p)
				}
			case *linkv1.CoreFrame_Membership:
				if k.Membership.GetPresence() {
					subscribed[k.Membership.GetConn()] = true
				}
			case *linkv1.CoreFrame_Presence:
				check("diff", k.Presence.GetFrame())
				for conn := range subscribed {
					apply(conn, k.Presence.GetFrame().GetPresence())
				}
			}
		}
	}
}
