package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
)

// TestWriteDelayClass: in a room whose class has a write delay (messages
// go out in batches per window), every member gets every message once and
// in order; a member leaving mid-window gets what was acked before its
// leave, then Left, then nothing; a member that drops mid-window and
// resumes gets the rest from its last seen seq.
func TestWriteDelayClass(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			_, tune := classFile(t, "rooms:\n  - name: delayed\n    match: \"slow:*\"\n    write-delay: 20ms\n")
			d := start(t, mode, nil, withoutRateLimits(tune))
			ctx := testCtx(t)
			const room = "slow:1"
			pub := dial(t, d, "teacher", protocol.JSON)
			student := dial(t, d, "student", protocol.Proto)
			leaver := dial(t, d, "leaver", protocol.JSON)
			var joined *corralv1.Joined
			for _, c := range []*client.Conn{pub, student, leaver} {
				j, err := c.Join(ctx, room, 0, "")
				if err != nil {
					t.Fatal(err)
				}
				joined = j
			}
			chk := checker.New()
			n := 0
			publish := func(count int) uint64 {
				var last uint64
				for range count {
					n++
					id := fmt.Sprintf("m%d", n)
					p, err := pub.Publish(ctx, room, id, payload(n))
					if err != nil {
						t.Fatal(err)
					}
					chk.Acked(room, p.GetSeq(), id)
					last = p.GetSeq()
				}
				return last
			}
			isMsg := func(f *corralv1.ServerFrame) bool { return f.GetMessage() != nil }
			read := func(name string, c *client.Conn, from, upto uint64) uint64 {
				for from < upto {
					m := nextFrame(t, c, isMsg).GetMessage()
					chk.Received(name, room, m.GetSeq(), m.GetId())
					from = m.GetSeq()
				}
				return from
			}

			// The leaver leaves within the window of its last messages:
			// they come before its Left.
			left := publish(30)
			if err := leaver.Send(ctx, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Leave{Leave: &corralv1.Leave{Room: room}}}); err != nil {
				t.Fatal(err)
			}
			var got uint64
			for {
				f := nextFrame(t, leaver, func(f *corralv1.ServerFrame) bool { return f.GetMessage() != nil || f.GetLeft() != nil })
				if f.GetLeft() != nil {
					break
				}
				chk.Received("leaver", room, f.GetMessage().GetSeq(), f.GetMessage().GetId())
				got = f.GetMessage().GetSeq()
			}
			if got != left {
				t.Fatalf("leaver's last message before Left: %d, want %d", got, left)
			}
			chk.Member("leaver", room, 0, left)

			// The student drops with messages held for it, and resumes.
			lastSeen := read("student", student, 0, left)
			w := student.Welcome()
			publish(7) // held when the connection goes
			student.CloseNow()
			publish(40)
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			back, err := client.Dial(rctx, d.wsURL, client.Options{Token: "student", Encoding: protocol.Proto, Resume: &corralv1.Resume{
				SessionId: w.GetSessionId(), ResumeToken: w.GetResumeToken(),
				Rooms: []*corralv1.RoomPosition{{Room: room, Seq: lastSeen, Epoch: joined.GetEpoch()}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(back.CloseNow)
			last := publish(50)
			read("student", back, lastSeen, last)
			read("teacher", pub, 0, last)
			chk.Member("student", room, 0, last)
			chk.Member("teacher", room, 0, last)
			// Nothing more comes to the leaver.
			select {
			case f := <-leaver.Frames():
				if f.GetMessage() != nil {
					t.Fatalf("leaver got %v after Left", f)
				}
			case <-time.After(100 * time.Millisecond):
			}
			if err := chk.Check(); err != nil {
				t.Fatal(err)
			}
			for name, want := range map[string]uint64{"student": last, "teacher": last, "leaver": left} {
				if got := chk.Count(name, room); got != int(want) {
					t.Fatalf("%s received %d messages, want exactly %d", name, got, want)
				}
			}
		})
	}
}
