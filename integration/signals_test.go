package integration_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/server"
	"golang.org/x/sync/errgroup"
)

func signalFrame(room, key, payload string, clear bool) *corralv1.ClientFrame {
	return &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Signal{Signal: &corralv1.Signal{
		Room: room, Key: key, Payload: []byte(payload), Clear: clear,
	}}}
}

// TestSignalsLatestWins: a burst of values for one key reaches others as
// fewer frames ending with the latest value; an unchanged key is not sent
// again; a cleared key is sent once as cleared; a late joiner gets the
// current values.
func TestSignalsLatestWins(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, nil)
			ctx := testCtx(t)
			mover := dial(t, d, "mover", protocol.JSON)
			watcher := dial(t, d, "watcher", protocol.Proto)
			for _, c := range []*client.Conn{mover, watcher} {
				if _, err := c.Join(ctx, "canvas", 0, ""); err != nil {
					t.Fatal(err)
				}
			}
			const burst = 200
			for i := 1; i <= burst; i++ {
				if err := mover.Send(ctx, signalFrame("canvas", "cursor:mover", fmt.Sprintf(`{"x":%d}`, i), false)); err != nil {
					t.Fatal(err)
				}
			}
			isSig := func(f *corralv1.ServerFrame) bool { return f.GetSignal() != nil }
			got := 0
			for {
				sg := nextFrame(t, watcher, isSig).GetSignal()
				got++
				if string(sg.GetPayload()) == fmt.Sprintf(`{"x":%d}`, burst) {
					break
				}
			}
			if got >= burst {
				t.Fatalf("watcher got %d signal frames for %d sends: not coalesced", got, burst)
			}
			// Unchanged: nothing more arrives for several ticks. A message
			// published afterwards arrives first.
			time.Sleep(150 * time.Millisecond)
			if _, err := mover.Publish(ctx, "canvas", "marker", []byte(`1`)); err != nil {
				t.Fatal(err)
			}
			f := nextFrame(t, watcher, func(f *corralv1.ServerFrame) bool { return isSig(f) || isMsg(f) })
			if f.GetMessage() == nil {
				t.Fatalf("an unchanged key was sent again: %v", f)
			}
			// A late joiner sees the current value at once.
			late := dial(t, d, "late", protocol.JSON)
			if _, err := late.Join(ctx, "canvas", 0, ""); err != nil {
				t.Fatal(err)
			}
			snap := nextFrame(t, late, isSig).GetSignal()
			if snap.GetKey() != "cursor:mover" || string(snap.GetPayload()) != fmt.Sprintf(`{"x":%d}`, burst) {
				t.Fatalf("late joiner got %v", snap)
			}
			// Leaving clears the key for everyone.
			if err := mover.Send(ctx, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Leave{Leave: &corralv1.Leave{Room: "canvas"}}}); err != nil {
				t.Fatal(err)
			}
			cl := nextFrame(t, watcher, isSig).GetSignal()
			if !cl.GetClear() || cl.GetKey() != "cursor:mover" {
				t.Fatalf("after leave got %v, want the key cleared", cl)
			}
		})
	}
}

// TestStalledClientDoesNotHoldBackOthers: a client that stops reading is
// cut off as a slow consumer, and the rest of its room receives everything
// in order meanwhile. The stalled client is cut by its write's timeout
// (1 s) once the socket's buffers are full, or by its queue's bound,
// whichever comes first; the bound is 2 MiB, so that the readers, which
// read as the publishes come, keep 256 messages of slack on a loaded
// machine (with 256 KiB, a reader under CI's load was closed 4001).
func TestStalledClientDoesNotHoldBackOthers(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, func(o *server.Options) {
				o.Edge.QueueBytes = 2 << 20
				o.Edge.WriteTimeout = time.Second
			})
			ctx := testCtx(t)
			// The stalled client: joins, then never reads again.
			ws := rawDial(t, d, protocol.SubprotocolJSON)
			for _, f := range []string{`{"hello":{"token":"stalled"}}`, `{"join":{"room":"busy"}}`} {
				if err := ws.Write(ctx, websocket.MessageText, []byte(f)); err != nil {
					t.Fatal(err)
				}
			}
			pub := dial(t, d, "pub", protocol.Proto)
			if _, err := pub.Join(ctx, "busy", 0, ""); err != nil {
				t.Fatal(err)
			}
			chk := checker.New()
			var readers []*client.Conn
			for i := range 3 {
				c := dial(t, d, fmt.Sprintf("r%d", i), protocol.Encoding(i%2))
				if _, err := c.Join(ctx, "busy", 0, ""); err != nil {
					t.Fatal(err)
				}
				readers = append(readers, c)
			}
			// Let the stalled join land: the room has its five members.
			eventually.True(t, 10*time.Second, func() bool {
				res, err := d.api.Rooms(ctx, &corralv1.RoomsRequest{Pattern: "busy"})
				return err == nil && len(res.GetRooms()) == 1 && res.GetRooms()[0].GetMembers() == 5
			}, "the stalled join to land")
			const total = 600
			big := []byte(`"` + strings.Repeat("x", 8000) + `"`) // ~4.8 MB in all: far past socket buffers
			done := make(chan error, 1)
			go func() {
				for k := range total {
					id := fmt.Sprint(k)
					p, err := pub.Publish(ctx, "busy", id, big)
					if err != nil {
						done <- err
						return
					}
					chk.Acked("busy", p.GetSeq(), id)
				}
				done <- nil
			}()
			for i, c := range readers {
				name := fmt.Sprintf("r%d", i)
				chk.Member(name, "busy", 0, total)
				for n := 0; n < total; {
					m := nextFrame(t, c, isMsg).GetMessage()
					chk.Received(name, "busy", m.GetSeq(), m.GetId())
					n++
				}
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if err := chk.Check(); err != nil {
				t.Fatal(err)
			}
			// The stalled client was cut off: draining it ends in a close.
			code, hint := closeCode(t, ws, protocol.JSON)
			if code != websocket.StatusCode(corralv1.Code_CODE_SLOW_CONSUMER) && code != -1 {
				t.Fatalf("stalled client closed with %d (hint %d), want %d or an abrupt cut", code, hint, corralv1.Code_CODE_SLOW_CONSUMER)
			}
		})
	}
}

// TestSlowConsumerResumes: a client that reads too slowly for its room is
// disconnected with CODE_SLOW_CONSUMER ("resume") and, resuming, loses
// nothing.
func TestSlowConsumerResumes(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, func(o *server.Options) {
				o.Edge.QueueFrames, o.Edge.QueueBytes = 32, 256<<10
				o.HistoryMaxLen = 5000 // the resume must find what it missed
				o.Edge.WriteTimeout = time.Minute
			})
			ctx := testCtx(t)
			pub := dial(t, d, "pub", protocol.JSON)
			if _, err := pub.Join(ctx, "feed", 0, ""); err != nil {
				t.Fatal(err)
			}
			go func() {
				for range pub.Frames() { // the publisher's own copies
				}
			}()
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			// FrameBuffer 1 and a pause per message: this client reads far
			// slower than the room publishes, so its queue at the server
			// overflows while it still reads.
			// A small receive buffer, fixed (no autotuning, which lets a
			// loopback socket take up to net.ipv4.tcp_rmem's maximum, 32
			// MiB on some kernels: the whole test's traffic): the server's
			// queue, not the kernel, must absorb what the client does not
			// read.
			slow, err := client.Dial(dctx, d.wsURL, client.Options{Token: "slow", FrameBuffer: 1, HTTPClient: smallRcvBufClient(64 << 10)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(slow.CloseNow)
			j, err := slow.Join(ctx, "feed", 0, "")
			if err != nil {
				t.Fatal(err)
			}
			chk := checker.New()
			var last uint64
			readDone := make(chan struct{})
			// The reader stalls after a few messages until 600 publishes
			// (9.6 MB, more than the client's 64 KiB receive buffer, the
			// server's send buffer (at most net.ipv4.tcp_wmem's maximum,
			// 4 MiB) and the 256 KiB queue hold) are acknowledged: however
			// fast or slow this machine runs the publishers, the room
			// outpaces the reader and the queue overflows. The write
			// timeout is raised so that the stalled write is not cut
			// first (that is the stalled-client test's case).
			published := make(chan struct{})
			var acked atomic.Int64
			go func() {
				defer close(readDone)
				n := 0
				for f := range slow.Frames() {
					if m := f.GetMessage(); m != nil {
						chk.Received("slow", "feed", m.GetSeq(), m.GetId())
						last = m.GetSeq()
						if n++; n == 10 {
							<-published
						}
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
			const total = 1500
			// 1500 x 16 KB: far more than socket buffers hold, so the
			// server's queue for the slow client must overflow.
			body := []byte(`"` + strings.Repeat("y", 16000) + `"`)
			// Eight concurrent publishers: the room must outpace the reader
			// in every topology.
			g, gctx := errgroup.WithContext(ctx)
			for w := range 8 {
				g.Go(func() error {
					for k := w; k < total; k += 8 {
						id := fmt.Sprint(k)
						p, err := pub.Publish(gctx, "feed", id, body)
						if err != nil {
							return err
						}
						chk.Acked("feed", p.GetSeq(), id)
						if acked.Add(1) == 600 {
							close(published)
						}
					}
					return nil
				})
			}
			if err := g.Wait(); err != nil {
				t.Fatal(err)
			}
			<-readDone
			ce := slow.Err()
			if int(ce.Code) != int(corralv1.Code_CODE_SLOW_CONSUMER) || ce.Hint.GetCode() != corralv1.Code_CODE_SLOW_CONSUMER {
				t.Fatalf("closed with %d (%v, hint %v), want %d", ce.Code, ce, ce.Hint, corralv1.Code_CODE_SLOW_CONSUMER)
			}
			if protocol.AdviceOf(corralv1.Code_CODE_SLOW_CONSUMER) != protocol.AdviceResume {
				t.Fatal("slow consumer must advise resume")
			}
			if last >= total {
				t.Fatal("the slow client received everything: the test did not make it slow")
			}
			back, err := resumeConn(t, d.wsURL, "slow", slow.Welcome(), "feed", last, j.GetEpoch())
			if err != nil {
				t.Fatal(err)
			}
			for last < total {
				m := nextFrame(t, back, isMsg).GetMessage()
				chk.Received("slow", "feed", m.GetSeq(), m.GetId())
				last = m.GetSeq()
			}
			chk.Member("slow", "feed", 0, total)
			if err := chk.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// smallRcvBufClient dials with SO_RCVBUF set to n bytes.
func smallRcvBufClient(n int) *http.Client {
	d := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n)
		}); err != nil {
			return err
		}
		return serr
	}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}
