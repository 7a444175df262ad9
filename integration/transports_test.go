package integration_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/faultproxy"
	"github.com/corral-rt/corral/protocol"
)

// The HTTP fallbacks (docs/TRANSPORTS.md) carry the same session as a
// WebSocket: these tests drive the Go client over each.

// fallbacks are the HTTP carriers and encodings under test.
var fallbacks = []struct {
	name      string
	transport client.Transport
	enc       protocol.Encoding
}{
	{"sse", client.SSE, protocol.JSON},
	{"stream_json", client.HTTPStream, protocol.JSON},
	{"stream_proto", client.HTTPStream, protocol.Proto},
}

// dialOver connects a client over transport, failing the test on error.
func dialOver(t *testing.T, d *deployment, user string, tr client.Transport, enc protocol.Encoding, resume *corralv1.Resume) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, d.wsURL, client.Options{Token: user, Encoding: enc, Transport: tr, Resume: resume})
	if err != nil {
		t.Fatalf("dial %v as %s: %v", tr, user, err)
	}
	t.Cleanup(c.CloseNow)
	return c
}

// TestFallbackResume: over each fallback a member joins, receives the
// room's messages in order, loses its stream mid-flow, and resumes on a
// new stream with nothing lost or received twice, while a WebSocket
// publisher goes on.
func TestFallbackResume(t *testing.T) {
	for _, mode := range modes {
		for _, fb := range fallbacks {
			t.Run(mode+"/"+fb.name, func(t *testing.T) {
				d := start(t, mode, nil, nil)
				ctx := testCtx(t)
				const room = "lecture"
				pub := dial(t, d, "teacher", protocol.JSON)
				if _, err := pub.Join(ctx, room, 0, ""); err != nil {
					t.Fatal(err)
				}
				student := dialOver(t, d, "student", fb.transport, fb.enc, nil)
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
				// The student publishes too: its POSTs are frames of the
				// same session.
				if _, err := student.Publish(ctx, room, "s1", payload(0)); err != nil {
					t.Fatal(err)
				}
				publish(20)
				var lastSeen uint64
				for lastSeen < 21 {
					m := nextFrame(t, student, func(f *corralv1.ServerFrame) bool { return f.GetMessage() != nil }).GetMessage()
					if m.GetId() != "s1" {
						chk.Received("student", room, m.GetSeq(), m.GetId())
					}
					lastSeen = m.GetSeq()
				}
				w := student.Welcome()
				student.CloseNow() // the stream cut: no close

				publish(50)
				back := dialOver(t, d, "student", fb.transport, fb.enc, &corralv1.Resume{
					SessionId:   w.GetSessionId(),
					ResumeToken: w.GetResumeToken(),
					Rooms:       []*corralv1.RoomPosition{{Room: room, Seq: lastSeen, Epoch: joined.GetEpoch()}},
				})
				if !back.Welcome().GetResumed() || back.Welcome().GetSessionId() != w.GetSessionId() {
					t.Fatalf("welcome %v: want the same session, resumed", back.Welcome())
				}
				rj := nextFrame(t, back, func(f *corralv1.ServerFrame) bool { return f.GetJoined() != nil || f.GetReset_() != nil })
				if rj.GetJoined() == nil || !rj.GetJoined().GetResumed() || rj.GetJoined().GetSeq() != lastSeen {
					t.Fatalf("after resume got %v, want Joined{resumed, seq %d}", rj, lastSeen)
				}
				last := publish(30)
				for lastSeen < last {
					m := nextFrame(t, back, func(f *corralv1.ServerFrame) bool { return f.GetMessage() != nil }).GetMessage()
					chk.Received("student", room, m.GetSeq(), m.GetId())
					lastSeen = m.GetSeq()
				}
				chk.Member("student", room, 1, last)
				if err := chk.Check(); err != nil {
					t.Fatal(err)
				}
				if got := chk.Count("student", room); got != int(last)-1 {
					t.Fatalf("student received %d messages, want exactly %d", got, last-1)
				}
			})
		}
	}
}

// TestFallbackSignalsAndPresence: a member on each fallback sends a burst
// of signals that a WebSocket member sees end with the latest value, sets
// its presence, and sees the WebSocket member's presence and signals.
func TestFallbackSignalsAndPresence(t *testing.T) {
	for _, fb := range fallbacks {
		t.Run(fb.name, func(t *testing.T) {
			d := start(t, "serve", nil, nil)
			ctx := testCtx(t)
			const room = "board"
			ws := dial(t, d, "ws-user", protocol.JSON)
			fbc := dialOver(t, d, "fb-user", fb.transport, fb.enc, nil)
			if _, err := ws.JoinPresence(ctx, room, []byte(`{"s":"ws"}`)); err != nil {
				t.Fatal(err)
			}
			if _, err := fbc.JoinPresence(ctx, room, []byte(`{"s":"fb0"}`)); err != nil {
				t.Fatal(err)
			}
			// The WebSocket member sees the fallback member's presence.
			nextFrame(t, ws, func(f *corralv1.ServerFrame) bool {
				for _, m := range append(f.GetPresence().GetJoins(), f.GetPresence().GetUpdates()...) {
					if m.GetUserId() == "fb-user" {
						return true
					}
				}
				return false
			})
			if err := fbc.SetPresence(ctx, room, []byte(`{"s":"fb1"}`)); err != nil {
				t.Fatal(err)
			}
			nextFrame(t, ws, func(f *corralv1.ServerFrame) bool {
				for _, m := range f.GetPresence().GetUpdates() {
					if m.GetUserId() == "fb-user" && string(m.GetState()) == `{"s":"fb1"}` {
						return true
					}
				}
				return false
			})
			// A burst of one key: the last value arrives.
			for i := range 50 {
				if err := fbc.Send(ctx, signalFrame(room, "cursor", fmt.Sprintf(`{"x":%d}`, i), false)); err != nil {
					t.Fatal(err)
				}
			}
			nextFrame(t, ws, func(f *corralv1.ServerFrame) bool {
				s := f.GetSignal()
				return s.GetKey() == "cursor" && string(s.GetPayload()) == `{"x":49}`
			})
			// And the other way.
			if err := ws.Send(ctx, signalFrame(room, "pen", `{"c":"red"}`, false)); err != nil {
				t.Fatal(err)
			}
			nextFrame(t, fbc, func(f *corralv1.ServerFrame) bool {
				return f.GetSignal().GetKey() == "pen" && string(f.GetSignal().GetPayload()) == `{"c":"red"}`
			})
			// A Close is a clean leave (DELETE /rt/send): the member
			// leaves at once, not after the 15 s grace of a drop.
			fbc.Close()
			nextFrame(t, ws, func(f *corralv1.ServerFrame) bool {
				for _, u := range f.GetPresence().GetLeaves() {
					if u == "fb-user" {
						return true
					}
				}
				return false
			})
		})
	}
}

// TestFallbackSessionThroughCuts: Sessions on each fallback, through a
// proxy that cuts every TCP connection (the stream and the POSTs) twice
// while one publishes and the other reads: the Sessions resume on new
// streams by themselves, and the checker finds every message once, in
// the room's order.
func TestFallbackSessionThroughCuts(t *testing.T) {
	for _, fb := range fallbacks {
		t.Run(fb.name, func(t *testing.T) {
			d := start(t, "serve", nil, nil)
			proxy, err := faultproxy.Start(strings.TrimSuffix(strings.TrimPrefix(d.wsURL, "ws://"), "/ws"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { proxy.Close() })
			url := "ws://" + proxy.Addr() + "/ws"
			ctx := testCtx(t)
			const room, each, cuts = "fifo", 60, 2
			connect := func(user string) *client.Session {
				s, err := client.Connect(ctx, url, client.SessionOptions{
					Options: client.Options{Token: user, Encoding: fb.enc, Transport: fb.transport},
					Backoff: client.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond},
				})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				if _, err := s.Join(ctx, room); err != nil {
					t.Fatal(err)
				}
				return s
			}
			reader, pub := connect("reader"), connect("pub")
			chk := checker.New()
			total := each * (cuts + 1)
			chk.Member("reader", room, 0, uint64(total))
			got := make(chan struct{})
			go func() {
				defer close(got)
				n := 0
				for ev := range reader.Events() {
					switch {
					case ev.Kind == client.EventReset:
						chk.Reset("reader", ev.Room)
					case ev.Frame.GetMessage() != nil:
						m := ev.Frame.GetMessage()
						chk.Received("reader", m.GetRoom(), m.GetSeq(), m.GetId())
						if n++; n == total {
							return
						}
					}
				}
			}()
			k := 0
			for round := range cuts + 1 {
				if round > 0 {
					if proxy.ResetAll() == 0 {
						t.Fatal("the proxy cut nothing")
					}
				}
				for range each {
					k++
					id := fmt.Sprintf("p%d", k)
					p, err := pub.Publish(ctx, room, id, payload(k))
					if err != nil {
						t.Fatal(err)
					}
					chk.Acked(room, p.GetSeq(), id)
				}
			}
			select {
			case <-got:
			case <-ctx.Done():
				t.Fatal("the reader did not get every message")
			}
			if err := chk.Check(); err != nil {
				t.Fatal(err)
			}
			if n := chk.Count("reader", room); n != total {
				t.Fatalf("reader got %d messages, want exactly %d", n, total)
			}
		})
	}
}

// TestFallbackCloseCodes: over each fallback a close is the frame that
// explains it, then the end (docs/CODES.md): a refused token stops with
// 4401 and its Error; a drain resumes with 4000 and the hint's delay.
func TestFallbackCloseCodes(t *testing.T) {
	for _, fb := range fallbacks {
		t.Run(fb.name, func(t *testing.T) {
			d := start(t, "serve", nil, nil)
			ctx := testCtx(t)
			_, err := client.Dial(ctx, d.wsURL, client.Options{Token: "a.b.c", Transport: fb.transport, Encoding: fb.enc})
			var ce *client.CloseError
			if !errors.As(err, &ce) || ce.Code != 4401 || ce.Refusal.GetCode() != corralv1.Code_CODE_UNAUTHENTICATED {
				t.Fatalf("dial with a refused token: %v, want a close 4401 with its Error", err)
			}
			c := dialOver(t, d, "drained", fb.transport, fb.enc, nil)
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			go d.apiNode.Drain(dctx, 200*time.Millisecond)
			ce = waitClosed(t, c)
			if ce.Code != 4000 || ce.Hint.GetCode() != corralv1.Code_CODE_GOING_AWAY {
				t.Fatalf("after a drain: %v (hint %v), want 4000 with its hint", ce, ce.Hint)
			}
		})
	}
}
