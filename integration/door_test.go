package integration_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/server"
)

// The join/resume door (core/door.go, issue 17 items 2, 3 and 8).

// resumeRooms resumes w's session as user naming rooms, and collects, until
// want rooms were answered, the Joined rooms and the Left codes.
func resumeRooms(t *testing.T, d *deployment, user string, w *corralv1.Welcome, rooms []string, want int) (*client.Conn, map[string]bool, map[string]corralv1.Code) {
	t.Helper()
	ctx := testCtx(t)
	r := &corralv1.Resume{SessionId: w.GetSessionId(), ResumeToken: w.GetResumeToken()}
	for _, name := range rooms {
		r.Rooms = append(r.Rooms, &corralv1.RoomPosition{Room: name})
	}
	c, err := client.Dial(ctx, d.wsURL, client.Options{Token: user, Encoding: protocol.Proto, Resume: r})
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	t.Cleanup(c.CloseNow)
	joined, left := map[string]bool{}, map[string]corralv1.Code{}
	for len(joined)+len(left) < want {
		f := nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return f.GetJoined() != nil || f.GetLeft() != nil })
		if j := f.GetJoined(); j != nil {
			joined[j.GetRoom()] = true
		} else {
			left[f.GetLeft().GetRoom()] = f.GetLeft().GetCode()
		}
	}
	return c, joined, left
}

// TestResumeRoomLimit: a resume naming 3,000 rooms joins at most
// --max-rooms-per-conn of them and answers the rest with Left 4408;
// repeated resumes do not accumulate rooms; an invalid name in a resume is
// refused like on a join (4407).
func TestResumeRoomLimit(t *testing.T) {
	for _, mode := range []string{"serve", "redis"} {
		t.Run(mode, func(t *testing.T) {
			const limit = 5
			d := start(t, mode, nil, func(o *server.Options) { o.Core.MaxRoomsPerConn = limit })
			ctx := testCtx(t)
			c := dial(t, d, "alice", protocol.Proto)
			for _, room := range []string{"mine-a", "mine-b"} {
				if _, err := c.Join(ctx, room, 0, ""); err != nil {
					t.Fatal(err)
				}
			}
			w := c.Welcome()
			c.CloseNow()
			rooms := []string{"bad\x01name", strings.Repeat("x", 300)}
			for i := range 3000 {
				rooms = append(rooms, fmt.Sprintf("r%04d", i))
			}
			for round := range 3 {
				// The store also lists the two rooms joined before the first
				// round; refused then, it forgets them.
				want := len(rooms)
				if round == 0 {
					want += 2
				}
				next, joined, left := resumeRooms(t, d, "alice", w, rooms, want)
				if len(joined) > limit {
					t.Fatalf("round %d: %d rooms joined, want at most %d", round, len(joined), limit)
				}
				if left[rooms[0]] != corralv1.Code_CODE_INVALID_ARGUMENT || left[rooms[1]] != corralv1.Code_CODE_INVALID_ARGUMENT {
					t.Fatalf("round %d: invalid names answered %v, %v; want %v", round, left[rooms[0]], left[rooms[1]], corralv1.Code_CODE_INVALID_ARGUMENT)
				}
				over := 0
				for _, code := range left {
					if code == corralv1.Code_CODE_LIMIT_EXCEEDED {
						over++
					}
				}
				// The store's rooms that the client did not name come after
				// the client's, so the client's first five valid rooms win.
				if want := want - 2 - limit; over != want || len(joined) != limit || !joined["r0000"] || !joined["r0004"] {
					t.Fatalf("round %d: joined %v, %d left with 4408; want r0000-r0004 and %d", round, joined, over, want)
				}
				// The connection is really at its bound: one more join is refused.
				if _, err := next.Join(ctx, "one-more", 0, ""); err == nil || serverErr(t, err).GetCode() != corralv1.Code_CODE_LIMIT_EXCEEDED {
					t.Fatalf("round %d: a join past the bound: %v", round, err)
				}
				w = next.Welcome()
				next.CloseNow()
			}
		})
	}
}

// TestRefusedResumeLeavesVictimAlone: Mallory presenting Alice's session
// with her token, her instance and the largest attempt is refused with
// 4402, and Alice resumes afterwards (she used to get 4004 and stop).
// Tokens rotate: the one Alice used is refused with 4402 once her next one
// resumed.
func TestRefusedResumeLeavesVictimAlone(t *testing.T) {
	for _, mode := range []string{"serve", "redis"} {
		t.Run(mode, func(t *testing.T) {
			ctx := testCtx(t)
			d := start(t, mode, nil, nil)
			alice := dial(t, d, "alice", protocol.JSON)
			w := alice.Welcome()
			alice.CloseNow()
			resume := func(user, token string, n uint32) (*client.Conn, error) {
				c, err := client.Dial(ctx, d.wsURL, client.Options{Token: user, Resume: &corralv1.Resume{
					SessionId: w.GetSessionId(), ResumeToken: token, Instance: "alice-tab", Attempt: n,
				}})
				if err == nil {
					t.Cleanup(c.CloseNow)
				}
				return c, err
			}
			wantClose := func(err error, code corralv1.Code) {
				t.Helper()
				ce, ok := err.(*client.CloseError)
				if !ok || int(ce.Code) != int(code) {
					t.Fatalf("got %v, want close %d", err, code)
				}
			}
			_, err := resume("mallory", w.GetResumeToken(), 4294967295)
			wantClose(err, corralv1.Code_CODE_RESUME_REFUSED)
			a1, err := resume("alice", w.GetResumeToken(), 1)
			if err != nil {
				t.Fatalf("Alice after Mallory's refused resume: %v", err)
			}
			t1 := a1.Welcome().GetResumeToken()
			if t1 == "" || t1 == w.GetResumeToken() {
				t.Fatalf("resumed Welcome carries token %q: want a new one", t1)
			}
			a1.CloseNow()
			a2, err := resume("alice", t1, 2)
			if err != nil {
				t.Fatalf("resume with the rotated token: %v", err)
			}
			a2.CloseNow()
			// The first token was used and so was its successor: refused.
			_, err = resume("alice", w.GetResumeToken(), 3)
			wantClose(err, corralv1.Code_CODE_RESUME_REFUSED)
		})
	}
}

// TestJoinFromStartOfEpoch: a client that joined an empty room (seq 0 of
// epoch E) rejoins "from seq 0 of E" and gets every message, marked as a
// replay and ended by ReplayEnd; with a wrong or empty epoch it gets a
// Reset, never a silent skip.
func TestJoinFromStartOfEpoch(t *testing.T) {
	for _, mode := range []string{"serve", "split", "redis"} {
		t.Run(mode, func(t *testing.T) {
			ctx := testCtx(t)
			d := start(t, mode, nil, nil)
			first := dial(t, d, "ann", protocol.JSON)
			j, err := first.Join(ctx, "fresh", 0, "")
			if err != nil {
				t.Fatal(err)
			}
			if j.GetSeq() != 0 || j.GetEpoch() == "" || j.GetReplay() {
				t.Fatalf("joined an empty room: %v", j)
			}
			first.CloseNow()
			pub := dial(t, d, "bob", protocol.JSON)
			if _, err := pub.Join(ctx, "fresh", 0, ""); err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= 3; i++ {
				if _, err := pub.Publish(ctx, "fresh", fmt.Sprint("m", i), payload(i)); err != nil {
					t.Fatal(err)
				}
			}
			last := uint64(3)
			for _, enc := range []protocol.Encoding{protocol.JSON, protocol.Proto} {
				c := dial(t, d, "ann", enc)
				got, err := c.Join(ctx, "fresh", 0, j.GetEpoch())
				if err != nil {
					t.Fatal(err)
				}
				if got.GetSeq() != 0 || !got.GetReplay() {
					t.Fatalf("%v: joined %v, want seq 0 with replay", enc, got)
				}
				var seqs []uint64
				for {
					f := nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return f.GetMessage() != nil || f.GetReplayEnd() != nil })
					if e := f.GetReplayEnd(); e != nil {
						if e.GetRoom() != "fresh" || e.GetSeq() != last {
							t.Fatalf("%v: replay end %v, want seq %d", enc, e, last)
						}
						break
					}
					seqs = append(seqs, f.GetMessage().GetSeq())
				}
				if len(seqs) != int(last) || seqs[0] != 1 || seqs[len(seqs)-1] != last {
					t.Fatalf("%v: replayed %v, want 1..%d", enc, seqs, last)
				}
				// Live after the replay end.
				if _, err := pub.Publish(ctx, "fresh", fmt.Sprint("live", enc), payload(9)); err != nil {
					t.Fatal(err)
				}
				last++
				if m := nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return f.GetMessage() != nil }); m.GetMessage().GetSeq() != last {
					t.Fatalf("%v: after the replay end got %v, want seq %d", enc, m, last)
				}
			}
			for name, epoch := range map[string]string{"wrong epoch": "not-the-epoch", "empty epoch": ""} {
				c := dial(t, d, "ann", protocol.JSON)
				if err := c.Send(ctx, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{
					Room: "fresh", SinceSeq: 1, Epoch: epoch,
				}}}); err != nil {
					t.Fatal(err)
				}
				f := nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return f.GetReset_() != nil || f.GetJoined() != nil })
				if f.GetReset_() == nil {
					t.Fatalf("%s: got %v before any Reset", name, f)
				}
				if jf := nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return f.GetJoined() != nil }); jf.GetJoined().GetReplay() {
					t.Fatalf("%s: joined %v", name, jf)
				}
				c.CloseNow()
			}
		})
	}
}
