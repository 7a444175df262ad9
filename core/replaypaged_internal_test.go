package core

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/corral-rt/corral/core/linkserver"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// TestReplayPaged covers the paged replay (replay.go, room.goLive): a
// replay longer than a page is sent a page at a time, the next only
// after the edge took the last (replayTaken); the joiner stays out of the
// live fan-out until the last page, and the live messages published
// meanwhile follow it in order, none lost or twice.
func TestReplayPaged(t *testing.T) {
	for name, tc := range map[string]struct {
		page replayPage
		want [][]string // what each step sends: the join, then each replayTaken
	}{
		"by count": {page: replayPage{messages: 3, bytes: 1 << 20}, want: [][]string{
			{"joined 0 replay", "batch [1 2 3] ack"},
			{"batch [4 5 6] ack"},
			{"batch [7 8 9] ack"},
			{"batch [10 11 12]", "replay-end 12", "membership"},
		}},
		// A page holds what fits in the bytes (4 messages of 1 byte, each
		// counted with 64 of overhead), and at least one message.
		"by bytes": {page: replayPage{messages: 1000, bytes: 4 * 65}, want: [][]string{
			{"joined 0 replay", "batch [1 2 3 4] ack"},
			{"batch [5 6 7 8] ack"},
			{"batch [9 10 11 12]", "replay-end 12", "membership"},
		}},
		"one message a page": {page: replayPage{messages: 1000, bytes: 1}, want: [][]string{
			{"joined 0 replay", "batch [1] ack"},
			{"batch [2] ack"}, {"batch [3] ack"}, {"batch [4] ack"}, {"batch [5] ack"},
			{"batch [6] ack"}, {"batch [7] ack"}, {"batch [8] ack"}, {"batch [9] ack"},
			{"batch [10 11 12]", "replay-end 12", "membership"},
		}},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := newTestCore(t, Config{})
			c.page = tc.page
			var epoch string
			publish := func(n int) {
				t.Helper()
				for range n {
					res, err := apiPublish(ctx, c, "r", []byte("x"))
					if err != nil {
						t.Fatal(err)
					}
					epoch = res.Epoch
				}
			}
			publish(10)
			l := fakeLink(c)
			s := c.life.Attach(ctx, l, 1, nil, &linkv1.Attach{Identity: &corralv1.Identity{UserId: "u", Join: []string{"*"}}, Hello: &corralv1.Hello{}})
			if s == nil {
				t.Fatal("attach refused")
			}
			frames(t, l, 1) // Welcome
			c.handleClient(ctx, s, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{
				Room: "r", SinceSeq: 0, Epoch: epoch, FromPosition: true}}})
			for i, want := range tc.want {
				if i > 0 {
					if i == 1 {
						publish(2) // live while the replay is paged: held for the joiner
					}
					c.replayTaken(ctx, s, "r")
				}
				if got := describeLink(l); !slices.Equal(got, want) {
					t.Fatalf("step %d sent %q, want %q", i, got, want)
				}
			}
			c.replayTaken(ctx, s, "r") // a report after the last page: nothing
			publish(1)
			if got, want := describeLink(l), []string{"live 13"}; !slices.Equal(got, want) {
				t.Fatalf("after the replay %q, want %q", got, want)
			}
		})
	}
}

// TestReplayPagedLeave: a join that leaves while its replay is paged gets
// no more pages, and a later join of the room starts its own replay,
// untouched by the old one's reports.
func TestReplayPagedLeave(t *testing.T) {
	ctx := context.Background()
	c := newTestCore(t, Config{})
	c.page = replayPage{messages: 2, bytes: 1 << 20}
	var epoch string
	for range 6 {
		res, err := apiPublish(ctx, c, "r", []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		epoch = res.Epoch
	}
	l := fakeLink(c)
	s := c.life.Attach(ctx, l, 1, nil, &linkv1.Attach{Identity: &corralv1.Identity{UserId: "u", Join: []string{"*"}}, Hello: &corralv1.Hello{}})
	frames(t, l, 1)
	join := func(since uint64) {
		c.handleClient(ctx, s, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{
			Room: "r", SinceSeq: since, Epoch: epoch, FromPosition: true}}})
	}
	join(0)
	if got, want := describeLink(l), []string{"joined 0 replay", "batch [1 2] ack"}; !slices.Equal(got, want) {
		t.Fatalf("join sent %q, want %q", got, want)
	}
	c.handleClient(ctx, s, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Leave{Leave: &corralv1.Leave{Room: "r"}}})
	describeLink(l) // Left
	c.replayTaken(ctx, s, "r")
	if got := describeLink(l); len(got) != 0 {
		t.Fatalf("after the leave a report sent %q, want nothing", got)
	}
	join(3)
	if got, want := describeLink(l), []string{"joined 3 replay", "batch [4 5] ack"}; !slices.Equal(got, want) {
		t.Fatalf("second join sent %q, want %q", got, want)
	}
	c.replayTaken(ctx, s, "r")
	if got, want := describeLink(l), []string{"batch [6]", "replay-end 6", "membership"}; !slices.Equal(got, want) {
		t.Fatalf("second join's last page %q, want %q", got, want)
	}
}

// describeLink names the frames queued on l now (the steps under test run
// on the caller's goroutine), with a replay batch's ack.
func describeLink(l *linkserver.Link) []string {
	var out []string
	for _, f := range l.Take(1<<20, 1<<30) {
		switch k := f.GetKind().(type) {
		case *linkv1.CoreFrame_Membership:
			if k.Membership.GetMember() {
				out = append(out, "membership")
			}
			continue
		case *linkv1.CoreFrame_Live:
			out = append(out, fmt.Sprintf("live %d", k.Live.GetSeq()))
			continue
		}
		sf := serverFrameOf(f)
		if sf == nil || sf.GetLeft() != nil {
			continue
		}
		d := describe(sf)
		if f.GetReplay().GetAck() {
			d += " ack"
		}
		out = append(out, d)
	}
	return out
}

// TestReplayPagedResume: a resume (hello.resume with a room's position)
// is paged as a join is: a resumed Joined, a page per report, then
// ReplayEnd and live.
func TestReplayPagedResume(t *testing.T) {
	ctx := context.Background()
	c := newTestCore(t, Config{})
	c.page = replayPage{messages: 2, bytes: 1 << 20}
	l := fakeLink(c)
	id := &corralv1.Identity{UserId: "u", Join: []string{"*"}, Publish: []string{"*"}}
	s := c.life.Attach(ctx, l, 1, nil, &linkv1.Attach{Identity: id, Hello: &corralv1.Hello{}})
	welcome := frames(t, l, 1)[0].GetWelcome()
	c.handleClient(ctx, s, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: "r"}}})
	joined := frames(t, l, 1)[0].GetJoined()
	c.life.Detach(s, l, 1, false)
	for range 5 {
		if _, err := apiPublish(ctx, c, "r", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	describeLink(l)
	s2 := c.life.Attach(ctx, l, 2, nil, &linkv1.Attach{Identity: id, Hello: &corralv1.Hello{Resume: &corralv1.Resume{
		SessionId: welcome.GetSessionId(), ResumeToken: welcome.GetResumeToken(),
		Rooms: []*corralv1.RoomPosition{{Room: "r", Seq: 0, Epoch: joined.GetEpoch()}},
	}}})
	if s2 == nil {
		t.Fatal("resume refused")
	}
	for i, want := range [][]string{
		{"*corralv1.ServerFrame_Welcome", "joined 0 replay", "batch [1 2] ack"},
		{"batch [3 4] ack"},
		{"batch [5]", "replay-end 5", "membership"},
	} {
		if i > 0 {
			c.replayTaken(ctx, s2, "r")
		}
		if got := describeLink(l); !slices.Equal(got, want) {
			t.Fatalf("step %d sent %q, want %q", i, got, want)
		}
	}
}
