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

// Cluster is a Redis Cluster of three masters (no replicas), each a private
// redis-server process on a loopback port, formed by StartCluster without
// redis-cli.
type Cluster struct {
	tb    testing.TB
	nodes []*clusterNode
}

type clusterNode struct {
	srv    *Server
	id     string         // cluster node id
	bus    int            // cluster bus port
	client rueidis.Client // a plain connection to this node only
}

// StartCluster starts three cluster-enabled redis-server processes from
// PATH, splits the 16384 slots evenly over them, joins them and waits until
// every node reports cluster_state:ok and knows where every slot is. The
// processes stop by tb.Cleanup. It never uses REDIS_URL, and fails the test
// when redis-server is not on PATH.
func StartCluster(tb testing.TB) *Cluster {
	tb.Helper()
	c := &Cluster{tb: tb}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 3 {
		conf := tb.TempDir() + "/nodes.conf"
		var bus int
		srv := startProcess(tb, 0, func(int) ([]string, error) {
			var err error
			if bus, err = freePort(); err != nil {
				return nil, err
			}
			return []string{"--cluster-enabled", "yes", "--cluster-config-file", conf,
				"--cluster-port", strconv.Itoa(bus), "--cluster-node-timeout", "5000"}, nil
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
		c.nodes = append(c.nodes, &clusterNode{srv: srv, id: id, bus: bus, client: cl})
	}
	per := pubsub.Slots / len(c.nodes)
	for i, n := range c.nodes {
		first, last := i*per, (i+1)*per-1
		if i == len(c.nodes)-1 {
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
	c.waitStable(ctx)
	return c
}

// waitStable waits until every node says cluster_state:ok and agrees with
// the others on the owner of every slot.
func (c *Cluster) waitStable(ctx context.Context) {
	c.tb.Helper()
	var last string
	for {
		ok := true
		var ref string
		for _, n := range c.nodes {
			info, err := n.client.Do(ctx, n.client.B().ClusterInfo().Build()).ToString()
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				ok, last = false, fmt.Sprintf("%s: %v %q", n.srv.Addr(), err, info)
				break
			}
			owners, err := c.owners(ctx, n)
			if err != nil || (ref != "" && owners != ref) {
				ok, last = false, fmt.Sprintf("%s: owners %q, first node's %q (%v)", n.srv.Addr(), owners, ref, err)
				break
			}
			ref = owners
		}
		if ok {
			return
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

// Addrs returns every node's "host:port".
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.srv.Addr()
	}
	return out
}

// URL returns a redis:// URL naming one node; a client discovers the rest.
func (c *Cluster) URL() string { return "redis://" + c.nodes[0].srv.Addr() }

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
	must(dst, dst.client.B().ClusterSetslot().Slot(s).Node().NodeId(dst.id).Build())
	must(src, src.client.B().ClusterSetslot().Slot(s).Node().NodeId(dst.id).Build())
	for i, n := range c.nodes {
		if i != from && i != to {
			must(n, n.client.B().ClusterSetslot().Slot(s).Node().NodeId(dst.id).Build())
		}
	}
	c.waitStable(ctx)
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
