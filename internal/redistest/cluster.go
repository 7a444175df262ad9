package redistest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/corral-rt/corral/internal/pubsub"
)

// Cluster is a Redis Cluster of three masters, without replicas
// ([StartCluster]) or with one replica each ([StartClusterReplicas]), each
// node a private redis-server process on a loopback port, formed without
// redis-cli. Its methods must not be called concurrently.
type Cluster struct {
	tb    testing.TB
	nodes []*clusterNode // the masters first, then their replicas in order
}

type clusterNode struct {
	srv    *Server
	id     string         // cluster node id
	bus    int            // cluster bus port
	client rueidis.Client // a plain connection to this node only
	master int            // index of the node it replicates, -1 for a master
	dead   bool           // killed by KillMaster
}

// StartCluster starts three cluster-enabled redis-server processes from
// PATH, splits the 16384 slots evenly over them, joins them and waits until
// every node reports cluster_state:ok and knows where every slot is. The
// processes stop by tb.Cleanup. It never uses REDIS_URL, and fails the test
// when redis-server is not on PATH.
func StartCluster(tb testing.TB) *Cluster {
	tb.Helper()
	return startCluster(tb, false)
}

// StartClusterReplicas is [StartCluster] with one replica per master
// (nodes 3, 4 and 5 replicate masters 0, 1 and 2) and a node timeout of
// 1 s, so that [Cluster.KillMaster] sees a replica promoted within a few
// seconds. It waits until every replica is in sync with its master.
func StartClusterReplicas(tb testing.TB) *Cluster {
	tb.Helper()
	return startCluster(tb, true)
}

func startCluster(tb testing.TB, replicas bool) *Cluster {
	tb.Helper()
	c := &Cluster{tb: tb}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	timeout, count := "5000", 3
	if replicas {
		timeout, count = "1000", 6
	}
	for range count {
		conf := tb.TempDir() + "/nodes.conf"
		var bus int
		srv := startProcess(tb, 0, func(int) ([]string, error) {
			var err error
			if bus, err = freePort(); err != nil {
				return nil, err
			}
			return []string{"--cluster-enabled", "yes", "--cluster-config-file", conf,
				"--cluster-port", strconv.Itoa(bus), "--cluster-node-timeout", timeout,
				// A replica's first sync starts at once, not after 5 s.
				"--repl-diskless-sync-delay", "0"}, nil
		})
		cl, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress: []string{srv.Addr()}, ForceSingleClient: true, DisableCache: true,
		})
		if err != nil {
			tb.Fatalf("redistest: connect %s: %v", srv.Addr(), err)
		}
		tb.Cleanup(cl.Close)
		id, err := cl.Do(ctx, cl.B().ClusterMyid().Build()).ToString()
		if err != nil {
			tb.Fatalf("redistest: CLUSTER MYID on %s: %v", srv.Addr(), err)
		}
		// Distinct config epochs from the start, as redis-cli --cluster
		// create gives them: with every node at 0 the nodes resolve the
		// collisions by bumping epochs one ping at a time, and a bump that
		// lands during a slot move can let the source's last claim outrank
		// the destination's, which then gives the slot back and deletes
		// the moved keys (CI saw GET nil after a move).
		if err := cl.Do(ctx, cl.B().ClusterSetConfigEpoch().ConfigEpoch(int64(len(c.nodes)+1)).Build()).Error(); err != nil {
			tb.Fatalf("redistest: CLUSTER SET-CONFIG-EPOCH on %s: %v", srv.Addr(), err)
		}
		c.nodes = append(c.nodes, &clusterNode{srv: srv, id: id, bus: bus, client: cl, master: -1})
	}
	masters := c.nodes[:3]
	per := pubsub.Slots / len(masters)
	for i, n := range masters {
		first, last := i*per, (i+1)*per-1
		if i == len(masters)-1 {
			last = pubsub.Slots - 1
		}
		cmd := n.client.B().ClusterAddslotsrange().StartSlotEndSlot().StartSlotEndSlot(int64(first), int64(last)).Build()
		if err := n.client.Do(ctx, cmd).Error(); err != nil {
			tb.Fatalf("redistest: CLUSTER ADDSLOTSRANGE on %s: %v", n.srv.Addr(), err)
		}
	}
	first := c.nodes[0].client
	for _, n := range c.nodes[1:] {
		cmd := first.B().ClusterMeet().Ip("127.0.0.1").Port(int64(n.srv.port)).ClusterBusPort(int64(n.bus)).Build()
		if err := first.Do(ctx, cmd).Error(); err != nil {
			tb.Fatalf("redistest: CLUSTER MEET %s: %v", n.srv.Addr(), err)
		}
	}
	for i, r := range c.nodes[3:] {
		c.replicate(ctx, r, masters[i])
		r.master = i
	}
	c.waitStable(ctx)
	return c
}

// replicate makes r a replica of m once r has heard of m (CLUSTER
// REPLICATE needs a known node id), and waits until r is in sync.
func (c *Cluster) replicate(ctx context.Context, r, m *clusterNode) {
	c.tb.Helper()
	var err error
	for ctx.Err() == nil {
		err = r.client.Do(ctx, r.client.B().ClusterReplicate().NodeId(m.id).Build()).Error()
		if err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond) // the MEET has not reached r yet
	}
	if err != nil {
		c.tb.Fatalf("redistest: CLUSTER REPLICATE %s on %s: %v", m.srv.Addr(), r.srv.Addr(), err)
	}
	var info string
	for ctx.Err() == nil {
		info, err = r.client.Do(ctx, r.client.B().Info().Section("replication").Build()).ToString()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.tb.Fatalf("redistest: replica %s not in sync with %s: %v %q", r.srv.Addr(), m.srv.Addr(), err, info)
}

// KillMaster kills master node i (SIGKILL: writes it had not yet sent to
// its replica are lost) and waits until its replica has been promoted and
// every surviving node reports cluster_state:ok and agrees on the owner of
// every slot. It returns the index of the promoted node. Only on a cluster
// of [StartClusterReplicas].
func (c *Cluster) KillMaster(i int) int {
	c.tb.Helper()
	if len(c.nodes) != 6 || i < 0 || i >= len(c.nodes) || c.nodes[i].dead {
		c.tb.Fatalf("redistest: KillMaster(%d): not a live master of a cluster with replicas", i)
	}
	replica := c.Replica(i)
	if replica < 0 {
		c.tb.Fatalf("redistest: KillMaster(%d): it has no live replica", i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.nodes[i].srv.Kill()
	c.nodes[i].dead = true
	for ctx.Err() == nil {
		info, err := c.nodes[replica].client.Do(ctx, c.nodes[replica].client.B().Info().Section("replication").Build()).ToString()
		if err == nil && strings.Contains(info, "role:master") {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ctx.Err() != nil {
		c.tb.Fatalf("redistest: KillMaster(%d): replica %s was not promoted within 60s", i, c.nodes[replica].srv.Addr())
	}
	c.nodes[replica].master = -1
	c.waitStable(ctx)
	return replica
}

// Replica returns the index of the live replica of node i, or -1.
func (c *Cluster) Replica(i int) int {
	for j, n := range c.nodes {
		if n.master == i && !n.dead {
			return j
		}
	}
	return -1
}

// LagReplica makes master i's replica miss what the master acknowledges
// from now on, as after a real replication lag: it pauses the replica
// (SIGSTOP) and closes the master's replica connections (CLIENT KILL TYPE
// replica). A failover to it then loses those writes. It returns a
// function that resumes the replica; call it before or during KillMaster,
// which needs the replica running to promote it.
func (c *Cluster) LagReplica(i int) (resume func()) {
	c.tb.Helper()
	r := c.Replica(i)
	if r < 0 {
		c.tb.Fatalf("redistest: LagReplica(%d): no live replica", i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.nodes[r].srv.Pause()
	m := c.nodes[i].client
	if err := m.Do(ctx, m.B().ClientKill().TypeReplica().Build()).Error(); err != nil {
		c.nodes[r].srv.Resume()
		c.tb.Fatalf("redistest: LagReplica(%d): CLIENT KILL TYPE replica: %v", i, err)
	}
	return c.nodes[r].srv.Resume
}

// Server returns node i's process (an index of Addrs), to pause or kill.
func (c *Cluster) Server(i int) *Server { return c.nodes[i].srv }

// waitStable waits until every node says cluster_state:ok and agrees with
// the others on the owner of every slot.
func (c *Cluster) waitStable(ctx context.Context) {
	c.tb.Helper()
	c.waitStableOr(ctx, nil)
}

// stable reports whether every live node says cluster_state:ok and agrees
// with the others on the owner of every slot, and if not, why.
func (c *Cluster) stable(ctx context.Context) (bool, string) {
	var ref string
	for _, n := range c.nodes {
		if n.dead {
			continue
		}
		info, err := n.client.Do(ctx, n.client.B().ClusterInfo().Build()).ToString()
		if err != nil || !strings.Contains(info, "cluster_state:ok") {
			return false, fmt.Sprintf("%s: %v %q", n.srv.Addr(), err, info)
		}
		owners, err := c.owners(ctx, n)
		if err != nil || (ref != "" && owners != ref) {
			return false, fmt.Sprintf("%s: owners %q, first node's %q (%v)", n.srv.Addr(), owners, ref, err)
		}
		ref = owners
	}
	return true, ""
}

// waitStableOr is waitStable that calls nudge (if set) every second the
// cluster is not yet stable.
func (c *Cluster) waitStableOr(ctx context.Context, nudge func()) {
	c.tb.Helper()
	var last string
	lastNudge := time.Now()
	for {
		ok, why := c.stable(ctx)
		if ok {
			return
		}
		last = why
		if nudge != nil && time.Since(lastNudge) >= time.Second {
			nudge()
			lastNudge = time.Now()
		}
		select {
		case <-ctx.Done():
			c.tb.Fatalf("redistest: the cluster did not become stable: %s", last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// owners returns n's view of the slot ranges and their masters, as text,
// including whether n knows every other node's address.
func (c *Cluster) owners(ctx context.Context, n *clusterNode) (string, error) {
	slots, err := n.client.Do(ctx, n.client.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return "", err
	}
	covered := 0
	var out []string
	for _, r := range slots {
		f, err := r.ToArray()
		if err != nil || len(f) < 3 {
			return "", fmt.Errorf("bad CLUSTER SLOTS entry")
		}
		lo, _ := f[0].AsInt64()
		hi, _ := f[1].AsInt64()
		m, _ := f[2].ToArray()
		if len(m) < 3 {
			return "", fmt.Errorf("bad CLUSTER SLOTS node")
		}
		port, _ := m[1].AsInt64()
		covered += int(hi - lo + 1)
		out = append(out, fmt.Sprintf("%d-%d@%d", lo, hi, port))
	}
	if covered != pubsub.Slots {
		return "", fmt.Errorf("%d slots covered", covered)
	}
	slices.Sort(out)
	return strings.Join(out, ","), nil
}

// Addrs returns every node's "host:port", killed ones included (indices
// stay those of the nodes).
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.srv.Addr()
	}
	return out
}

// URL returns a redis:// URL naming one node; a client discovers the rest.
func (c *Cluster) URL() string { return "redis://" + c.nodes[0].srv.Addr() }

// SeedURL returns a redis:// URL naming every node (the others as ?addr=),
// so that a client can start while any one of them is down.
func (c *Cluster) SeedURL() string {
	u := c.URL()
	for i, n := range c.nodes[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + n.srv.Addr()
	}
	return u
}

// Client returns a cluster client seeded with every node, closed by
// tb.Cleanup.
func (c *Cluster) Client(tb testing.TB) rueidis.Client {
	tb.Helper()
	cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs(), DisableCache: true})
	if err != nil {
		tb.Fatalf("redistest: connect to the cluster: %v", err)
	}
	if cl.Mode() != rueidis.ClientModeCluster {
		tb.Fatalf("redistest: client mode %v, want cluster", cl.Mode())
	}
	tb.Cleanup(cl.Close)
	return cl
}

// Owner returns the index (0, 1 or 2) of the node that says it owns slot.
func (c *Cluster) Owner(slot uint16) int {
	c.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, n := range c.nodes {
		if n.dead {
			continue
		}
		nodes, err := n.client.Do(ctx, n.client.B().ClusterNodes().Build()).ToString()
		if err != nil {
			c.tb.Fatalf("redistest: CLUSTER NODES: %v", err)
		}
		for _, line := range strings.Split(nodes, "\n") {
			f := strings.Fields(line)
			if len(f) < 9 || !strings.Contains(f[2], "myself") {
				continue
			}
			for _, r := range f[8:] {
				lo, hi, found := strings.Cut(r, "-")
				if !found {
					hi = lo
				}
				a, err1 := strconv.Atoi(lo)
				b, err2 := strconv.Atoi(hi)
				if err1 == nil && err2 == nil && int(slot) >= a && int(slot) <= b {
					return i
				}
			}
		}
	}
	c.tb.Fatalf("redistest: nobody owns slot %d", slot)
	return -1
}

// MoveSlot migrates slot, keys and all, to node to (an index of Addrs),
// the way redis-cli --cluster reshard does: SETSLOT IMPORTING on the
// target, MIGRATING on the source, MIGRATE every key, then SETSLOT NODE on
// the target, the source and the others. Traffic may run meanwhile:
// clients see ASK and TRYAGAIN replies during the move.
func (c *Cluster) MoveSlot(tb testing.TB, slot uint16, to int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	from := c.Owner(slot)
	if from == to {
		return
	}
	src, dst := c.nodes[from], c.nodes[to]
	s := int64(slot)
	must := func(n *clusterNode, cmd rueidis.Completed) {
		tb.Helper()
		if err := n.client.Do(ctx, cmd).Error(); err != nil {
			tb.Fatalf("redistest: move slot %d on %s: %v", slot, n.srv.Addr(), err)
		}
	}
	must(dst, dst.client.B().ClusterSetslot().Slot(s).Importing().NodeId(src.id).Build())
	must(src, src.client.B().ClusterSetslot().Slot(s).Migrating().NodeId(dst.id).Build())
	for {
		keys, err := src.client.Do(ctx, src.client.B().ClusterGetkeysinslot().Slot(s).Count(100).Build()).AsStrSlice()
		if err != nil {
			tb.Fatalf("redistest: CLUSTER GETKEYSINSLOT %d: %v", slot, err)
		}
		if len(keys) == 0 {
			break
		}
		cmd := src.client.B().Arbitrary("MIGRATE", "127.0.0.1", strconv.Itoa(dst.srv.port), "", "0", "5000", "REPLACE", "KEYS").Args(keys...).Build()
		must(src, cmd)
	}
	assign := func() {
		must(dst, dst.client.B().ClusterSetslot().Slot(s).Node().NodeId(dst.id).Build())
		must(src, src.client.B().ClusterSetslot().Slot(s).Node().NodeId(dst.id).Build())
		for i, n := range c.nodes {
			if i != from && i != to && !n.dead {
				must(n, n.client.B().ClusterSetslot().Slot(s).Node().NodeId(dst.id).Build())
			}
		}
	}
	assign()
	// A node may take the old owner's gossip over the new assignment (seen
	// once in CI: one node kept the slot at the source for 30 s); the
	// assignment is idempotent, so it is said again until all agree.
	c.waitStableOr(ctx, func() {
		_ = dst.client.Do(ctx, dst.client.B().ClusterBumpepoch().Build()).Error()
		assign()
	})
}

// NameOn returns base followed by a number, the first such name whose hash
// slot node (an index of Addrs) owns: with it in a hash tag, a key lands on
// that node.
func (c *Cluster) NameOn(node int, base string) string {
	c.tb.Helper()
	for i := 0; ; i++ {
		name := base + strconv.Itoa(i)
		if c.Owner(pubsub.Slot(name)) == node {
			return name
		}
	}
}

// Node returns a plain client of node i (an index of Addrs), for commands
// about that node alone (PUBSUB SHARDNUMSUB, CLUSTER ...).
func (c *Cluster) Node(i int) rueidis.Client { return c.nodes[i].client }

// Topologies opens a client of each Redis topology a store must work on,
// by name: a private standalone server and a private three-master cluster.
// Tests of a store run their cases on each: for name, open := range Topologies() { t.Run(name, ...) }.
func Topologies() map[string]func(tb testing.TB) rueidis.Client {
	return map[string]func(tb testing.TB) rueidis.Client{
		"standalone": func(tb testing.TB) rueidis.Client { return Client(tb, Start(tb)) },
		"cluster":    func(tb testing.TB) rueidis.Client { return StartCluster(tb).Client(tb) },
	}
}
