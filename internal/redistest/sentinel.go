package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// MasterSet is the name the sentinels of [StartSentinel] monitor.
const MasterSet = "mymaster"

// Sentinel is a master, its replicas and three sentinels monitoring them,
// each a private redis-server process, started by [StartSentinel].
type Sentinel struct {
	tb        testing.TB
	servers   []*Server // the master first, then the replicas
	sentinels []*Server
	killedAt  time.Time // of the last Failover's kill
}

// KilledAt returns when the last Failover killed the master.
func (s *Sentinel) KilledAt() time.Time { return s.killedAt }

// StartSentinel starts a master, replicas replicas of it and three
// sentinels (quorum 2, down-after 1s) from PATH, and waits until every
// replica is in sync and every sentinel knows the master and its replicas.
// The processes stop by tb.Cleanup. It never uses REDIS_URL.
func StartSentinel(tb testing.TB, replicas int) *Sentinel {
	tb.Helper()
	s := &Sentinel{tb: tb}
	master := StartProcess(tb, 0)
	s.servers = append(s.servers, master)
	for range replicas {
		s.servers = append(s.servers, startProcess(tb, 0, func(int) ([]string, error) {
			return []string{"--replicaof", "127.0.0.1", strconv.Itoa(master.port)}, nil
		}))
	}
	for range 3 {
		dir := tb.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		body := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2\n"+
			"sentinel down-after-milliseconds %[1]s 1000\n"+
			"sentinel failover-timeout %[1]s 3000\n"+
			"sentinel parallel-syncs %[1]s 1\n", MasterSet, master.port)
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			tb.Fatalf("redistest: %v", err)
		}
		s.sentinels = append(s.sentinels, startServer(tb, &Server{tb: tb, dir: dir, conf: conf}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.waitReady(ctx, master.Addr(), replicas)
	return s
}

// URL returns the redis+sentinel:// URL naming the three sentinels.
func (s *Sentinel) URL() string {
	addrs := make([]string, len(s.sentinels))
	for i, sn := range s.sentinels {
		addrs[i] = sn.Addr()
	}
	return "redis+sentinel://" + strings.Join(addrs, ",") + "/" + MasterSet
}

// Master returns the address the sentinels give for the master.
func (s *Sentinel) Master(ctx context.Context) (string, error) {
	var last error
	for _, sn := range s.sentinels {
		reply, err := command(ctx, sn.Addr(), "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MasterSet)
		if err != nil {
			last = err
			continue
		}
		arr, err := reply.AsStrSlice()
		if err != nil || len(arr) != 2 {
			last = fmt.Errorf("GET-MASTER-ADDR-BY-NAME: %v %v", arr, err)
			continue
		}
		return net.JoinHostPort(arr[0], arr[1]), nil
	}
	return "", last
}

// Failover kills the master (SIGKILL: writes it had not yet sent to a
// replica are lost) and waits until the sentinels have promoted a replica,
// which then answers as master, and the other replicas follow it. It
// returns the new master's address.
func (s *Sentinel) Failover() string {
	s.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	old, err := s.Master(ctx)
	if err != nil {
		s.tb.Fatalf("redistest: failover: %v", err)
	}
	var rest []*Server
	for _, srv := range s.servers {
		if srv.Addr() == old {
			s.killedAt = time.Now()
			srv.Kill()
			continue
		}
		rest = append(rest, srv)
	}
	if len(rest) == len(s.servers) {
		s.tb.Fatalf("redistest: failover: master %s is not one of ours", old)
	}
	s.servers = rest
	for ctx.Err() == nil {
		now, err := s.Master(ctx)
		if err == nil && now != old {
			s.waitReady(ctx, now, len(rest)-1)
			return now
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Say why, for the test's log.
	dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer dcancel()
	var why []string
	for _, srv := range rest {
		info, err := command(dctx, srv.Addr(), "INFO", "replication")
		text, _ := info.ToString()
		why = append(why, fmt.Sprintf("%s: %v %q", srv.Addr(), err, text))
	}
	if len(s.sentinels) > 0 {
		r, err := command(dctx, s.sentinels[0].Addr(), "SENTINEL", "REPLICAS", MasterSet)
		why = append(why, fmt.Sprintf("sentinel's replicas: %v %v", r, err))
	}
	s.tb.Fatalf("redistest: failover: no replica was promoted within 60s: %s", strings.Join(why, "; "))
	return ""
}

// waitReady waits until master answers as master with replicas connected
// replicas in sync, and every sentinel names it.
func (s *Sentinel) waitReady(ctx context.Context, master string, replicas int) {
	s.tb.Helper()
	var why string
	for ctx.Err() == nil {
		why = s.notReady(ctx, master, replicas)
		if why == "" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.tb.Fatalf("redistest: sentinel setup not ready: %s", why)
}

func (s *Sentinel) notReady(ctx context.Context, master string, replicas int) string {
	info, err := command(ctx, master, "INFO", "replication")
	if err != nil {
		return err.Error()
	}
	text, _ := info.ToString()
	if !strings.Contains(text, "role:master") {
		return master + " is not a master yet"
	}
	online := strings.Count(text, "state=online")
	if online < replicas {
		return fmt.Sprintf("%d of %d replicas online", online, replicas)
	}
	for _, sn := range s.sentinels {
		reply, err := command(ctx, sn.Addr(), "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MasterSet)
		if err != nil {
			return err.Error()
		}
		arr, _ := reply.AsStrSlice()
		if len(arr) != 2 || net.JoinHostPort(arr[0], arr[1]) != master {
			return fmt.Sprintf("sentinel %s names %v", sn.Addr(), arr)
		}
		r, err := command(ctx, sn.Addr(), "SENTINEL", "REPLICAS", MasterSet)
		if err != nil {
			return err.Error()
		}
		list, _ := r.ToArray()
		if len(list) < replicas {
			return fmt.Sprintf("sentinel %s knows %d replicas", sn.Addr(), len(list))
		}
	}
	return ""
}

// command runs one command on addr over a connection of its own.
func command(ctx context.Context, addr string, args ...string) (rueidis.RedisMessage, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true,
		DisableRetry: true, Dialer: net.Dialer{Timeout: time.Second},
	})
	if err != nil {
		return rueidis.RedisMessage{}, err
	}
	defer c.Close()
	return c.Do(ctx, c.B().Arbitrary(args...).Build()).ToMessage()
}

// Replica returns the i-th replica server (from 0) still running.
func (s *Sentinel) Replica(i int) *Server { return s.servers[1+i] }

// Servers returns the data servers still running, the master first until
// a failover (then in start order).
func (s *Sentinel) Servers() []*Server { return s.servers }

// DropReplicaLinks closes the master's connections to its replicas (CLIENT
// KILL TYPE replica). A paused replica cannot reconnect, so what the
// master acknowledges meanwhile never reaches it: a failover to it then
// loses those writes, as after a real replication lag.
func (s *Sentinel) DropReplicaLinks() {
	s.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	master, err := s.Master(ctx)
	if err == nil {
		_, err = command(ctx, master, "CLIENT", "KILL", "TYPE", "replica")
	}
	if err != nil {
		s.tb.Fatalf("redistest: drop replica links: %v", err)
	}
}

// WaitReplicated waits until every replica online has acknowledged the
// master's replication offset as of the call: what the master holds now,
// its replicas hold too (a fixed sleep was not enough on a loaded machine).
func (s *Sentinel) WaitReplicated() {
	s.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	want := int64(-1)
	why := "no answer"
	for ctx.Err() == nil {
		why = s.notReplicated(ctx, &want)
		if why == "" {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.tb.Fatalf("redistest: replicas not caught up: %s", why)
}

// notReplicated says why the replicas online do not yet hold *want, the
// master's offset (read on the first call that reaches it).
func (s *Sentinel) notReplicated(ctx context.Context, want *int64) string {
	master, err := s.Master(ctx)
	if err != nil {
		return err.Error()
	}
	info, err := command(ctx, master, "INFO", "replication")
	if err != nil {
		return err.Error()
	}
	text, _ := info.ToString()
	var got []int64
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "master_repl_offset:"); ok && *want < 0 {
			*want, _ = strconv.ParseInt(v, 10, 64)
		}
		if !strings.HasPrefix(line, "slave") || !strings.Contains(line, "state=online") {
			continue
		}
		for _, f := range strings.Split(line, ",") {
			if v, ok := strings.CutPrefix(f, "offset="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				got = append(got, n)
			}
		}
	}
	if *want < 0 || len(got) == 0 {
		return "no replica online"
	}
	for _, n := range got {
		if n < *want {
			return fmt.Sprintf("a replica at offset %d of %d", n, *want)
		}
	}
	return ""
}
