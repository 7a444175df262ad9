package integration_test

import (
	"fmt"
	"github.com/corral-rt/corral/internal/readytest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/pubsub"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/protocol"
	"github.com/redis/rueidis"
)

// TestClusterScaleOut: two corral processes (serve mode, each an edge and
// a core) on a 3-node Redis Cluster, rooms on every node, publishers on
// both processes. Every member receives every acknowledged message of its
// room once, in the room's one order; members that drop resume on the
// other process and get exactly what they missed.
func TestClusterScaleOut(t *testing.T) {
	runClusterTraffic(t, false)
}

// TestClusterSlotMigration is TestClusterScaleOut with one room's slot
// migrated to another node (SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT
// NODE) while traffic runs: Redis ends the subscriptions to the room's
// channel on the old node, the cores subscribe on the new one and catch
// the room up from history, and nothing is lost or duplicated.
func TestClusterSlotMigration(t *testing.T) {
	runClusterTraffic(t, true)
}

func runClusterTraffic(t *testing.T, migrate bool) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster and 2 corral processes")
	}
	bin := buildCorral(t)
	cluster := redistest.StartCluster(t)
	prefix := redistest.Prefix(t)

	var procs []*deployment
	for range 2 {
		addr := freeAddr(t)
		p := &process{t: t, bin: bin, args: []string{
			"serve", "--insecure-dev", "--addr", addr, "--log-level", "warn",
			"--redis", cluster.URL(), "--redis-prefix", prefix,
			"--publish-rate", "-1", // limits have their own tests
		}}
		p.start()
		t.Cleanup(p.kill9)
		readytest.Wait(t, "http://"+addr+"/readyz")
		procs = append(procs, &deployment{wsURL: "ws://" + addr + "/ws"})
	}

	ctx := testCtx(t)
	const (
		perNode  = 2 // rooms on each Redis node
		clients  = 48
		resumers = 6 // of the clients: drop mid-traffic, resume elsewhere
		pubs     = 4
		perPub   = 120 // messages per publisher, round robin over rooms
	)
	var rooms []string
	for node := range 3 {
		for i := range perNode {
			rooms = append(rooms, cluster.NameOn(node, fmt.Sprintf("hall%d-%d-", node, i)))
		}
	}
	const perRoom = pubs * perPub / (3 * perNode)
	room := func(i int) string { return rooms[i%len(rooms)] }
	chk := checker.New()
	var resets atomic.Int64
	var sent atomic.Int64

	// Members: each joins one room and reads until it has perRoom, then
	// reads on to catch duplicates. Resumers drop once sent passes a
	// third of the traffic, then resume on the other process.
	var recv sync.WaitGroup
	for i := range clients {
		name, r := fmt.Sprintf("m%d", i), room(i)
		d := procs[i/len(rooms)%2] // every room has members on both
		c := dial(t, d, name, protocol.Encoding(i/2%2))
		j, err := c.Join(ctx, r, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		chk.Member(name, r, 0, perRoom)
		recv.Add(1)
		resumer := i < resumers
		go func() {
			var once sync.Once
			defer once.Do(recv.Done)
			var last uint64
			read := func(c *client.Conn, until func() bool) {
				for f := range c.Frames() {
					if m := f.GetMessage(); m != nil {
						chk.Received(name, r, m.GetSeq(), m.GetId())
						last = max(last, m.GetSeq())
					}
					if rs := f.GetReset_(); rs != nil {
						chk.Reset(name, rs.GetRoom())
						resets.Add(1)
					}
					if last >= perRoom {
						once.Do(recv.Done)
					}
					if until() {
						return
					}
				}
			}
			if resumer {
				read(c, func() bool { return sent.Load() >= pubs*perPub/3 && last > 0 })
				w := c.Welcome()
				c.CloseNow() // a network cut: no goodbye
				time.Sleep(100 * time.Millisecond)
				var err error
				c, err = resumeConn(t, procs[(i/len(rooms)+1)%2].wsURL, name, w, r, last, j.GetEpoch())
				if err != nil {
					t.Errorf("%s: resume on the other process: %v", name, err)
					return
				}
				if !c.Welcome().GetResumed() {
					t.Errorf("%s: not resumed: %v", name, c.Welcome())
				}
			}
			read(c, func() bool { return false })
		}()
	}

	// Publishers on both processes; a publish is retried with its id (so
	// deduplicated) when it fails for a reason worth retrying.
	var pubWG sync.WaitGroup
	errs := make(chan error, pubs)
	for p := range pubs {
		c := dial(t, procs[p%2], fmt.Sprintf("pub%d", p), protocol.JSON)
		for _, r := range rooms {
			if _, err := c.Join(ctx, r, 0, ""); err != nil {
				t.Fatal(err)
			}
		}
		go func() {
			for range c.Frames() {
			}
		}()
		pubWG.Go(func() {
			for k := range perPub {
				id, r := fmt.Sprintf("p%d-%d", p, k), room(k)
				res, _, err := publishAcked(ctx, c, r, id, payload(k), 5*time.Second)
				if err != nil {
					errs <- fmt.Errorf("publisher %d, %s: %w", p, id, err)
					return
				}
				chk.Acked(r, res.GetSeq(), id)
				sent.Add(1)
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	pubsDone := make(chan struct{})
	go func() { pubWG.Wait(); close(pubsDone) }()

	if migrate {
		for sent.Load() < pubs*perPub/2 {
			select {
			case <-pubsDone:
				t.Fatalf("publishers ended before the migration: %v", <-errs)
			case <-time.After(5 * time.Millisecond):
			}
		}
		slot := pubsub.Slot(rooms[0])
		from := cluster.Owner(slot)
		to := (from + 1) % 3
		moveStart := time.Now()
		cluster.MoveSlot(t, slot, to)
		if sent.Load() >= pubs*perPub {
			t.Error("the migration ended after the traffic: it did not run under traffic")
		}
		t.Logf("moved slot %d of %s from node %d to %d in %v, after %d publishes", slot, rooms[0], from, to, time.Since(moveStart), sent.Load())
		// Both cores subscribe to the room's channel on its new node.
		n := cluster.Node(to)
		ch := prefix + ":{" + rooms[0] + "}:ch"
		var subs int64
		var err error
		if !eventually.Within(10*time.Second, func() bool {
			var res []rueidis.RedisMessage
			res, err = n.Do(ctx, n.B().PubsubShardnumsub().Channel(ch).Build()).ToArray()
			subs = 0
			if err == nil && len(res) == 2 {
				subs, err = res[1].AsInt64()
			}
			return err == nil && subs == 2
		}) {
			t.Fatalf("%d subscribers to %s on its new node (%v), want 2", subs, ch, err)
		}
	}

	<-pubsDone
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { recv.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Log("not every member received everything; the checker says what is missing")
	}
	time.Sleep(200 * time.Millisecond) // let late duplicates show
	if err := chk.Check(); err != nil {
		t.Fatal(err)
	}
	if resets.Load() > 0 {
		t.Fatalf("%d Resets: history survived, nobody should have been told to refetch", resets.Load())
	}
	for i := range clients {
		if got := chk.Count(fmt.Sprintf("m%d", i), room(i)); got != perRoom {
			t.Errorf("m%d received %d messages, want %d", i, got, perRoom)
		}
	}
}
