package integration_test

import (
	"testing"
	"time"

	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/server"
)

// TestSentinelFailover: a Sentinel failover under a publisher at 200
// msgs/s, with members resuming right after the master's kill. Without
// replica wait every member gets a reset into a new epoch (the promoted
// replica may lack acknowledged messages): with the replica in sync every
// acknowledged message still reached every member; with it made to lag
// (paused while the master acknowledges) acknowledged messages are lost,
// each delivered or covered by the reset. With --redis-replicas 1 there
// is no reset and nothing acknowledged is lost. In every case no seq
// names two messages in one epoch.
func TestSentinelFailover(t *testing.T) {
	for _, tt := range []struct {
		name     string
		replicas int  // replica servers
		wait     int  // --redis-replicas
		lag      bool // the replica misses the last acknowledged writes
	}{
		{"async-in-sync-replica", 1, 0, false},
		{"async-lagging-replica", 1, 0, true},
		{"replica-wait", 2, 1, false},
	} {
		t.Run(tt.name, func(t *testing.T) { testSentinelFailover(t, tt.replicas, tt.wait, tt.lag) })
	}
}

func testSentinelFailover(t *testing.T, replicas, wait int, lag bool) {
	sn := redistest.StartSentinel(t, replicas)
	d := start(t, "serve", nil, func(o *server.Options) {
		o.RedisURL, o.RedisPrefix = sn.URL(), redistest.Prefix(t)
		o.RedisReplicas, o.RedisReplicaTimeout = wait, time.Second
	})
	run := failoverRun{deps: []*deployment{d}, rooms: []string{"ha"}, members: 4, resumers: 2,
		noLoss: !lag, noResets: wait > 0}
	run.fail = func() time.Time {
		if lag {
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
		run.resetRooms = run.rooms
	}
	runFailover(t, run)
}
