package integration_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/faultproxy"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/server"
)

// TestRedisFaults puts toxiproxy between corral and its Redis (issue 23
// item 4) and runs a room through each fault with the delivery checker:
// three resumable members (one of them behind a proxy that can cut its
// WebSocket) and a publisher. Before, during and after the fault the
// publisher publishes; what it was refused with retry-later it publishes
// again, with the same id, once the toxic is gone. At the end every member
// has every acknowledged message once, in order, or was told Reset: never
// a silent gap.
func TestRedisFaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		// timeout is the store timeout (--redis-timeout); 0: 2s.
		timeout time.Duration
		// toxics are added for the fault and removed after it.
		toxics []toxic
		// during is how many messages are published during the fault.
		during int
		// refused: publishes during the fault are refused with
		// retry-later within the store timeout, and /readyz turns 503.
		refused bool
		// cutMember drops a member's WebSocket during the fault: it must
		// resume once Redis is back.
		cutMember bool
	}{
		{name: "latency 500ms", toxics: []toxic{{"slow", "latency", "downstream", map[string]any{"latency": 500}}}, during: 10},
		// 2s of latency under a 5s store timeout: a slow but working Redis,
		// with room for a loaded machine (under 3s, one command in CI took
		// past the timeout and a publish was refused).
		{name: "latency 2s", timeout: 5 * time.Second, toxics: []toxic{{"slow", "latency", "downstream", map[string]any{"latency": 2000}}}, during: 4},
		{name: "bandwidth", toxics: []toxic{
			{"thin_down", "bandwidth", "downstream", map[string]any{"rate": 8}},
			{"thin_up", "bandwidth", "upstream", map[string]any{"rate": 8}},
		}, during: 20},
		{name: "timeout", toxics: []toxic{
			{"cut_up", "timeout", "upstream", map[string]any{"timeout": 0}},
			{"cut_down", "timeout", "downstream", map[string]any{"timeout": 0}},
		}, during: 3, refused: true, cutMember: true},
		// Replies lost, commands applied: the refused publishes may be
		// stored; their retries are deduplicated.
		{name: "timeout downstream only", toxics: []toxic{
			{"cut_down", "timeout", "downstream", map[string]any{"timeout": 0}},
		}, during: 3, refused: true},
		{name: "reset_peer", toxics: []toxic{{"rst", "reset_peer", "upstream", map[string]any{"timeout": 0}}},
			during: 3, refused: true, cutMember: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runRedisFault(t, cmp.Or(tc.timeout, 2*time.Second), tc.toxics, tc.during, tc.refused, tc.cutMember)
		})
	}
}

type toxic struct {
	name, kind, stream string
	attrs              map[string]any
}

// faultMember is a resumable member that records what it receives.
type faultMember struct {
	name    string
	s       *client.Session
	last    atomic.Uint64
	resumed atomic.Int32
	resets  atomic.Int32
	signals atomic.Int32
	// refused counts error frames with a retry-later code.
	refused atomic.Int32
}

func runRedisFault(t *testing.T, storeTimeout time.Duration, toxics []toxic, during int, refused, cutMember bool) {
	srv := redistest.StartProcess(t, 0)
	tox, err := faultproxy.StartToxic(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tox.Close)
	d := start(t, "serve", nil, func(o *server.Options) {
		o.RedisURL = "redis://" + tox.Addr()
		o.RedisPrefix = redistest.Prefix(t)
		o.RedisTimeout = storeTimeout
	})
	edge := strings.TrimSuffix(strings.TrimPrefix(d.wsURL, "ws://"), "/ws")
	wsCut, err := faultproxy.Start(edge)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wsCut.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const room = "faulty"
	chk := checker.New()

	var members []*faultMember
	var wg sync.WaitGroup
	for i := range 3 {
		url := d.wsURL
		if i == 0 {
			url = "ws://" + wsCut.Addr() + "/ws"
		}
		m := &faultMember{name: fmt.Sprintf("m%d", i)}
		s, err := client.Connect(ctx, url, client.SessionOptions{
			Options: client.Options{Token: m.name, Encoding: protocol.Encoding(i % 2)},
			Backoff: client.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		j, err := s.Join(ctx, room)
		if err != nil {
			t.Fatal(err)
		}
		m.s = s
		m.last.Store(j.GetSeq())
		members = append(members, m)
		chk.Member(m.name, room, j.GetSeq(), 0) // widened below
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-s.Done():
					return
				case ev := <-s.Events():
					switch ev.Kind {
					case client.EventFrame:
						if msg := ev.Frame.GetMessage(); msg != nil {
							chk.Received(m.name, room, msg.GetSeq(), msg.GetId())
							m.last.Store(msg.GetSeq())
						}
						if ev.Frame.GetSignal() != nil {
							m.signals.Add(1)
						}
						if e := ev.Frame.GetError(); e != nil && protocol.AdviceOf(e.GetCode()) == protocol.AdviceRetry {
							m.refused.Add(1)
						}
					case client.EventReset:
						chk.Reset(m.name, room)
						m.resets.Add(1)
						if seq := ev.Frame.GetReset_().GetSeq(); seq > m.last.Load() {
							m.last.Store(seq)
						}
					case client.EventConnected:
						if ev.Resumed {
							m.resumed.Add(1)
						}
					}
				}
			}
		}()
	}
	first := members[0].last.Load()

	pub := dial(t, d, "pub", protocol.JSON)
	if _, err := pub.Join(ctx, room, 0, ""); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range pub.Frames() {
		}
	}()
	var lastSeq uint64
	n := 0
	publish := func(id string) error {
		res, err := pub.Publish(ctx, room, id, payload(n))
		if err == nil {
			chk.Acked(room, res.GetSeq(), id)
			lastSeq = max(lastSeq, res.GetSeq())
		}
		return err
	}
	next := func() string { n++; return fmt.Sprintf("p%d", n) }
	for range 10 {
		if err := publish(next()); err != nil {
			t.Fatalf("before the fault: %v", err)
		}
	}

	for _, x := range toxics {
		if err := tox.Add(x.name, x.kind, x.stream, x.attrs); err != nil {
			t.Fatal(err)
		}
	}
	var again []string // refused with retry-later: publish again later
	signalled := false
	for range during {
		id := next()
		start := time.Now()
		err := publish(id)
		took := time.Since(start)
		switch {
		case err == nil && refused:
			// A reply may beat a toxic to a connection it has not reached.
		case err == nil:
		case !retryable(err):
			t.Fatalf("publish %s during the fault: %v, want success or retry-later", id, err)
		case !refused:
			t.Fatalf("publish %s refused during a slow but working Redis: %v", id, err)
		default:
			again = append(again, id)
			// The store timeout, plus slack for a loaded machine; without
			// it the publish would wait for rueidis to give the
			// connection up (10s) or for the link's heartbeat.
			if bound := storeTimeout + 3*time.Second; took > bound {
				t.Fatalf("publish %s refused after %v, the bound is %v", id, took, bound)
			}
			var se *client.ServerError
			if errors.As(err, &se) && se.Err.GetCode() != corralv1.Code_CODE_UNAVAILABLE {
				t.Fatalf("refused with %v, want CODE_UNAVAILABLE (4103)", se.Err.GetCode())
			}
		}
	}
	if refused {
		if len(again) == 0 {
			t.Fatal("no publish was refused during the fault")
		}
		waitReady(t, d, http.StatusServiceUnavailable)
		// Signals are not stored: one reaches the others while the
		// sender's grants are cached (grants.RedisOptions.TTL, 5s), and
		// after that is refused with retry-later (grants fail closed).
		// Never silently dropped.
		before, refusedBefore := members[2].signals.Load(), members[1].refused.Load()
		if err := members[1].s.Signal(ctx, &corralv1.Signal{Room: room, Key: "cursor", Payload: []byte("1")}); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, "a signal during the fault, or its refusal", func() bool {
			return members[2].signals.Load() > before || members[1].refused.Load() > refusedBefore
		})
		signalled = members[2].signals.Load() > before
	}
	if cutMember {
		if wsCut.ResetAll() == 0 {
			t.Fatal("the member's WebSocket was not cut")
		}
		time.Sleep(300 * time.Millisecond) // it tries to resume meanwhile
	}

	for _, x := range toxics {
		if err := tox.Remove(x.name); err != nil {
			t.Fatal(err)
		}
	}
	waitReady(t, d, http.StatusOK)
	for _, id := range again {
		err := publish(id)
		if err != nil && retryable(err) {
			eventually.WithinEvery(5*time.Second, 50*time.Millisecond, func() bool {
				err = publish(id)
				return err == nil || !retryable(err)
			})
		}
		if err != nil {
			t.Fatalf("publish %s again after the fault: %v", id, err)
		}
	}
	for range 10 {
		if err := publish(next()); err != nil {
			t.Fatalf("after the fault: %v", err)
		}
	}
	waitUntil(t, "every member caught up", func() bool {
		for _, m := range members {
			if m.last.Load() < lastSeq {
				return false
			}
		}
		return true
	})
	for _, m := range members {
		chk.Member(m.name, room, first, lastSeq)
	}
	if err := chk.Check(); err != nil {
		t.Fatal(err)
	}
	if refused && storeErrors(t, d, "history") == 0 {
		t.Fatal("the refused publishes are not in corral_store_errors_total{store=\"history\"}")
	}
	if cutMember && members[0].resumed.Load() == 0 && members[0].resets.Load() == 0 {
		t.Fatal("the cut member neither resumed its session nor was told Reset")
	}
	if cutMember && members[0].resumed.Load() == 0 {
		t.Fatal("the cut member's session did not survive a short partition")
	}
	t.Logf("published %d (refused then retried %d), last seq %d; signal delivered during the fault: %v; resets %d/%d/%d",
		n, len(again), lastSeq, signalled, members[0].resets.Load(), members[1].resets.Load(), members[2].resets.Load())
}

// storeErrors sums corral_store_errors_total of store, every kind.
func storeErrors(t *testing.T, d *deployment, store string) float64 {
	t.Helper()
	resp, err := http.Get(d.apiURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "corral_store_errors_total{") || !strings.Contains(line, `store="`+store+`"`) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
			sum += v
		}
	}
	return sum
}

// waitReady waits for the node's /readyz to answer code.
func waitReady(t *testing.T, d *deployment, code int) {
	t.Helper()
	url := strings.Replace(d.wsURL, "ws://", "http://", 1)
	url = strings.TrimSuffix(url, "/ws") + "/readyz"
	waitUntil(t, fmt.Sprintf("/readyz %d", code), func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == code
	})
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	eventually.True(t, 20*time.Second, ok, "%s", what)
}
