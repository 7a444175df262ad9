package history_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/internal/redisurl"
)

// sentinelClient returns a client of the redis+sentinel:// URL of s.
func sentinelClient(t *testing.T, s *redistest.Sentinel) rueidis.Client {
	t.Helper()
	o, err := redisurl.Options(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	o.DisableCache = true
	c, err := rueidis.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestRedisSentinelFailover checks that after the master is killed and a
// replica promoted, appends reach the new master and a subscription is
// resubscribed there, telling its handler to catch up first. Without
// replica wait the first append opens a new epoch (the promoted replica
// may lack acknowledged messages nobody here knows of), keeping the
// surviving messages' seqs; with it the epoch stays.
func TestRedisSentinelFailover(t *testing.T) {
	for name, wait := range map[string]int{"async": 0, "replica-wait": 1} {
		t.Run(name, func(t *testing.T) { testRedisSentinelFailover(t, wait) })
	}
}

func testRedisSentinelFailover(t *testing.T, wait int) {
	sn := redistest.StartSentinel(t, 1+wait) // one left after the failover
	client := sentinelClient(t, sn)
	var replicated atomic.Int64
	s := history.NewRedis(client, history.RedisOptions{Prefix: "fo", Replicas: wait, ReplicaTimeout: 5 * time.Second,
		OnReplicated: func(string) { replicated.Add(1) }})
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	got := make(chan *corralv1.Message, 100)
	sub, err := s.Subscribe(ctx, func(room string, msg *corralv1.Message) { got <- msg })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Close() })
	if err := sub.Add(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	first, err := s.Append(ctx, "r", &corralv1.Message{Room: "r", Payload: []byte("a")}, "")
	if err != nil {
		t.Fatal(err)
	}
	if m := <-got; m.GetSeq() != first.Seq {
		t.Fatalf("got %v before the failover, want seq %d", m, first.Seq)
	}
	// The replica has the message before the master dies.
	if err := client.Do(ctx, client.B().Wait().Numreplicas(1).Timeout(5000).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sn.Failover()
	t.Logf("failover took %v", time.Since(start))

	var res history.AppendResult
	dl, _ := ctx.Deadline()
	eventually.NoError(t, time.Until(dl), func() error {
		res, err = s.Append(ctx, "r", &corralv1.Message{Room: "r", Payload: []byte("b")}, "")
		if err != nil {
			return fmt.Errorf("no append succeeded after the failover: %w", err)
		}
		return nil
	})
	t.Logf("append after %v", time.Since(start))
	if res.Seq != first.Seq+1 || (res.Epoch == first.Epoch) != (wait > 0) {
		t.Fatalf("after the failover append got %+v after seq %d in epoch %q (replica wait %d)", res, first.Seq, first.Epoch, wait)
	}
	if n := replicated.Load(); n != int64(1-wait) {
		t.Fatalf("OnReplicated called %d times", n)
	}
	// The handler hears "catch up" (nil): a message appended before the
	// resubscription is then read from history.
	for sawNil := false; !sawNil; {
		select {
		case m := <-got:
			if m == nil {
				sawNil = true
			} else if m.GetSeq() != res.Seq {
				t.Fatalf("unexpected message %v", m)
			}
		case <-ctx.Done():
			t.Fatal("the subscription never said it resubscribed")
		}
	}
	page, err := s.Read(ctx, history.Query{Room: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 2 || page.Last != res.Seq {
		t.Fatalf("history after the failover: %+v", page)
	}
}
