package history_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/internal/redistest"
)

// TestRedisReplicaWait checks that with Replicas an append succeeds when
// the replica has it, and fails with ErrNotReplicated within about the
// timeout when the replica stalls, while the message is stored (a retry
// with its dedupe key finds it).
func TestRedisReplicaWait(t *testing.T) {
	sn := redistest.StartSentinel(t, 1)
	client := sentinelClient(t, sn)
	var timeouts atomic.Int64
	store := func(timeout time.Duration) history.Store {
		s := history.NewRedis(client, history.RedisOptions{
			Prefix: "rw", Replicas: 1, ReplicaTimeout: timeout,
			OnReplicaTimeout: func(string) { timeouts.Add(1) },
		})
		t.Cleanup(func() { s.Close() })
		return s
	}
	// Two stores on the same keys: the appends that must reach a live
	// replica wait long enough for a loaded machine (a live replica's ack
	// took over 300ms under a parallel -race run), the one that must fail
	// waits 300ms.
	live, s := store(10*time.Second), store(300*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	res, err := live.Append(ctx, "r", &corralv1.Message{Room: "r", Payload: []byte("a")}, "k1")
	if err != nil || res.Seq != 1 {
		t.Fatalf("append with a live replica: %+v, %v", res, err)
	}
	if _, err := live.(history.Grower).Grow(ctx, "g", chunk("g", "m", "a", false, false), history.GrowLimits{}); err != nil {
		t.Fatalf("grow with a live replica: %v", err)
	}
	sn.Replica(0).Pause()
	defer sn.Replica(0).Resume()
	start := time.Now()
	_, err = s.Append(ctx, "r", &corralv1.Message{Room: "r", Payload: []byte("b")}, "k2")
	if !errors.Is(err, history.ErrNotReplicated) {
		t.Fatalf("append with a stalled replica: %v, want ErrNotReplicated", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the failed append took %v, past its 300ms timeout by far", d)
	}
	// A growing message's chunk waits for the replica too.
	if _, err := s.(history.Grower).Grow(ctx, "g", chunk("g", "m", "b", false, false), history.GrowLimits{}); !errors.Is(err, history.ErrNotReplicated) {
		t.Fatalf("grow with a stalled replica: %v, want ErrNotReplicated", err)
	}
	if timeouts.Load() != 2 {
		t.Fatalf("OnReplicaTimeout called %d times, want 2", timeouts.Load())
	}
	sn.Replica(0).Resume()
	res, err = live.Append(ctx, "r", &corralv1.Message{Room: "r", Payload: []byte("b")}, "k2")
	if err != nil || !res.Duplicate || res.Seq != 2 {
		t.Fatalf("retry with the same dedupe key: %+v, %v; want the stored seq 2, duplicate", res, err)
	}
}

// TestReplicaWaitLatency measures an append's latency with and without
// Replicas on a local master with one replica (CORRAL_MEASURE=1; figures
// for docs/DEPLOYMENT.md, not an assertion).
func TestReplicaWaitLatency(t *testing.T) {
	if os.Getenv("CORRAL_MEASURE") == "" {
		t.Skip("set CORRAL_MEASURE=1 to measure")
	}
	sn := redistest.StartSentinel(t, 1)
	client := sentinelClient(t, sn)
	ctx := context.Background()
	for run := range 3 {
		for _, replicas := range []int{0, 1} {
			s := history.NewRedis(client, history.RedisOptions{Prefix: "lat", Replicas: replicas})
			const n = 2000
			d := make([]time.Duration, n)
			for i := range n {
				start := time.Now()
				if _, err := s.Append(ctx, "r", &corralv1.Message{Room: "r", Payload: []byte("x")}, ""); err != nil {
					t.Fatal(err)
				}
				d[i] = time.Since(start)
			}
			slices.Sort(d)
			t.Logf("run %d replicas %d: p50 %v p99 %v", run+1, replicas, d[n/2], d[n*99/100])
			s.Close()
		}
	}
}
