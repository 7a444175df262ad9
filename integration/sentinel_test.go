package integration_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/server"
)

// TestSentinelFailover: a Sentinel failover under a publisher at 200
// msgs/s. Without replica wait the promoted replica is made to lag (paused
// while the master acknowledges), so acknowledged messages are lost: every
// member must have received each acknowledged message or seen a reset
// covering it, and no seq may name two messages in one epoch. With
// --redis-replicas 1 nothing acknowledged may be lost at all.
func TestSentinelFailover(t *testing.T) {
	for _, tt := range []struct {
		name     string
		replicas int // replica servers
		wait     int // --redis-replicas
	}{
		{"async-lagging-replica", 1, 0},
		{"replica-wait", 2, 1},
	} {
		t.Run(tt.name, func(t *testing.T) { testSentinelFailover(t, tt.replicas, tt.wait) })
	}
}

// epochRoom is the checker's room name for room in one epoch: seqs restart
// meaning with each epoch.
func epochRoom(room, epoch string) string { return room + "@" + epoch }

func testSentinelFailover(t *testing.T, replicas, wait int) {
	sn := redistest.StartSentinel(t, replicas)
	d := start(t, "serve", nil, func(o *server.Options) {
		o.RedisURL, o.RedisPrefix = sn.URL(), redistest.Prefix(t)
		o.RedisReplicas, o.RedisReplicaTimeout = wait, time.Second
	})
	ctx := testCtx(t)
	const room, members = "ha", 4
	chk := checker.New()

	type window struct {
		start uint64
		reset bool
	}
	var mu sync.Mutex                              // guards windows
	windows := make(map[string]map[string]*window) // member -> epoch room -> window
	got := make(map[string]map[uint64]bool)        // epoch room -> seqs some member received
	var resets atomic.Int64
	stop := make(chan struct{})    // members stop reading
	stopPub := make(chan struct{}) // the publisher stops
	var wg sync.WaitGroup
	for i := range members {
		name := fmt.Sprintf("m%d", i)
		c := dial(t, d, name, protocol.Encoding(i%2))
		j, err := c.Join(ctx, room, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		epoch := j.GetEpoch()
		mu.Lock()
		windows[name] = map[string]*window{epochRoom(room, epoch): {start: j.GetSeq()}}
		mu.Unlock()
		wg.Add(1)
		go func(c *client.Conn) {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-c.Done():
					t.Errorf("%s disconnected: %v", name, c.Err())
					return
				case f := <-c.Frames():
					if m := f.GetMessage(); m != nil {
						chk.Received(name, epochRoom(room, epoch), m.GetSeq(), m.GetId())
						mu.Lock()
						if got[epochRoom(room, epoch)] == nil {
							got[epochRoom(room, epoch)] = make(map[uint64]bool)
						}
						got[epochRoom(room, epoch)][m.GetSeq()] = true
						mu.Unlock()
					} else if r := f.GetReset_(); r != nil {
						resets.Add(1)
						chk.Reset(name, epochRoom(room, epoch))
						mu.Lock()
						windows[name][epochRoom(room, epoch)].reset = true
						epoch = r.GetEpoch()
						if windows[name][epochRoom(room, epoch)] == nil {
							windows[name][epochRoom(room, epoch)] = &window{start: r.GetSeq()}
						}
						mu.Unlock()
					}
				}
			}
		}(c)
	}

	// The publisher: 200 msgs/s through the API; a refused publish is
	// not acknowledged and not counted.
	// firstAfter is when, after the master kill, the first publish begun
	// after it was accepted (a publish under way at the kill may succeed).
	var firstAfter atomic.Int64
	var okAt []int64 // start times of accepted publishes
	var acked, refused atomic.Int64
	upto := make(map[string]uint64) // epoch room -> newest acknowledged seq
	ackedSeqs := make(map[string][]uint64)
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stopPub:
				return
			case <-tick.C:
			}
			began := time.Now().UnixNano()
			pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			res, err := d.api.Publish(pctx, &corralv1.PublishRequest{Room: room, Payload: payload(n)})
			cancel()
			if err != nil {
				refused.Add(1)
				continue
			}
			acked.Add(1)
			er := epochRoom(room, res.GetEpoch())
			chk.Acked(er, res.GetSeq(), "")
			mu.Lock()
			upto[er] = max(upto[er], res.GetSeq())
			okAt = append(okAt, began, time.Now().UnixNano())
			ackedSeqs[er] = append(ackedSeqs[er], res.GetSeq())
			mu.Unlock()
		}
	}()

	time.Sleep(time.Second)
	if wait == 0 {
		// The replica misses what the master acknowledges from now on.
		rep := sn.Replica(0)
		rep.Pause()
		sn.DropReplicaLinks()
		time.Sleep(300 * time.Millisecond)
		go func() {
			time.Sleep(300 * time.Millisecond)
			rep.Resume()
		}()
	}
	sn.Failover()
	killed := sn.KilledAt().UnixNano()
	time.Sleep(3 * time.Second)
	close(stopPub)
	<-pubDone
	// Members keep reading a moment for the last messages in flight.
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	for i := 0; i < len(okAt); i += 2 {
		if okAt[i] > killed {
			firstAfter.Store(okAt[i+1] - killed)
			break
		}
	}
	lost := 0 // acknowledged, received by no member: covered by their resets
	for er, seqs := range ackedSeqs {
		for _, seq := range seqs {
			if !got[er][seq] {
				lost++
			}
		}
	}
	for name, ws := range windows {
		for er, w := range ws {
			if !w.reset && upto[er] > w.start {
				chk.Member(name, er, w.start, upto[er])
			}
		}
	}
	t.Logf("acknowledged %d, refused %d, epochs %d, resets seen by members %d, acknowledged but delivered to no member (covered by the resets) %d, first publish accepted %v after the master kill",
		acked.Load(), refused.Load(), len(upto), resets.Load(), lost, time.Duration(firstAfter.Load()))
	if wait > 0 && lost > 0 {
		t.Fatalf("with replica wait %d acknowledged messages were lost", lost)
	}
	if firstAfter.Load() == 0 {
		t.Fatal("no publish was accepted after the failover")
	}
	if err := chk.Check(); err != nil {
		t.Fatal(err)
	}
	if wait > 0 && (resets.Load() > 0 || len(upto) != 1) {
		t.Fatalf("with replica wait a failover lost acknowledged messages: %d resets, %d epochs", resets.Load(), len(upto))
	}
	if wait == 0 && resets.Load() < members {
		t.Fatalf("the promoted replica lagged but only %d resets reached %d members", resets.Load(), members)
	}
}
