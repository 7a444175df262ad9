package integration_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connectproto"
	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/server"
)

// overloadHint returns the retry hint of an overload refusal: the
// corral.v1.Error detail of a resource_exhausted error, or nil.
func overloadHint(err error) *corralv1.Error {
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeResourceExhausted {
		return nil
	}
	for _, d := range ce.Details() {
		if m, derr := connectproto.UnmarshalErrorDetail(d); derr == nil {
			if e, ok := m.(*corralv1.Error); ok {
				return e
			}
		}
	}
	return nil
}

// TestOverloadPushBack: members that stop reading while an internal
// service publishes fast back up the edge's send queues; the API then
// answers resource_exhausted with a CODE_OVERLOADED retry hint within a
// bounded number of publishes, instead of queueing more. Every
// acknowledged message still reaches every member, in order, once; and
// once the members have caught up, publishes succeed again.
func TestOverloadPushBack(t *testing.T) {
	const (
		readers = 3
		room    = "feed"
		// Past this many acknowledged publishes without a refusal, the
		// push-back failed: 200 x 60 KB x 3 readers is 36 MB, far more
		// than the readers' 64 KiB receive buffers, the server's send
		// buffers (at most net.ipv4.tcp_wmem's maximum, 4 MiB each) and
		// the 1 MiB bound hold.
		maxBeforeRefusal = 200
	)
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, func(o *server.Options) {
				o.Core.API.OverloadQueueBytes = 1 << 20
				// The edge's own bounds far above it: the readers must be
				// pushed back for, not closed as slow consumers; nor cut
				// for a stalled write.
				o.Edge.QueueFrames, o.Edge.QueueBytes = 1<<16, 256<<20
				o.Edge.WriteTimeout = 2 * time.Minute
				o.HistoryMaxLen = 5000
			})
			ctx := testCtx(t)
			chk := checker.New()
			gate := make(chan struct{}) // closed once the publisher was refused
			var wg sync.WaitGroup
			lastSeq := make([]chan uint64, readers) // each reader's target
			for i := range readers {
				name := fmt.Sprintf("reader%d", i)
				dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				c, err := client.Dial(dctx, d.wsURL, client.Options{Token: name, FrameBuffer: 1, HTTPClient: smallRcvBufClient(64 << 10)})
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(c.CloseNow)
				if _, err := c.Join(ctx, room, 0, ""); err != nil {
					t.Fatal(err)
				}
				lastSeq[i] = make(chan uint64, 1)
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-gate // read nothing until the API pushed back
					var want, got uint64
					wants := lastSeq[i]
					for want == 0 || got < want {
						select {
						case want = <-wants:
							continue
						case f, ok := <-c.Frames():
							if !ok {
								t.Errorf("%s: connection ended: %v", name, c.Err())
								return
							}
							if m := f.GetMessage(); m != nil {
								chk.Received(name, room, m.GetSeq(), m.GetId())
								got = m.GetSeq()
							}
						}
					}
				}()
				chk.Member(name, room, 0, 0) // widened below
			}

			pad := strings.Repeat("y", 60000)
			publish := func(k int) (uint64, error) {
				pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				res, err := d.api.Publish(pctx, &corralv1.PublishRequest{Room: room, Payload: []byte(fmt.Sprintf(`{"k":%d,"pad":%q}`, k, pad))})
				if err != nil {
					return 0, err
				}
				chk.Acked(room, res.GetSeq(), "")
				return res.GetSeq(), nil
			}

			// Phase 1: publish until refused.
			var acked uint64
			var hint *corralv1.Error
			for k := 0; hint == nil; k++ {
				if k == maxBeforeRefusal {
					close(gate)
					t.Fatalf("%d publishes acknowledged while the readers read nothing: no push-back", k)
				}
				seq, err := publish(k)
				if err != nil {
					if hint = overloadHint(err); hint == nil {
						close(gate)
						t.Fatalf("publish %d: %v, want resource_exhausted with a retry hint", k, err)
					}
					break
				}
				acked = seq
			}
			if hint.GetCode() != corralv1.Code_CODE_OVERLOADED || hint.GetRetryAfterMs() == 0 ||
				protocol.AdviceOf(hint.GetCode()) != protocol.AdviceRetry {
				t.Fatalf("refusal's hint %v: want CODE_OVERLOADED (retry) and retry_after_ms", hint)
			}
			if acked == 0 {
				t.Fatal("refused before anything was queued")
			}
			// A Broadcast is refused as a whole while backed up.
			if _, err := d.api.Broadcast(ctx, &corralv1.BroadcastRequest{Rooms: []string{room, "other"}, Payload: []byte(`{}`)}); overloadHint(err) == nil {
				t.Fatalf("broadcast while backed up: %v, want resource_exhausted with a retry hint", err)
			}

			// Phase 2: the readers catch up; publishes succeed again,
			// honouring the hint between attempts.
			close(gate)
			deadline := time.Now().Add(60 * time.Second)
			var again uint64
			for again == 0 {
				if time.Now().After(deadline) {
					t.Fatal("publishes still refused 60 s after the readers started reading")
				}
				time.Sleep(time.Duration(hint.GetRetryAfterMs()) * time.Millisecond)
				seq, err := publish(-1)
				if err != nil {
					if hint = overloadHint(err); hint == nil {
						t.Fatalf("publish after catching up: %v", err)
					}
					continue
				}
				again = seq
			}
			for i := range readers {
				lastSeq[i] <- again
				chk.Member(fmt.Sprintf("reader%d", i), room, 0, again)
			}
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("readers did not receive every acknowledged message within 60 s")
			}
			if err := chk.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
