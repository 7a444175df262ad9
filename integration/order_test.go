package integration_test

import (
	"errors"
	"fmt"
	"slices"
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

// TestPublishSeqOrder: a publish whose place in its session's sequence
// (Publish.seq) follows one the server has not stored is refused with
// CODE_OUT_OF_ORDER and not stored; once its predecessor is, it is taken;
// a retry of a stored one is a duplicate; a publish without seq (an older
// client) is taken as before, and one with seq but no id is refused.
func TestPublishSeqOrder(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, withoutRateLimits(nil))
			ctx := testCtx(t)
			c := dial(t, d, "alice", protocol.JSON)
			if _, err := c.Join(ctx, "seq", 0, ""); err != nil {
				t.Fatal(err)
			}
			steps := []struct {
				id   string
				seq  uint64
				want corralv1.Code // 0: stored; -1: a duplicate
			}{
				{"a1", 1, 0},
				{"a3", 3, corralv1.Code_CODE_OUT_OF_ORDER},
				{"a2", 2, 0},
				{"a3", 3, 0},
				{"a2", 2, -1},
				{"old", 0, 0},
				{"a5", 5, corralv1.Code_CODE_OUT_OF_ORDER},
				{"", 4, corralv1.Code_CODE_INVALID_ARGUMENT},
				{"a4", 4, 0},
				{"a5", 5, 0},
			}
			var stored []uint64
			for _, st := range steps {
				id := st.id
				if id == "" {
					// PublishSeq needs an id: send the frame as is.
					err := c.Send(ctx, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Room: "seq", Seq: st.seq}}})
					if err != nil {
						t.Fatal(err)
					}
					f := nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return f.GetError() != nil && f.GetError().GetRef() == "" })
					if got := f.GetError().GetCode(); got != st.want {
						t.Fatalf("publish without id at %d: %v, want %v", st.seq, got, st.want)
					}
					continue
				}
				p, err := c.PublishSeq(ctx, "seq", id, st.seq, payload(int(st.seq)))
				var se *client.ServerError
				switch {
				case st.want > 0:
					if !errors.As(err, &se) || se.Err.GetCode() != st.want {
						t.Fatalf("%s at %d: %v, want %v", id, st.seq, err, st.want)
					}
				case err != nil:
					t.Fatalf("%s at %d: %v", id, st.seq, err)
				case (st.want == -1) != p.GetDuplicate():
					t.Fatalf("%s at %d: duplicate %v, want %v", id, st.seq, p.GetDuplicate(), st.want == -1)
				case st.want == 0:
					stored = append(stored, p.GetSeq())
				}
			}
			// Nothing else was stored: the stored ones hold seqs 1, 2, ...
			// in the order they were taken.
			if want := []uint64{1, 2, 3, 4, 5, 6}; !slices.Equal(stored, want) {
				t.Fatalf("stored at seqs %v, want %v", stored, want)
			}
		})
	}
}
