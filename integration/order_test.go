package integration_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
	"golang.org/x/sync/errgroup"
)

// TestOneOrderPerRoom: three clients (JSON and protobuf mixed) in one room,
// 1,000 messages from three concurrent senders: every client receives every
// message, in the same order, with seq gapless.
func TestOneOrderPerRoom(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, nil)
			ctx := testCtx(t)
			const room, total = "order", 1000
			encs := []protocol.Encoding{protocol.JSON, protocol.Proto, protocol.JSON}
			conns := make([]*client.Conn, len(encs))
			for i, enc := range encs {
				conns[i] = dial(t, d, fmt.Sprintf("user%d", i), enc)
				j, err := conns[i].Join(ctx, room, 0, "")
				if err != nil {
					t.Fatal(err)
				}
				if j.GetSeq() != 0 {
					t.Fatalf("joined a new room at seq %d, want 0", j.GetSeq())
				}
			}
			chk := checker.New()
			var recv sync.WaitGroup
			for i, c := range conns {
				name := fmt.Sprintf("user%d", i)
				chk.Member(name, room, 0, total)
				recv.Add(1)
				go func() {
					defer recv.Done()
					n := 0
					for f := range c.Frames() {
						if m := f.GetMessage(); m != nil {
							chk.Received(name, m.GetRoom(), m.GetSeq(), m.GetId())
							if n++; n == total {
								return
							}
						}
					}
				}()
			}
			g, gctx := errgroup.WithContext(ctx)
			for i, c := range conns {
				g.Go(func() error {
					for k := i; k < total; k += len(conns) {
						id := fmt.Sprintf("m%d", k)
						p, err := c.Publish(gctx, room, id, payload(k))
						if err != nil {
							return fmt.Errorf("publish %s: %w", id, err)
						}
						chk.Acked(room, p.GetSeq(), id)
					}
					return nil
				})
			}
			if err := g.Wait(); err != nil {
				t.Fatal(err)
			}
			recv.Wait()
			if err := chk.Check(); err != nil {
				t.Fatal(err)
			}
			for i := range conns {
				if n := chk.Count(fmt.Sprintf("user%d", i), room); n != total {
					t.Fatalf("user%d received %d messages, want %d", i, n, total)
				}
			}
		})
	}
}

// TestJSONAndProtoInteroperate: a payload published by a JSON client reaches
// a protobuf client byte for byte, and the reverse.
func TestJSONAndProtoInteroperate(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, nil)
			ctx := testCtx(t)
			js := dial(t, d, "js", protocol.JSON)
			pb := dial(t, d, "pb", protocol.Proto)
			for _, c := range []*client.Conn{js, pb} {
				if _, err := c.Join(ctx, "mix", 0, ""); err != nil {
					t.Fatal(err)
				}
			}
			isMsg := func(f *corralv1.ServerFrame) bool { return f.GetMessage() != nil }
			if _, err := js.Publish(ctx, "mix", "a", []byte(`{"text":"from json","n":[1,2]}`)); err != nil {
				t.Fatal(err)
			}
			got := nextFrame(t, pb, isMsg).GetMessage()
			if string(got.GetPayload()) != `{"text":"from json","n":[1,2]}` || got.GetSender() != "js" || got.GetSeq() != 1 {
				t.Fatalf("protobuf client got %v", got)
			}
			if _, err := pb.Publish(ctx, "mix", "b", []byte(`"from proto"`)); err != nil {
				t.Fatal(err)
			}
			nextFrame(t, js, isMsg) // its own first message
			got = nextFrame(t, js, isMsg).GetMessage()
			if string(got.GetPayload()) != `"from proto"` || got.GetSender() != "pb" || got.GetSeq() != 2 {
				t.Fatalf("JSON client got %v", got)
			}
		})
	}
}
