package integration_test

import (
	"testing"
	"time"

	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/server"
)

// TestSentinelFailover: a Sentinel failover under a publisher at 200
// msgs/s, with members resuming right after the master's kill. Without replica wait the promoted replica is made to lag (paused
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

func testSentinelFailover(t *testing.T, replicas, wait int) {
	sn := redistest.StartSentinel(t, replicas)
	d := start(t, "serve", nil, func(o *server.Options) {
		o.RedisURL, o.RedisPrefix = sn.URL(), redistest.Prefix(t)
		o.RedisReplicas, o.RedisReplicaTimeout = wait, time.Second
	})
	run := failoverRun{deps: []*deployment{d}, rooms: []string{"ha"}, members: 4, resumers: 2, noLoss: wait > 0}
	run.fail = func() time.Time {
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
		return sn.KilledAt()
	}
	if wait == 0 {
		run.lossRooms = run.rooms
	}
	runFailover(t, run)
}
