package integration_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	"github.com/corral-rt/corral/config"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/readytest"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/server"
)

// TestSenderOrderThroughFaults: a Go Session publishes to a room without
// waiting for each acknowledgement (up to 16 on their way, one every
// 5 ms) while the deployment fails under it, and a second Session reads
// the room. The checker finds every publish stored exactly once, in the
// order it was made (per-sender order), none lost, and the reader's
// messages in the room's one order without gaps. The faults: in split
// mode on Redis the core restarts (the edge keeps the clients and
// refuses publishes meanwhile) and then the edge is dropped and started
// again on its address (both Sessions reconnect and resume); in split
// mode with two edges the edge both Sessions are on drains, and they move
// to the other (SessionOptions.Fallbacks) and resume there; in serve mode
// on Sentinel with redis-replicas 1 the master fails over.
func TestSenderOrderThroughFaults(t *testing.T) {
	t.Run("core-restart-and-edge-drop", func(t *testing.T) {
		redisURL := "redis://" + redistest.Start(t)
		prefix := redistest.Prefix(t)
		coreOpts := server.Options{Mode: server.CoreOnly, Node: config.Node{Addr: "127.0.0.1:0", RedisURL: redisURL, RedisPrefix: prefix}, Logger: quietLogger(), APIInsecure: true}
		withoutRateLimits(nil)(&coreOpts)
		core := startNode(t, coreOpts)
		coreOpts.Addr = core.Addr()
		edgeOpts := server.Options{Mode: server.EdgeOnly, Node: config.Node{Addr: "127.0.0.1:0", CoreURL: "http://" + core.Addr()}, Auth: auth.Dev{}, Logger: quietLogger()}
		withoutRateLimits(nil)(&edgeOpts)
		edge := startNode(t, edgeOpts)
		edgeOpts.Addr = edge.Addr()
		readytest.Wait(t, "http://"+edge.Addr()+"/readyz")
		restart := func(n *server.Node, opts server.Options) *server.Node {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			n.Close(ctx)
			cancel()
			return startNode(t, opts)
		}
		runSenderOrder(t, "ws://"+edge.Addr()+"/ws", []func(){
			func() { core = restart(core, coreOpts) },
			func() { edge = restart(edge, edgeOpts) },
		})
	})
	t.Run("edge-drain", func(t *testing.T) {
		redisURL := "redis://" + redistest.Start(t)
		prefix := redistest.Prefix(t)
		coreOpts := server.Options{Mode: server.CoreOnly, Node: config.Node{Addr: "127.0.0.1:0", RedisURL: redisURL, RedisPrefix: prefix}, Logger: quietLogger(), APIInsecure: true}
		withoutRateLimits(nil)(&coreOpts)
		core := startNode(t, coreOpts)
		edgeOpts := server.Options{Mode: server.EdgeOnly, Node: config.Node{Addr: "127.0.0.1:0", CoreURL: "http://" + core.Addr()}, Auth: auth.Dev{}, Logger: quietLogger()}
		withoutRateLimits(nil)(&edgeOpts)
		a, b := startNode(t, edgeOpts), startNode(t, edgeOpts)
		readytest.Wait(t, "http://"+a.Addr()+"/readyz")
		readytest.Wait(t, "http://"+b.Addr()+"/readyz")
		runSenderOrderVia(t, "ws://"+a.Addr()+"/ws", []string{"ws://" + b.Addr() + "/ws"}, []func(){
			func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				if err := a.Drain(ctx, 300*time.Millisecond); err != nil {
					t.Errorf("drain: %v", err)
				}
			},
		})
	})
	t.Run("sentinel-failover", func(t *testing.T) {
		sn := redistest.StartSentinel(t, 2)
		d := start(t, "serve", nil, func(o *server.Options) {
			o.RedisURL, o.RedisPrefix = sn.URL(), redistest.Prefix(t)
			o.RedisReplicas, o.RedisReplicaTimeout = 1, time.Second
		})
		runSenderOrder(t, d.wsURL, []func(){func() { sn.Failover() }})
	})
}

// startNode starts a node, retrying while its address is still taken
// (a restart on the same address), closed when the test ends.
func startNode(t *testing.T, opts server.Options) *server.Node {
	t.Helper()
	var n *server.Node
	var err error
	eventually.WithinEvery(10*time.Second, 50*time.Millisecond, func() bool {
		n, err = server.Start(opts)
		return err == nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	return n
}

// runSenderOrder publishes 100 messages before the first fault, 100 after
// each, and checks them (TestSenderOrderThroughFaults).
func runSenderOrder(t *testing.T, url string, faults []func()) {
	runSenderOrderVia(t, url, nil, faults)
}

// runSenderOrderVia is runSenderOrder with Sessions that have fallbacks:
// other edges to move to when theirs goes away.
func runSenderOrderVia(t *testing.T, url string, fallbacks []string, faults []func()) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const room, each, window = "fifo", 100, 16
	backoff := client.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond}
	connect := func(user string) *client.Session {
		s, err := client.Connect(ctx, url, client.SessionOptions{Options: client.Options{Token: user}, Backoff: backoff, Fallbacks: fallbacks})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if _, err := s.Join(ctx, room); err != nil {
			t.Fatal(err)
		}
		return s
	}
	chk := checker.New()
	reader := connect("reader")
	pub := connect("pub")
	total := each * (len(faults) + 1)
	chk.Member("reader", room, 0, uint64(total))

	var got sync.WaitGroup
	got.Add(1)
	go func() {
		defer got.Done()
		n := 0
		for ev := range reader.Events() {
			switch {
			case ev.Kind == client.EventReset:
				chk.Reset("reader", ev.Room)
			case ev.Frame.GetMessage() != nil:
				m := ev.Frame.GetMessage()
				chk.Received("reader", m.GetRoom(), m.GetSeq(), m.GetId())
				if n++; n == total {
					return
				}
			}
		}
	}()

	// Up to window publishes on their way; each result is read in the
	// order made.
	results := make(chan (<-chan client.PublishResult), window)
	var acked sync.WaitGroup
	acked.Add(1)
	go func() {
		defer acked.Done()
		for res := range results {
			r := <-res
			if r.Err != nil {
				t.Errorf("publish: %v", r.Err)
				continue
			}
			chk.Acked(room, r.Published.GetSeq(), r.Published.GetId())
		}
	}()
	n := 0
	publish := func(count int) {
		for range count {
			id := fmt.Sprintf("m%d", n)
			chk.Sent("pub", room, id)
			results <- pub.PublishAsync(ctx, room, id, payload(n))
			n++
			time.Sleep(5 * time.Millisecond)
		}
	}
	publish(each)
	for _, fault := range faults {
		// The fault strikes while publishes are on their way.
		done := make(chan struct{})
		go func() {
			defer close(done)
			fault()
		}()
		publish(each)
		<-done
	}
	close(results)
	acked.Wait()
	waited := make(chan struct{})
	go func() {
		got.Wait()
		close(waited)
	}()
	select {
	case <-waited:
	case <-ctx.Done():
		t.Errorf("the reader got %d of %d messages", chk.Count("reader", room), total)
	}
	if err := chk.Check(); err != nil {
		t.Fatal(err)
	}
}
