package integration_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/corral-rt/corral/internal/readytest"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/protocol"
)

// TestScaleOutCoreFailover: 2 edges and 2 cores, each its own OS process,
// sharing one Redis. 200 clients over both edges in 4 rooms, 4 publishers;
// one core is killed with SIGKILL mid-traffic and later restarted. The
// edges move the dead core's sessions to the other core without the
// browsers noticing; every member receives every acknowledged message of
// its room once, in the room's one order.
func TestScaleOutCoreFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 4 corral processes")
	}
	bin := buildCorral(t)
	redisAddr := redistest.Start(t)
	redisURL := "redis://" + redisAddr
	prefix := redistest.Prefix(t)

	var cores []*process
	var coreURLs string
	for i := range 2 {
		addr := freeAddr(t)
		p := &process{t: t, bin: bin, args: []string{
			"core", "--insecure-dev", "--addr", addr, "--log-level", "warn",
			"--redis", redisURL, "--redis-prefix", prefix,
		}}
		p.start()
		t.Cleanup(p.kill9)
		readytest.Wait(t, "http://"+addr+"/readyz")
		cores = append(cores, p)
		if i > 0 {
			coreURLs += ","
		}
		coreURLs += "http://" + addr
	}
	var edges []*deployment
	var edgeURLs []string
	for range 2 {
		addr := freeAddr(t)
		p := &process{t: t, bin: bin, args: []string{
			"edge", "--insecure-dev", "--addr", addr, "--log-level", "warn",
			"--core", coreURLs,
			// Publishers go faster than the default 50/s: limits have
			// their own tests.
			"--publish-rate", "-1",
		}}
		p.start()
		t.Cleanup(p.kill9)
		readytest.Wait(t, "http://"+addr+"/readyz")
		edges = append(edges, &deployment{wsURL: "ws://" + addr + "/ws"})
		edgeURLs = append(edgeURLs, "http://"+addr)
	}

	ctx := testCtx(t)
	const (
		clients   = 200
		rooms     = 4
		pubs      = 4
		perPub    = 160 // messages per publisher, round robin over rooms (a multiple of rooms)
		perRoom   = pubs * perPub / rooms
		killAfter = 50 // the core dies when each publisher has sent this many
	)
	room := func(i int) string { return fmt.Sprintf("hall%d", i%rooms) }
	chk := checker.New()
	var resets atomic.Int64

	// Members: each one joins one room and counts until it has perRoom.
	var recv sync.WaitGroup
	var members []*client.Conn
	for i := range clients {
		name := fmt.Sprintf("m%d", i)
		c := dial(t, edges[i%2], name, protocol.Encoding(i/2%2))
		if _, err := c.Join(ctx, room(i), 0, ""); err != nil {
			t.Fatal(err)
		}
		members = append(members, c)
		chk.Member(name, room(i), 0, perRoom)
		recv.Add(1)
		go func() {
			var once sync.Once
			defer once.Do(recv.Done)
			var last uint64
			// Reading on after the last message catches duplicates.
			for f := range c.Frames() {
				if m := f.GetMessage(); m != nil {
					chk.Received(name, room(i), m.GetSeq(), m.GetId())
					last = max(last, m.GetSeq())
				}
				if r := f.GetReset_(); r != nil {
					chk.Reset(name, r.GetRoom())
					resets.Add(1)
				}
				if last >= perRoom {
					once.Do(recv.Done)
				}
			}
		}()
	}

	// Publishers retry a publish with the same id until it is acknowledged:
	// the core may die with it in flight, or refuse it while the edge moves
	// the session.
	var sent, retries atomic.Int64
	var pubWG sync.WaitGroup
	errs := make(chan error, pubs)
	for p := range pubs {
		c := dial(t, edges[p%2], fmt.Sprintf("pub%d", p), protocol.JSON)
		for r := range rooms {
			if _, err := c.Join(ctx, room(r), 0, ""); err != nil {
				t.Fatal(err)
			}
		}
		go func() {
			for range c.Frames() {
			}
		}()
		pubWG.Add(1)
		go func() {
			defer pubWG.Done()
			for k := range perPub {
				id, r := fmt.Sprintf("p%d-%d", p, k), room(k)
				res, n, err := publishAcked(ctx, c, r, id, payload(k), 2*time.Second)
				retries.Add(int64(n))
				if err != nil {
					errs <- fmt.Errorf("publisher %d, %s: %w", p, id, err)
					return
				}
				chk.Acked(r, res.GetSeq(), id)
				sent.Add(1)
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}

	pubsDone := make(chan struct{})
	go func() { pubWG.Wait(); close(pubsDone) }()
	for sent.Load() < pubs*killAfter {
		select {
		case <-pubsDone:
			t.Fatalf("publishers ended early: %v", <-errs)
		case <-time.After(5 * time.Millisecond):
		}
	}
	cores[0].kill9()
	time.Sleep(time.Second)
	cores[0].start()

	<-pubsDone
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { recv.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Log("not every member received everything; the checker says what is missing")
		rc := redistest.Client(t, redisAddr)
		for r := range rooms {
			key := fmt.Sprintf("%s:{%s}:", prefix, room(r))
			last, _ := rc.Do(ctx, rc.B().Get().Key(key+"seq").Build()).ToString()
			n, _ := rc.Do(ctx, rc.B().Xlen().Key(key+"log").Build()).AsInt64()
			subs, _ := rc.Do(ctx, rc.B().PubsubNumsub().Channel(key+"ch").Build()).ToArray()
			var ns []int64
			for i := 1; i < len(subs); i += 2 {
				v, _ := subs[i].AsInt64()
				ns = append(ns, v)
			}
			t.Logf("%s: seq %s, %d in the log, subscribers %v", room(r), last, n, ns)
		}
	}
	for i, c := range members {
		select {
		case <-c.Done():
			t.Errorf("m%d was disconnected: %v", i, c.Err())
		default:
		}
	}
	moved := 0.0
	for _, u := range edgeURLs {
		moved += metricValue(t, u+"/metrics", "corral_edge_sessions_reattached_total")
	}
	if moved == 0 {
		t.Error("no session was moved to the other core: the test did not test failover")
	}
	t.Logf("%d publishes, %d retried, %v sessions moved to the other core", sent.Load(), retries.Load(), moved)
	time.Sleep(200 * time.Millisecond) // let late duplicates show
	if err := chk.Check(); err != nil {
		t.Fatal(err)
	}
	if resets.Load() > 0 {
		t.Fatalf("%d Resets: history survived, nobody should have been told to refetch", resets.Load())
	}
}

// publishAcked publishes until the publish is acknowledged, each attempt
// bounded by timeout, repeating the same id (so deduplicated) after an
// UNAVAILABLE or a timeout: the core may die with it in flight, or refuse
// it while the edge moves the session. It returns how many attempts were
// repeated.
func publishAcked(ctx context.Context, c *client.Conn, room, id string, payload []byte, timeout time.Duration) (*corralv1.Published, int, error) {
	retries := -1
	var res *corralv1.Published
	var err error
	// settled: published, or failed for good (not a refusal to retry).
	settled := func() bool {
		retries++
		pctx, cancel := context.WithTimeout(ctx, timeout)
		res, err = c.Publish(pctx, room, id, payload)
		cancel()
		if err == nil {
			return true
		}
		var se *client.ServerError
		unavailable := errors.As(err, &se) && se.Err.GetCode() == corralv1.Code_CODE_UNAVAILABLE
		return ctx.Err() != nil || (!unavailable && !errors.Is(err, context.DeadlineExceeded))
	}
	for !eventually.WithinEvery(time.Minute, 50*time.Millisecond, settled) {
	}
	if err != nil {
		return nil, retries, err
	}
	return res, retries, nil
}

// metricValue reads one unlabelled metric from a Prometheus endpoint.
func metricValue(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("%s not found at %s", name, url)
	return 0
}
