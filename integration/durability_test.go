package integration_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/server"
)

func isMsg(f *corralv1.ServerFrame) bool { return f.GetMessage() != nil }

// resumeConn reconnects with the session of w, positioned at seq in room.
func resumeConn(t *testing.T, url, user string, w *corralv1.Welcome, room string, seq uint64, epoch string) (*client.Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, url, client.Options{Token: user, Resume: &corralv1.Resume{
		SessionId: w.GetSessionId(), ResumeToken: w.GetResumeToken(),
		Rooms: []*corralv1.RoomPosition{{Room: room, Seq: seq, Epoch: epoch}},
	}})
	if err == nil {
		t.Cleanup(c.CloseNow)
	}
	return c, err
}

// TestTrimmedHistoryResets: a client away longer than history holds gets a
// Reset carrying the current seq, never a silent gap, then live traffic.
func TestTrimmedHistoryResets(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, func(o *server.Options) { o.HistoryMaxLen = 10 })
			ctx := testCtx(t)
			pub := dial(t, d, "pub", protocol.JSON)
			away := dial(t, d, "away", protocol.JSON)
			j, err := away.Join(ctx, "tiny", 0, "")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := pub.Join(ctx, "tiny", 0, ""); err != nil {
				t.Fatal(err)
			}
			w := away.Welcome()
			away.CloseNow()
			var last uint64
			for i := range 200 { // Redis trims approximately: go far past MaxLen
				p, err := pub.Publish(ctx, "tiny", fmt.Sprint(i), payload(i))
				if err != nil {
					t.Fatal(err)
				}
				last = p.GetSeq()
			}
			back, err := resumeConn(t, d.wsURL, "away", w, "tiny", 0, j.GetEpoch())
			if err != nil {
				t.Fatal(err)
			}
			f := nextFrame(t, back, func(f *corralv1.ServerFrame) bool { return f.GetReset_() != nil || isMsg(f) })
			if f.GetReset_() == nil || f.GetReset_().GetSeq() != last {
				t.Fatalf("got %v, want Reset at seq %d", f, last)
			}
			jf := nextFrame(t, back, func(f *corralv1.ServerFrame) bool { return f.GetJoined() != nil || isMsg(f) })
			if jf.GetJoined().GetSeq() != last {
				t.Fatalf("got %v, want Joined at seq %d", jf, last)
			}
			p, err := pub.Publish(ctx, "tiny", "live", []byte(`1`))
			if err != nil {
				t.Fatal(err)
			}
			m := nextFrame(t, back, isMsg).GetMessage()
			if m.GetSeq() != p.GetSeq() {
				t.Fatalf("first live message seq %d, want %d", m.GetSeq(), p.GetSeq())
			}
		})
	}
}

// TestPublishRetriedOnce: a publish retried with the same id, on the same
// connection or after a resume, is applied once and answered with its seq.
func TestPublishRetriedOnce(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, nil)
			ctx := testCtx(t)
			watcher := dial(t, d, "watcher", protocol.JSON)
			if _, err := watcher.Join(ctx, "once", 0, ""); err != nil {
				t.Fatal(err)
			}
			c := dial(t, d, "writer", protocol.Proto)
			j, err := c.Join(ctx, "once", 0, "")
			if err != nil {
				t.Fatal(err)
			}
			first, err := c.Publish(ctx, "once", "dup-1", []byte(`"a"`))
			if err != nil {
				t.Fatal(err)
			}
			again, err := c.Publish(ctx, "once", "dup-1", []byte(`"a"`))
			if err != nil {
				t.Fatal(err)
			}
			if !again.GetDuplicate() || again.GetSeq() != first.GetSeq() {
				t.Fatalf("retry answered %v, want duplicate of seq %d", again, first.GetSeq())
			}
			w := c.Welcome()
			c.CloseNow()
			back, err := resumeConn(t, d.wsURL, "writer", w, "once", first.GetSeq(), j.GetEpoch())
			if err != nil {
				t.Fatal(err)
			}
			// Wait until the room is restored, then retry across the resume.
			nextFrame(t, back, func(f *corralv1.ServerFrame) bool { return f.GetJoined() != nil })
			third, err := back.Publish(ctx, "once", "dup-1", []byte(`"a"`))
			if err != nil {
				t.Fatal(err)
			}
			if !third.GetDuplicate() || third.GetSeq() != first.GetSeq() {
				t.Fatalf("retry after resume answered %v, want duplicate of seq %d", third, first.GetSeq())
			}
			fresh, err := back.Publish(ctx, "once", "dup-2", []byte(`"b"`))
			if err != nil {
				t.Fatal(err)
			}
			// The watcher sees exactly two messages.
			for _, want := range []string{"dup-1", "dup-2"} {
				m := nextFrame(t, watcher, isMsg).GetMessage()
				if m.GetId() != want {
					t.Fatalf("watcher got %q, want %q", m.GetId(), want)
				}
			}
			if fresh.GetSeq() != first.GetSeq()+1 {
				t.Fatalf("second id got seq %d, want %d", fresh.GetSeq(), first.GetSeq()+1)
			}
		})
	}
}

// TestSessionExpires: after the TTL a session cannot be resumed; the code
// says "start a new session".
func TestSessionExpires(t *testing.T) {
	for _, mode := range []string{"serve", "redis"} {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, func(o *server.Options) { o.Core.SessionTTL = time.Second })
			c := dial(t, d, "brief", protocol.JSON)
			w := c.Welcome()
			c.CloseNow()
			time.Sleep(2500 * time.Millisecond) // past the TTL: expiry is the behaviour under test
			_, err := resumeConn(t, d.wsURL, "brief", w, "", 0, "")
			ce, ok := err.(*client.CloseError)
			if !ok || int(ce.Code) != int(corralv1.Code_CODE_SESSION_EXPIRED) {
				t.Fatalf("got %v, want close %d", err, corralv1.Code_CODE_SESSION_EXPIRED)
			}
		})
	}
}

// TestTwoCoresOneOrder: two corral processes sharing one Redis, members and
// publishers on both, one room: every member sees one total order, nothing
// lost, nothing duplicated.
func TestTwoCoresOneOrder(t *testing.T) {
	addr := redistest.Start(t)
	prefix := redistest.Prefix(t)
	var nodes []*deployment
	for range 2 {
		nodes = append(nodes, start(t, "serve", nil, func(o *server.Options) {
			o.RedisURL = "redis://" + addr
			o.RedisPrefix = prefix
		}))
	}
	ctx := testCtx(t)
	const room, perPublisher = "shared", 150
	chk := checker.New()
	var members []*client.Conn
	var names []string
	for i := range 6 {
		name := fmt.Sprintf("m%d", i)
		enc := protocol.JSON
		if i%2 == 1 {
			enc = protocol.Proto
		}
		c := dial(t, nodes[i%2], name, enc)
		if _, err := c.Join(ctx, room, 0, ""); err != nil {
			t.Fatal(err)
		}
		members, names = append(members, c), append(names, name)
	}
	total := perPublisher * 4
	var recv sync.WaitGroup
	for i, c := range members {
		chk.Member(names[i], room, 0, uint64(total))
		recv.Add(1)
		go func() {
			defer recv.Done()
			n := 0
			for f := range c.Frames() {
				if m := f.GetMessage(); m != nil {
					chk.Received(names[i], room, m.GetSeq(), m.GetId())
					if n++; n == total {
						return
					}
				}
			}
		}()
	}
	var pubs sync.WaitGroup
	errs := make(chan error, 4)
	for p := range 4 {
		c := members[p] // alternating nodes
		pubs.Add(1)
		go func() {
			defer pubs.Done()
			for k := range perPublisher {
				id := fmt.Sprintf("p%d-%d", p, k)
				res, err := c.Publish(ctx, room, id, payload(k))
				if err != nil {
					errs <- err
					return
				}
				chk.Acked(room, res.GetSeq(), id)
			}
		}()
	}
	pubs.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { recv.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Log("not every member received everything; the checker says what is missing")
	}
	if err := chk.Check(); err != nil {
		t.Fatal(err)
	}
}
