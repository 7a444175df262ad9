package history_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/internal/pubsub"
	"github.com/corral-rt/corral/internal/redistest"
)

// TestRedisCluster runs the store suite on a 3-node Redis Cluster.
func TestRedisCluster(t *testing.T) {
	cluster := redistest.StartCluster(t)
	client := cluster.Client(t)
	testStore(t, func(t *testing.T, maxLen int) history.Store {
		s := history.NewRedis(client, history.RedisOptions{MaxLen: maxLen, Prefix: redistest.Prefix(t)})
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestRedisClusterPubSub has two stores (two processes' worth) append
// concurrently into rooms on each of the 3 nodes; one subscriber sees
// every room's messages once, 1..N in order, with no gap signal.
func TestRedisClusterPubSub(t *testing.T) {
	cluster := redistest.StartCluster(t)
	prefix := redistest.Prefix(t)
	var cores [2]*history.Redis
	for i := range cores {
		cores[i] = history.NewRedis(cluster.Client(t), history.RedisOptions{Prefix: prefix})
		t.Cleanup(func() { cores[i].Close() })
	}
	rooms := []string{cluster.NameOn(0, "a"), cluster.NameOn(1, "b"), cluster.NameOn(2, "c")}
	var got collector
	sub, err := cores[0].Subscribe(context.Background(), got.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := sub.Add(context.Background(), rooms...); err != nil {
		t.Fatal(err)
	}
	const perWriter = 100
	var wg sync.WaitGroup
	for c, core := range cores {
		for w, room := range rooms {
			wg.Go(func() {
				for i := range perWriter {
					if _, err := core.Append(context.Background(), room, newMsg(room, c*10+w, i), ""); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	n := perWriter * len(cores) * len(rooms)
	waitFor(t, "all messages", func() bool { msgs, _ := got.snapshot(); return len(msgs) >= n })
	msgs, gaps := got.snapshot()
	for _, room := range rooms {
		var s []uint64
		for _, m := range msgs {
			if m.GetRoom() == room {
				s = append(s, m.GetSeq())
			}
		}
		if want := seqRange(1, perWriter*uint64(len(cores))); !slices.Equal(s, want) {
			t.Errorf("room %s: seqs %v", room, s)
		}
	}
	if len(gaps) != 0 {
		t.Fatalf("gap signals %v without a reconnect", gaps)
	}
}

// TestRedisClusterSlotMove moves a subscribed room's slot to another node
// while messages are appended to it: Redis ends the subscription there
// (sunsubscribe); the subscription signals a possible gap for that room
// and delivers its messages from the new node, in order, and the other
// rooms are not disturbed.
func TestRedisClusterSlotMove(t *testing.T) {
	cluster := redistest.StartCluster(t)
	s := history.NewRedis(cluster.Client(t), history.RedisOptions{Prefix: redistest.Prefix(t)})
	defer s.Close()
	ctx := context.Background()
	moving, still := cluster.NameOn(0, "moving"), cluster.NameOn(1, "still")

	var mu sync.Mutex // guards log
	var log []uint64  // moving's deliveries in order; 0 is a gap signal
	var stillN atomic.Int64
	var stillGaps atomic.Int64
	sub, err := s.Subscribe(ctx, func(room string, msg *corralv1.Message) {
		switch {
		case room == moving:
			mu.Lock()
			log = append(log, msg.GetSeq()) // 0 for nil
			mu.Unlock()
		case msg == nil:
			stillGaps.Add(1)
		default:
			stillN.Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := sub.Add(ctx, moving, still); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var appended atomic.Uint64
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			actx, cancel := context.WithTimeout(ctx, 10*time.Second)
			res, err := s.Append(actx, moving, newMsg(moving, 0, i), "d"+strconv.Itoa(i))
			cancel()
			if err != nil {
				t.Errorf("append during the move: %v", err)
				return
			}
			appended.Store(res.Seq)
			if _, err := s.Append(ctx, still, newMsg(still, 0, i), ""); err != nil {
				t.Errorf("append to the other room: %v", err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	})
	waitFor(t, "traffic before the move", func() bool { return appended.Load() >= 50 })
	cluster.MoveSlot(t, pubsub.Slot(moving), 2)
	if got := cluster.Owner(pubsub.Slot(moving)); got != 2 {
		t.Fatalf("slot on node %d after the move", got)
	}
	moved := appended.Load()
	waitFor(t, "traffic after the move", func() bool { return appended.Load() >= moved+50 })
	close(stop)
	wg.Wait()
	last := appended.Load()
	waitFor(t, "the last message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(log) > 0 && log[len(log)-1] == last
	})

	mu.Lock()
	defer mu.Unlock()
	var prev uint64
	gap, gaps := false, 0
	for _, seq := range log {
		if seq == 0 {
			gap = true
			gaps++
			continue
		}
		if seq <= prev {
			t.Fatalf("seq %d after %d: %v", seq, prev, log)
		}
		if seq != prev+1 && !gap {
			t.Fatalf("seq %d after %d without a gap signal: %v", seq, prev, log)
		}
		prev, gap = seq, false
	}
	if gaps == 0 {
		t.Fatal("no gap signal: the subscription did not notice the move")
	}
	if stillGaps.Load() != 0 {
		t.Errorf("%d gap signals for the room that did not move", stillGaps.Load())
	}
	t.Logf("%d messages, %d delivered, %d gap signals", last, len(log)-gaps, gaps)
}
