package redisguard

import (
	"context"
	"strings"

	"github.com/redis/rueidis"
)

// The probe also watches which servers are Redis masters, so that a
// failover is counted and logged even where no store call noticed it: a
// master that stops being one (killed, or demoted to a replica) counts
// once. A standalone or Sentinel master is known by its run_id (INFO
// server), which a restart changes too; a Cluster's masters by node id
// (CLUSTER NODES, from whichever node answers, leaving out those the
// cluster marked failed).

// masters returns the ids of the masters client reaches.
func masters(ctx context.Context, client rueidis.Client) ([]string, error) {
	if client.Mode() == rueidis.ClientModeCluster {
		nodes, err := client.Do(ctx, client.B().ClusterNodes().Build()).ToString()
		if err != nil {
			return nil, err
		}
		return clusterMasters(nodes), nil
	}
	info, err := client.Do(ctx, client.B().Info().Section("server").Build()).ToString()
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(info, "\n") {
		if id, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok && id != "" {
			return []string{id}, nil
		}
	}
	return nil, nil
}

// clusterMasters returns the ids of the masters in a CLUSTER NODES reply
// that the cluster has not marked failed.
func clusterMasters(nodes string) []string {
	var out []string
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		flags := strings.Split(f[2], ",")
		master, failed := false, false
		for _, fl := range flags {
			switch fl {
			case "master":
				master = true
			case "fail":
				failed = true
			}
		}
		if master && !failed {
			out = append(out, f[0])
		}
	}
	return out
}

// sawMasters records the masters a probe found and returns how many known
// masters are gone from them for the first time. Lock must be held.
func (g *Guard) sawMasters(now []string) int {
	if len(now) == 0 {
		return 0
	}
	cur := make(map[string]bool, len(now))
	for _, id := range now {
		cur[id] = true
	}
	gone := 0
	for id, counted := range g.masters {
		if !counted && !cur[id] {
			g.masters[id] = true
			gone++
		}
	}
	for _, id := range now {
		if _, ok := g.masters[id]; !ok {
			g.masters[id] = false
		}
	}
	return gone
}
