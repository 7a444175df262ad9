package integration_test

import (
	"testing"
	"time"

	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/server"
)

// TestClusterFailover: a Redis Cluster of 3 masters and 3 replicas; the
// master holding a room is killed under a publisher at 200 msgs/s (over a
// room on that master and one on another), members resuming right after
// the kill, and its replica is promoted by the cluster. rueidis follows
// the promotion (a broken connection refreshes its slot map), pub/sub
// subscribes the room on the new master and catches it up from history.
// Without replica wait (not available on Cluster) every member of the
// room must see a reset into a new epoch: the promoted replica may lack
// acknowledged messages, and in the second case it does (paused and its
// link cut before the kill). With the replica in sync, every acknowledged
// message still reaches every member. The checker finds no silent gap
// either way.
func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster of 6 nodes")
	}
	for _, tt := range []struct {
		name  string
		lag   bool
		cores int
	}{
		{"in-sync-replica", false, 1},
		{"lagging-replica", true, 1},
		// Members on both cores, resumers moving to the other one, the
		// publisher on one: the other core must not deliver the new
		// master's reused seqs (see TestCrossCoreLossDetection).
		{"lagging-replica-two-cores", true, 2},
	} {
		lag := tt.lag
		t.Run(tt.name, func(t *testing.T) {
			cluster := redistest.StartClusterReplicas(t)
			prefix := redistest.Prefix(t)
			var deps []*deployment
			for range tt.cores {
				deps = append(deps, start(t, "serve", nil, func(o *server.Options) {
					o.RedisURL, o.RedisPrefix = cluster.SeedURL(), prefix
				}))
			}
			const victim = 1
			doomed := cluster.NameOn(victim, "doomed")
			run := failoverRun{
				deps:    deps,
				rooms:   []string{doomed, cluster.NameOn(2, "bystander")},
				members: 4, resumers: 2, noLoss: !lag,
				// Replica wait is not available on Cluster: every
				// failover opens a new epoch for the rooms appended to
				// afterwards, loss or not.
				resetRooms: []string{doomed},
			}
			run.fail = func() time.Time {
				if lag {
					resume := cluster.LagReplica(victim)
					time.Sleep(300 * time.Millisecond)
					go func() {
						time.Sleep(300 * time.Millisecond)
						resume()
					}()
				}
				killed := time.Now()
				promoted := cluster.KillMaster(victim)
				t.Logf("node %d promoted %v after the kill", promoted, time.Since(killed))
				return killed
			}
			runFailover(t, run)
		})
	}
}
