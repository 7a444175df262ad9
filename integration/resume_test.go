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

// TestResumeAfterAbruptDrop: a client drops without a close while traffic
// continues; on resume it receives exactly the missed messages, in order,
// then live traffic, with no gap and no duplicate at the seam.
func TestResumeAfterAbruptDrop(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, nil)
			ctx := testCtx(t)
			const room = "lecture"
			pub := dial(t, d, "teacher", protocol.JSON)
			if _, err := pub.Join(ctx, room, 0, ""); err != nil {
				t.Fatal(err)
			}
			student := dial(t, d, "student", protocol.Proto)
			joined, err := student.Join(ctx, room, 0, "")
			if err != nil {
				t.Fatal(err)
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
			// Before the drop: the student sees 1..20.
			publish(20)
			var lastSeen uint64
			for lastSeen < 20 {
				m := nextFrame(t, student, func(f *corralv1.ServerFrame) bool { return f.GetMessage() != nil }).GetMessage()
				chk.Received("student", room, m.GetSeq(), m.GetId())
				lastSeen = m.GetSeq()
			}
			w := student.Welcome()
			student.CloseNow() // like a network cut: no close frame

			// Meanwhile the room moves on.
			publish(50)

			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			back, err := client.Dial(rctx, d.wsURL, client.Options{Token: "student", Encoding: protocol.Proto, Resume: &corralv1.Resume{
				SessionId:   w.GetSessionId(),
				ResumeToken: w.GetResumeToken(),
				Rooms:       []*corralv1.RoomPosition{{Room: room, Seq: lastSeen, Epoch: joined.GetEpoch()}},
			}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(back.CloseNow)
			if !back.Welcome().GetResumed() || back.Welcome().GetSessionId() != w.GetSessionId() {
				t.Fatalf("welcome %v: want the same session, resumed", back.Welcome())
			}
			rj := nextFrame(t, back, func(f *corralv1.ServerFrame) bool { return f.GetJoined() != nil || f.GetReset_() != nil })
			if rj.GetJoined() == nil || !rj.GetJoined().GetResumed() || rj.GetJoined().GetSeq() != lastSeen {
				t.Fatalf("after resume got %v, want Joined{resumed, seq %d}", rj, lastSeen)
			}
			// Live traffic continues while the replay is read.
			last := publish(30)
			for lastSeen < last {
				m := nextFrame(t, back, func(f *corralv1.ServerFrame) bool { return f.GetMessage() != nil }).GetMessage()
				chk.Received("student", room, m.GetSeq(), m.GetId())
				lastSeen = m.GetSeq()
			}
			chk.Member("student", room, 0, last)
			if err := chk.Check(); err != nil {
				t.Fatal(err)
			}
			if got := chk.Count("student", room); got != int(last) {
				t.Fatalf("student received %d messages, want exactly %d", got, last)
			}
		})
	}
}

// TestResumeRefused: a wrong token or an unknown session is refused with
// the documented code, and the advice says what to do.
func TestResumeRefused(t *testing.T) {
	d := start(t, "serve", nil, nil)
	ctx := testCtx(t)
	orig := dial(t, d, "alice", protocol.JSON)
	w := orig.Welcome()
	cases := map[string]struct {
		user   string
		resume *corralv1.Resume
		want   corralv1.Code
		advice protocol.Advice
	}{
		"wrong token":     {"alice", &corralv1.Resume{SessionId: w.GetSessionId(), ResumeToken: "guess"}, corralv1.Code_CODE_RESUME_REFUSED, protocol.AdviceStop},
		"another user":    {"mallory", &corralv1.Resume{SessionId: w.GetSessionId(), ResumeToken: w.GetResumeToken()}, corralv1.Code_CODE_RESUME_REFUSED, protocol.AdviceStop},
		"unknown session": {"alice", &corralv1.Resume{SessionId: "nope", ResumeToken: "nope"}, corralv1.Code_CODE_SESSION_EXPIRED, protocol.AdviceRetry},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := client.Dial(ctx, d.wsURL, client.Options{Token: tc.user, Resume: tc.resume})
			ce, ok := err.(*client.CloseError)
			if !ok {
				t.Fatalf("got %v, want a close", err)
			}
			// A stop-class close comes with an error frame, never a
			// frame named reconnect; the others with a reconnect hint.
			got := ce.Hint.GetCode()
			if tc.advice == protocol.AdviceStop {
				got = ce.Refusal.GetCode()
				if ce.Hint != nil {
					t.Fatalf("a stop-class close came with a reconnect hint %v", ce.Hint)
				}
			}
			if int(ce.Code) != int(tc.want) || got != tc.want {
				t.Fatalf("closed with %d (hint %v, error %v), want %d", ce.Code, ce.Hint, ce.Refusal, tc.want)
			}
			if got := protocol.AdviceOf(tc.want); got != tc.advice {
				t.Fatalf("advice %v, want %v", got, tc.advice)
			}
		})
	}
	// The original connection was not disturbed.
	if _, err := orig.Join(ctx, "still-here", 0, ""); err != nil {
		t.Fatal(err)
	}
}

// TestResumeTakesOver: resuming a session that is still attached elsewhere
// closes the older connection with CODE_SESSION_TAKEN_OVER.
func TestResumeTakesOver(t *testing.T) {
	d := start(t, "serve", nil, nil)
	ctx := testCtx(t)
	first := dial(t, d, "bob", protocol.JSON)
	if _, err := first.Join(ctx, "r", 0, ""); err != nil {
		t.Fatal(err)
	}
	w := first.Welcome()
	second, err := client.Dial(ctx, d.wsURL, client.Options{Token: "bob", Resume: &corralv1.Resume{
		SessionId: w.GetSessionId(), ResumeToken: w.GetResumeToken(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(second.CloseNow)
	ce := waitClosed(t, first)
	if int(ce.Code) != int(corralv1.Code_CODE_SESSION_TAKEN_OVER) {
		t.Fatalf("old connection closed with %d, want %d", ce.Code, corralv1.Code_CODE_SESSION_TAKEN_OVER)
	}
	// The room membership moved to the new connection.
	j := nextFrame(t, second, func(f *corralv1.ServerFrame) bool { return f.GetJoined() != nil })
	if j.GetJoined().GetRoom() != "r" || !j.GetJoined().GetResumed() {
		t.Fatalf("got %v", j)
	}
	other := dial(t, d, "carol", protocol.JSON)
	if _, err := other.Join(ctx, "r", 0, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Publish(ctx, "r", "x", []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	m := nextFrame(t, second, func(f *corralv1.ServerFrame) bool { return f.GetMessage() != nil })
	if m.GetMessage().GetId() != "x" {
		t.Fatalf("got %v", m)
	}
}
