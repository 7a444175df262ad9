package pubsub_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/pubsub"
	"github.com/corral-rt/corral/internal/redistest"
)

// heard collects what a Subscriber delivers.
type heard struct {
	mu     sync.Mutex // guards the following fields
	msgs   map[string][]string
	resubs []string
}

func (h *heard) message(ch, msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs[ch] = append(h.msgs[ch], msg)
}

func (h *heard) resubscribed(ch string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.resubs = append(h.resubs, ch)
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventually.True(t, 10*time.Second, cond, "%s", what)
}

// TestShardedConnectionLoss: on a 3-node cluster, channels on every node
// are subscribed with SSUBSCRIBE; when one node's subscriber connection is
// killed, exactly that node's channels are subscribed again and reported,
// and messages flow on every channel afterwards.
func TestShardedConnectionLoss(t *testing.T) {
	cluster := redistest.StartCluster(t)
	client := cluster.Client(t)
	if !pubsub.Sharded(client) {
		t.Fatal("a cluster client is not sharded")
	}
	ctx := context.Background()
	h := &heard{msgs: map[string][]string{}}
	s, err := pubsub.New(ctx, client, pubsub.Options{OnMessage: h.message, OnResubscribed: h.resubscribed})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var chans []string
	for node := range 3 {
		chans = append(chans, "{"+cluster.NameOn(node, "ch")+"}")
	}
	if err := s.Add(ctx, chans...); err != nil {
		t.Fatal(err)
	}
	publish := func(msg string) {
		t.Helper()
		for _, ch := range chans {
			if err := client.Do(ctx, client.B().Spublish().Channel(ch).Message(msg).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	all := func(n int) func() bool {
		return func() bool {
			h.mu.Lock()
			defer h.mu.Unlock()
			for _, ch := range chans {
				if len(h.msgs[ch]) < n {
					return false
				}
			}
			return true
		}
	}
	publish("1")
	waitFor(t, "the first messages", all(1))

	node := cluster.Node(1)
	if err := node.Do(ctx, node.B().ClientKill().TypePubsub().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the resubscription", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.resubs) > 0
	})
	h.mu.Lock()
	resubs := slices.Clone(h.resubs)
	h.mu.Unlock()
	if !slices.Equal(resubs, chans[1:2]) {
		t.Fatalf("resubscribed %v, want %v", resubs, chans[1:2])
	}
	publish("2")
	waitFor(t, "messages after the loss", all(2))

	if err := s.Remove(chans[0]); err != nil {
		t.Fatal(err)
	}
	publish("3")
	waitFor(t, "messages after a remove", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.msgs[chans[1]]) == 3 && len(h.msgs[chans[2]]) == 3
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.msgs[chans[0]]); n != 2 {
		t.Fatalf("%d messages on a removed channel, want 2", n)
	}
}

// TestResubscribedBeforeMessages: while a publisher sends numbered
// messages without pause, the subscriber's connection is killed twice;
// every jump in the numbers it delivers must come after an
// OnResubscribed, never before it (a consumer that catches up on that
// signal would otherwise see the jump first).
func TestResubscribedBeforeMessages(t *testing.T) {
	addr := redistest.Start(t)
	client := redistest.Client(t, addr)
	ctx := context.Background()
	var mu sync.Mutex
	var log []int // -1 for OnResubscribed
	s, err := pubsub.New(ctx, client, pubsub.Options{
		OnMessage: func(_, msg string) {
			n, _ := strconv.Atoi(msg)
			mu.Lock()
			log = append(log, n)
			mu.Unlock()
		},
		OnResubscribed: func(string) {
			mu.Lock()
			log = append(log, -1)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Add(ctx, "ch"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var sent atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := client.Do(ctx, client.B().Publish().Channel("ch").Message(strconv.Itoa(i)).Build()).Error(); err != nil {
				t.Errorf("publish: %v", err)
				return
			}
			sent.Store(int64(i))
		}
	})
	for kill := range 2 {
		at := sent.Load()
		waitFor(t, "traffic", func() bool { return sent.Load() >= at+200 })
		if err := client.Do(ctx, client.B().ClientKill().TypePubsub().Build()).Error(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the resubscription", func() bool {
			mu.Lock()
			defer mu.Unlock()
			k := 0
			for _, n := range log {
				if n == -1 {
					k++
				}
			}
			return k > kill
		})
	}
	at := sent.Load()
	waitFor(t, "traffic after", func() bool { return sent.Load() >= at+200 })
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	prev, gap, jumps := 0, false, 0
	for _, n := range log {
		if n == -1 {
			gap = true
			continue
		}
		if n != prev+1 {
			if !gap {
				t.Fatalf("message %d after %d with no OnResubscribed between", n, prev)
			}
			jumps++
		}
		prev, gap = n, false
	}
	t.Logf("%d messages, %d jumps", len(log), jumps)
}
