package integration_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	"github.com/corral-rt/corral/apiclient"
	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/config"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/readytest"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/internal/retry"
	"github.com/corral-rt/corral/server"
)

// TestAPIPublishSeqOrder: a backend publishes a sequence through
// RoomService.Publish with PublishRequest.seq, up to 16 calls on their way
// at once, each retried with its key and place until it is stored, while
// the core restarts under it. The checker finds every publish stored
// exactly once, in the order made (per-sender order), the room's history
// without gaps. A seq without a key or without a stream is refused.
func TestAPIPublishSeqOrder(t *testing.T) {
	redisURL := "redis://" + redistest.Start(t)
	prefix := redistest.Prefix(t)
	opts := server.Options{Mode: server.CoreOnly, Node: config.Node{Addr: "127.0.0.1:0", RedisURL: redisURL, RedisPrefix: prefix}, Logger: quietLogger(), APIInsecure: true}
	core := startNode(t, opts)
	opts.Addr = core.Addr()
	readytest.Wait(t, "http://"+core.Addr()+"/readyz")
	api := apiclient.New("http://"+core.Addr(), "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const room, each, window = "api-fifo", 60, 16

	for name, req := range map[string]*corralv1.PublishRequest{
		"no key":    {Room: room, Payload: []byte(`1`), Seq: 1, Stream: "s"},
		"no stream": {Room: room, Payload: []byte(`1`), Seq: 1, IdempotencyKey: "k"},
	} {
		if _, err := api.Publish(ctx, req); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("%s: %v, want invalid_argument", name, err)
		}
	}

	chk := checker.New()
	sem := make(chan struct{}, window)
	var wg sync.WaitGroup
	n := 0
	publish := func(count int) {
		for range count {
			i := n
			n++
			id := fmt.Sprintf("m%d", i)
			chk.Sent("backend", room, id)
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				b := retry.Backoff{Base: 5 * time.Millisecond, Cap: 50 * time.Millisecond}
				for {
					res, err := api.Publish(ctx, &corralv1.PublishRequest{Room: room, Payload: []byte(strconv.Quote(id)),
						IdempotencyKey: id, Sender: "backend", Seq: uint64(i + 1)})
					if err == nil {
						chk.Acked(room, res.GetSeq(), id)
						return
					}
					// failed_precondition: an earlier one is not stored
					// yet; unavailable and the like: the core restarts.
					if errors.Is(err, context.DeadlineExceeded) || !b.Wait(ctx) {
						t.Errorf("publish %s: %v", id, err)
						return
					}
				}
			})
		}
	}
	// A stream the core does not know yet takes any place: its first
	// publish goes alone, as the SDKs' does.
	publish(1)
	wg.Wait()
	publish(each - 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		core.Close(cctx)
		cancel()
		core = startNode(t, opts)
	}()
	publish(each)
	<-done
	publish(each)
	wg.Wait()

	total := uint64(3 * each)
	chk.Member("history", room, 0, total)
	var after uint64
	for after < total {
		h, err := api.History(ctx, &corralv1.HistoryRequest{Room: room, AfterSeq: after})
		if err != nil {
			t.Fatal(err)
		}
		if len(h.GetMessages()) == 0 {
			t.Fatalf("history ends at %d, want %d", after, total)
		}
		for _, m := range h.GetMessages() {
			id, err := strconv.Unquote(string(m.GetPayload()))
			if err != nil {
				t.Fatalf("payload %q: %v", m.GetPayload(), err)
			}
			chk.Received("history", room, m.GetSeq(), id)
			after = m.GetSeq()
		}
	}
	if err := chk.Check(); err != nil {
		t.Fatal(err)
	}
}
