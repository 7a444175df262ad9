package redistest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/pubsub"
	"github.com/corral-rt/corral/internal/redistest"
)

func TestStartProcess(t *testing.T) {
	srv := redistest.StartProcess(t, 0)
	if srv.Addr() == "127.0.0.1:6379" {
		t.Fatal("started on the shared port")
	}
	if !redistest.Private(srv.Addr()) {
		t.Fatal("a started server is not private")
	}
	c := redistest.Client(t, srv.Addr())
	ctx := context.Background()
	if err := c.Do(ctx, c.B().Set().Key("k").Value("v").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	// The restarted server is empty: nothing is persisted.
	if n, err := c.Do(ctx, c.B().Exists().Key("k").Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("after restart EXISTS k = %d, %v", n, err)
	}
}

func TestStart(t *testing.T) {
	addr := redistest.Start(t)
	c := redistest.Client(t, addr)
	if err := c.Do(context.Background(), c.B().Ping().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if a, b := redistest.Prefix(t), redistest.Prefix(t); a == b {
		t.Fatalf("Prefix repeated %q", a)
	}
}

func TestStartCluster(t *testing.T) {
	c := redistest.StartCluster(t)
	cl := c.Client(t)
	ctx := context.Background()
	// Keys on every node, by way of the client's routing.
	seen := map[int]bool{}
	for i := 0; len(seen) < 3 && i < 1000; i++ {
		k := fmt.Sprintf("{r%d}:k", i)
		if err := cl.Do(ctx, cl.B().Set().Key(k).Value("v").Build()).Error(); err != nil {
			t.Fatal(err)
		}
		seen[c.Owner(pubsub.Slot(k))] = true
	}
	if len(seen) != 3 {
		t.Fatalf("keys landed on nodes %v", seen)
	}
	k := "{moving}:k"
	if err := cl.Do(ctx, cl.B().Set().Key(k).Value("v").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	from := c.Owner(pubsub.Slot(k))
	to := (from + 1) % 3
	c.MoveSlot(t, pubsub.Slot(k), to)
	if got := c.Owner(pubsub.Slot(k)); got != to {
		t.Fatalf("slot on node %d after the move to %d", got, to)
	}
	if v, err := cl.Do(ctx, cl.B().Get().Key(k).Build()).ToString(); err != nil || v != "v" {
		t.Fatalf("GET after the move = %q, %v", v, err)
	}
}

func TestStartClusterReplicas(t *testing.T) {
	began := time.Now()
	c := redistest.StartClusterReplicas(t)
	t.Logf("cluster formed in %v", time.Since(began))
	cl := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	k := "{" + c.NameOn(1, "r") + "}:k"
	// The replica has the key before its master dies: SET and WAIT on
	// one connection to the master.
	m := c.Node(1)
	for i, r := range m.DoMulti(ctx, m.B().Set().Key(k).Value("v").Build(), m.B().Wait().Numreplicas(1).Timeout(5000).Build()) {
		if n, err := r.AsInt64(); i == 1 && (err != nil || n != 1) {
			t.Fatalf("WAIT: %d, %v", n, err)
		} else if err := r.Error(); err != nil {
			t.Fatal(err)
		}
	}
	if r := c.Replica(1); r != 4 {
		t.Fatalf("node 1's replica is %d, want 4", r)
	}
	began = time.Now()
	promoted := c.KillMaster(1)
	t.Logf("replica promoted and the cluster stable %v after the kill", time.Since(began))
	if promoted != 4 {
		t.Fatalf("promoted node %d, want 4", promoted)
	}
	if got := c.Owner(pubsub.Slot(k)); got != 4 {
		t.Fatalf("slot of %s owned by node %d after the failover, want 4", k, got)
	}
	// The client follows the promotion (it refreshes its slot map on the
	// broken connection) and finds the key on the new master.
	dl, _ := ctx.Deadline()
	var v string
	var err error
	if !eventually.Within(time.Until(dl), func() bool {
		v, err = cl.Do(ctx, cl.B().Get().Key(k).Build()).ToString()
		return err == nil && v == "v"
	}) {
		t.Fatalf("GET after the failover = %q, %v", v, err)
	}
}
