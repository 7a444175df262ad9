package integration_test

import (
	"context"
	"fmt"
	"github.com/corral-rt/corral/internal/readytest"
	"testing"
	"time"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/server"
)

// TestCoreRestartKeepsBrowsers: in split mode on Redis, the core restarts
// (a deploy) while clients stay connected to the edge. The edge re-opens
// its links and resumes every session itself: no client sees a
// disconnect, and every message published before, during (retried) and
// after the restart arrives once, in order.
func TestCoreRestartKeepsBrowsers(t *testing.T) {
	redisURL := "redis://" + redistest.Start(t)
	prefix := redistest.Prefix(t)
	coreOpts := server.Options{Mode: server.CoreOnly, Addr: "127.0.0.1:0", Logger: quietLogger(), RedisURL: redisURL, RedisPrefix: prefix, APIInsecure: true}
	core1, err := server.Start(coreOpts)
	if err != nil {
		t.Fatal(err)
	}
	coreAddr := core1.Addr()
	edgeNode, err := server.Start(server.Options{
		Mode: server.EdgeOnly, Addr: "127.0.0.1:0", CoreURL: "http://" + coreAddr, Auth: auth.Dev{}, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { edgeNode.Close(context.Background()) })
	readytest.Wait(t, "http://"+edgeNode.Addr()+"/readyz")
	d := &deployment{wsURL: "ws://" + edgeNode.Addr() + "/ws"}
	ctx := testCtx(t)

	const room = "deploy"
	chk := checker.New()
	var members []*client.Conn
	for i := range 10 {
		c := dial(t, d, fmt.Sprintf("u%d", i), protocol.Encoding(i%2))
		if _, err := c.Join(ctx, room, 0, ""); err != nil {
			t.Fatal(err)
		}
		members = append(members, c)
	}
	pub := dial(t, d, "pub", protocol.JSON)
	if _, err := pub.Join(ctx, room, 0, ""); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range pub.Frames() {
		}
	}()
	n := 0
	publish := func(count int) {
		for range count {
			id := fmt.Sprintf("m%d", n)
			for {
				p, err := pub.Publish(ctx, room, id, payload(n))
				if se, ok := err.(*client.ServerError); ok && se.Err.GetCode() == corralv1.Code_CODE_UNAVAILABLE {
					time.Sleep(time.Duration(se.Err.GetRetryAfterMs()) * time.Millisecond)
					continue // the core is restarting: retry the same id
				}
				if err != nil {
					t.Fatal(err)
				}
				chk.Acked(room, p.GetSeq(), id)
				break
			}
			n++
		}
	}
	publish(30)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	core1.Close(cctx)
	cancel()
	var core2 *server.Node
	eventually.WithinEvery(10*time.Second, 50*time.Millisecond, func() bool {
		opts := coreOpts
		opts.Addr = coreAddr
		core2, err = server.Start(opts)
		return err == nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { core2.Close(context.Background()) })
	publish(30)
	for i, c := range members {
		name := fmt.Sprintf("u%d", i)
		for got := 0; got < 60; {
			f := nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return isMsg(f) || f.GetReset_() != nil })
			if f.GetReset_() != nil {
				t.Fatalf("%s got a Reset across a core restart", name)
			}
			chk.Received(name, room, f.GetMessage().GetSeq(), f.GetMessage().GetId())
			got++
		}
		chk.Member(name, room, 0, 60)
		select {
		case <-c.Done():
			t.Fatalf("%s was disconnected: %v", name, c.Err())
		default:
		}
	}
	if err := chk.Check(); err != nil {
		t.Fatal(err)
	}
}
