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
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/server"
)

// TestEdgeFailsOverToAnotherCore: an edge linked to two cores on one Redis
// loses one core for good; the sessions it carried move to the other core
// and their clients see no disconnect and miss nothing.
func TestEdgeFailsOverToAnotherCore(t *testing.T) {
	redisURL := "redis://" + redistest.Start(t)
	prefix := redistest.Prefix(t)
	var cores []*server.Node
	var urls string
	for i := range 2 {
		n, err := server.Start(server.Options{Mode: server.CoreOnly, Addr: "127.0.0.1:0", Logger: quietLogger(),
			RedisURL: redisURL, RedisPrefix: prefix, APIInsecure: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close(context.Background()) })
		cores = append(cores, n)
		if i > 0 {
			urls += ","
		}
		urls += "http://" + n.Addr()
	}
	edgeNode, err := server.Start(server.Options{
		Mode: server.EdgeOnly, Addr: "127.0.0.1:0", CoreURL: urls, Auth: auth.Dev{}, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { edgeNode.Close(context.Background()) })
	readytest.Wait(t, "http://"+edgeNode.Addr()+"/readyz")
	d := &deployment{wsURL: "ws://" + edgeNode.Addr() + "/ws"}
	ctx := testCtx(t)

	const room, members, perPhase = "lobby", 8, 20
	chk := checker.New()
	var conns []*client.Conn
	for i := range members {
		c := dial(t, d, fmt.Sprintf("u%d", i), protocol.Encoding(i%2))
		if _, err := c.Join(ctx, room, 0, ""); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// The publisher goes through a core's API, not a session: it is not
	// affected by the failover.
	api := apiOver(&deployment{apiURL: "http://" + cores[1].Addr()}, "connect", "")
	n := 0
	publish := func(count int) {
		for range count {
			res, err := api.Publish(ctx, &corralv1.PublishRequest{Room: room, Payload: payload(n)})
			if err != nil {
				t.Fatal(err)
			}
			chk.Acked(room, res.GetSeq(), "") // API messages carry no id
			n++
		}
	}
	publish(perPhase)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	cores[0].Close(cctx) // for good
	cancel()
	publish(perPhase)
	for i, c := range conns {
		name := fmt.Sprintf("u%d", i)
		for got := 0; got < 2*perPhase; got++ {
			f := nextFrame(t, c, isMsg)
			chk.Received(name, room, f.GetMessage().GetSeq(), f.GetMessage().GetId())
		}
		chk.Member(name, room, 0, 2*perPhase)
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
