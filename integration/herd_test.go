package integration_test

import (
	"context"
	"fmt"
	"github.com/corral-rt/corral/config"
	"github.com/corral-rt/corral/internal/readytest"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/server"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// TestResetStormResumes is seed W1 at CI scale: 2,000 clients in 20 rooms
// lose their connections together (Shopify's toxiproxy, in process between
// the clients and the edge, resets every link with SO_LINGER 0 as soon as
// the server sends on it: within a few tens of milliseconds for all, as the
// publisher keeps every room busy) while a publisher keeps sending; every
// session resumes, nothing is lost or duplicated, and attempts per client
// stay bounded.
func TestResetStormResumes(t *testing.T) {
	const clients, rooms = 2000, 20
	d := start(t, "serve", nil, nil)
	tox := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	proxy := toxiproxy.NewProxy(tox, "edge", "127.0.0.1:0", d.wsURL[len("ws://"):len(d.wsURL)-len("/ws")])
	if err := proxy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Stop)
	viaProxy := "ws://" + proxy.Listen + "/ws"
	// 2,000 clients under the race detector on 2 shared cores: give the
	// whole run minutes, not the usual one.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	chk := checker.New()
	type member struct {
		name  string
		room  string
		s     *client.Session
		from  uint64
		drops atomic.Int32
	}
	members := make([]*member, clients)
	var resumed, dropped, fresh atomic.Int64
	// dials and dialFails count the clients' TCP dials to the proxy and
	// those that failed, by error, for a failure's log: a stall with no
	// dials is the clients', one with failing dials the proxy's or the
	// server's.
	var dials, dialFails atomic.Int64
	var dialWhy sync.Map // error text -> *atomic.Int64
	dialer := &net.Dialer{}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			dialFails.Add(1)
			n, _ := dialWhy.LoadOrStore(digits.ReplaceAllString(err.Error(), "N"), new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
		}
		return c, err
	}}}
	// why records why connections ended after the storm began, by the
	// error's text, for a failure's log.
	var whyMu sync.Mutex
	why := make(map[string]int)
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	sem := make(chan struct{}, 64) // connect at a civil pace
	for i := range members {
		m := &member{name: fmt.Sprintf("c%d", i), room: fmt.Sprintf("class%d", i%rooms)}
		members[i] = m
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			s, err := client.Connect(ctx, viaProxy, client.SessionOptions{Options: client.Options{Token: m.name, Encoding: protocol.Encoding(i % 2), HTTPClient: hc}})
			if err == nil {
				var j *corralv1.Joined
				if j, err = s.Join(ctx, m.room); err == nil {
					m.s, m.from = s, j.GetSeq()
				}
			}
			<-sem
			if err != nil {
				errs <- fmt.Errorf("%s: %w", m.name, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, m := range members {
		t.Cleanup(func() { m.s.Close() })
		go func() {
			for ev := range m.s.Events() {
				switch ev.Kind {
				case client.EventFrame:
					if msg := ev.Frame.GetMessage(); msg != nil {
						chk.Received(m.name, msg.GetRoom(), msg.GetSeq(), msg.GetId())
					}
				case client.EventConnected:
					if ev.Resumed {
						resumed.Add(1)
					} else if m.drops.Load() > 0 {
						fresh.Add(1) // back, but in a new session
					}
				case client.EventDisconnected:
					if m.drops.Add(1) == 1 {
						dropped.Add(1)
					}
					whyMu.Lock()
					why[digits.ReplaceAllString(fmt.Sprint(ev.Err), "N")]++
					whyMu.Unlock()
				case client.EventReset:
					chk.Reset(m.name, ev.Room)
				}
			}
		}()
	}

	// The publisher talks to the server directly, not through the proxy.
	pub := dial(t, d, "teacher", protocol.JSON)
	for r := range rooms {
		if _, err := pub.Join(ctx, fmt.Sprintf("class%d", r), 0, ""); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		for range pub.Frames() {
		}
	}()
	last := make([]uint64, rooms)
	var published atomic.Int64 // the traffic so far, for the waits below
	// flow waits until n more messages were published: the storm and
	// what follows run under traffic however slow the machine.
	flow := func(n int64) {
		t.Helper()
		from := published.Load()
		eventually.True(t, 30*time.Second, func() bool { return published.Load() >= from+n }, "%d messages published", n)
	}
	stop := make(chan struct{})
	pubDone := make(chan error, 1)
	go func() {
		for k := 0; ; k++ {
			select {
			case <-stop:
				pubDone <- nil
				return
			default:
			}
			r := k % rooms
			id := fmt.Sprintf("m%d", k)
			p, err := pub.Publish(ctx, fmt.Sprintf("class%d", r), id, payload(k))
			if err != nil {
				pubDone <- err
				return
			}
			chk.Acked(p.GetRoom(), p.GetSeq(), id)
			last[r] = p.GetSeq()
			published.Add(1)
			time.Sleep(2 * time.Millisecond) // ~500 messages/s across rooms
		}
	}()

	flow(150)
	// The toxic stays until every client has lost its connection; clients
	// that come back before that are reset again and back off, as in a real
	// outage that lasts a moment.
	if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(
		`{"name":"rst","type":"reset_peer","stream":"downstream","toxicity":1,"attributes":{"timeout":0}}`)); err != nil {
		t.Fatal(err)
	}
	eventually.Within(30*time.Second, func() bool { return dropped.Load() >= clients })
	if err := proxy.Toxics.RemoveToxic(ctx, "rst"); err != nil {
		t.Fatal(err)
	}
	dialsBefore := dials.Load()
	if n := dropped.Load(); n < clients {
		t.Fatalf("toxiproxy reset %d of %d connections within 30s", n, clients)
	}
	// Resumes must keep coming until all are back: the run fails when
	// none came for 30 s (a stall), or at the test's own deadline, not at
	// a fixed time for all 2,000 (under -race on two busy cores a healthy
	// storm took over a minute).
	progress, seen := time.Now(), resumed.Load()
	eventually.WithinEvery(time.Hour, 50*time.Millisecond, func() bool {
		if n := resumed.Load(); n > seen {
			progress, seen = time.Now(), n
		}
		return seen >= clients || time.Since(progress) >= 30*time.Second || ctx.Err() != nil
	})
	if n := resumed.Load(); n < clients {
		for _, m := range members {
			select {
			case <-m.s.Done():
				t.Logf("%s ended: %v (attempts %v)", m.name, m.s.Err(), m.s.Attempts())
			default:
			}
		}
		whyMu.Lock()
		for err, n := range why {
			t.Logf("connections ended %d times with: %s", n, err)
		}
		whyMu.Unlock()
		t.Logf("dials since the toxic went: %d (%d before), %d failed in all", dials.Load()-dialsBefore, dialsBefore, dialFails.Load())
		dialWhy.Range(func(k, v any) bool {
			t.Logf("dials failed %d times with: %s", v.(*atomic.Int64).Load(), k)
			return true
		})
		t.Fatalf("only %d of %d sessions resumed, %d came back in a new session (none for 30s, or past the test's deadline)", n, clients, fresh.Load())
	}
	flow(150) // live traffic after the storm
	close(stop)
	if err := <-pubDone; err != nil {
		t.Fatal(err)
	}
	// Everyone must have everything up to the last acknowledged seq.
	settle := time.Now().Add(20 * time.Second)
	for _, m := range members {
		r := 0
		fmt.Sscanf(m.room, "class%d", &r)
		eventually.Within(time.Until(settle), func() bool { return chk.Count(m.name, m.room) >= int(last[r]-m.from) })
		chk.Member(m.name, m.room, m.from, last[r])
	}
	if err := chk.Check(); err != nil {
		t.Fatal(err)
	}
	worst := 0
	for _, m := range members {
		a := m.s.Attempts()
		if len(a) > 1 {
			worst = max(worst, a[len(a)-1])
		}
	}
	if worst > 8 {
		t.Fatalf("a client needed %d attempts to reconnect; want a handful at most", worst)
	}
	t.Logf("2,000 resumed; worst attempts per client: %d", worst)
}

// digits are the numbers in an error's text (ports, counts), which the
// herd's failure log folds together.
var digits = regexp.MustCompile(`[0-9]+`)

// TestAdmissionRefusesPastBucket: past the handshake bucket the server
// answers 503 with a Retry-After at once, and clients already connected are
// not disturbed.
func TestAdmissionRefusesPastBucket(t *testing.T) {
	d := start(t, "serve", nil, func(o *server.Options) {
		o.Edge.HandshakeRate, o.Edge.HandshakeBurst = 0.5, 2
	})
	ctx := testCtx(t)
	// waitReady may have spent nothing: /readyz is not /ws.
	first := dial(t, d, "early", protocol.JSON)
	if _, err := first.Join(ctx, "r", 0, ""); err != nil {
		t.Fatal(err)
	}
	dial(t, d, "second", protocol.JSON)
	resp, err := http.Get("http" + d.wsURL[len("ws"):])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("third handshake: %d Retry-After %q, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if _, err := first.Publish(ctx, "r", "still", []byte(`1`)); err != nil {
		t.Fatalf("connected client disturbed: %v", err)
	}
}

// TestDrainSpreadsHints: a drain turns the server unready, refuses new
// connections, and tells every client to resume after a delay spread over
// the window; the sessions resume on another server sharing the store.
func TestDrainSpreadsHints(t *testing.T) {
	addr := "redis://" + redistest.Start(t)
	prefix := redistest.Prefix(t)
	shared := func(o *server.Options) { o.RedisURL, o.RedisPrefix = addr, prefix }
	// a is started here, not by start(), to drain it by hand.
	aNode, err := server.Start(server.Options{
		Mode: server.Serve, Node: config.Node{Addr: "127.0.0.1:0", RedisURL: addr, RedisPrefix: prefix}, Auth: auth.Dev{}, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { aNode.Close(context.Background()) })
	readytest.Wait(t, "http://"+aNode.Addr()+"/readyz")
	a := &deployment{wsURL: "ws://" + aNode.Addr() + "/ws"}
	b := start(t, "serve", nil, shared)
	ctx := testCtx(t)
	pub := dial(t, b, "pub", protocol.JSON)
	if _, err := pub.Join(ctx, "deploy", 0, ""); err != nil {
		t.Fatal(err)
	}
	var conns []*client.Conn
	var epoch string
	for i := range 40 {
		c := dial(t, a, fmt.Sprintf("u%d", i), protocol.Encoding(i%2))
		j, err := c.Join(ctx, "deploy", 0, "")
		if err != nil {
			t.Fatal(err)
		}
		epoch = j.GetEpoch()
		conns = append(conns, c)
	}
	const window = 2 * time.Second
	drained := make(chan error, 1)
	go func() {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		drained <- aNode.Drain(dctx, window)
	}()
	var delays []uint32
	for _, c := range conns {
		ce := waitClosed(t, c)
		if int(ce.Code) != int(corralv1.Code_CODE_GOING_AWAY) || ce.Hint.GetCode() != corralv1.Code_CODE_GOING_AWAY {
			t.Fatalf("closed with %d hint %v, want %d", ce.Code, ce.Hint, corralv1.Code_CODE_GOING_AWAY)
		}
		delays = append(delays, ce.Hint.GetDelayMs())
	}
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	lo, hi := delays[0], delays[0]
	for _, dl := range delays {
		lo, hi = min(lo, dl), max(hi, dl)
		if time.Duration(dl)*time.Millisecond > window {
			t.Fatalf("hint delay %dms beyond the %v window", dl, window)
		}
	}
	if hi-lo < uint32(window.Milliseconds()/4) {
		t.Fatalf("hint delays %d..%dms are not spread over the window", lo, hi)
	}
	if resp, err := http.Get("http" + a.wsURL[len("ws"):len(a.wsURL)-len("/ws")] + "/readyz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("readyz during drain: %d", resp.StatusCode)
		}
	}
	// Meanwhile the room moved on; every session resumes on b.
	p, err := pub.Publish(ctx, "deploy", "after-drain", []byte(`1`))
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range conns {
		back, err := resumeConn(t, b.wsURL, fmt.Sprintf("u%d", i), c.Welcome(), "deploy", p.GetSeq()-1, epoch)
		if err != nil {
			t.Fatalf("u%d could not resume on the other server: %v", i, err)
		}
		m := nextFrame(t, back, isMsg).GetMessage()
		if m.GetId() != "after-drain" {
			t.Fatalf("u%d got %v", i, m)
		}
	}
}

// TestAdminDrain: POST /admin/drain, on the internal listener, needs an
// API key; with one it drains the edge (clients get GOING_AWAY hints) and
// marks the node drained so the process exits.
func TestAdminDrain(t *testing.T) {
	n, err := server.Start(server.Options{
		Mode: server.Serve, Node: config.Node{Addr: "127.0.0.1:0", InternalAddr: "127.0.0.1:0"}, Auth: auth.Dev{}, Logger: quietLogger(),
		APIKeys: []string{testAPIKey},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	readytest.Wait(t, "http://"+n.Addr()+"/readyz")
	d := &deployment{wsURL: "ws://" + n.Addr() + "/ws"}
	c := dial(t, d, "watcher", protocol.JSON)
	url := "http://" + n.InternalAddr() + "/admin/drain?window=200ms"
	resp, err := http.Post(url, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("drain without a key: %d, want 401", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodPost, url, nil)
	req.Header.Set("Authorization", "Bearer "+testAPIKey)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("drain with the key: %d", resp.StatusCode)
	}
	if ce := waitClosed(t, c); int(ce.Code) != int(corralv1.Code_CODE_GOING_AWAY) {
		t.Fatalf("client closed with %d, want %d", ce.Code, corralv1.Code_CODE_GOING_AWAY)
	}
	select {
	case <-n.Drained():
	case <-time.After(5 * time.Second):
		t.Fatal("node not marked drained")
	}
}

// TestDrainMovesSessionsToFallback is a deploy without a load balancer:
// sessions on edge a, with edge b as their fallback, both on one Redis. a
// drains while a publisher keeps sending through b; every session follows
// its GOING_AWAY hint to b, resumes there (no new session), and the
// checker finds nothing lost or duplicated.
func TestDrainMovesSessionsToFallback(t *testing.T) {
	const clients = 40
	addr := "redis://" + redistest.Start(t)
	prefix := redistest.Prefix(t)
	aNode, err := server.Start(server.Options{
		Mode: server.Serve, Node: config.Node{Addr: "127.0.0.1:0", RedisURL: addr, RedisPrefix: prefix}, Auth: auth.Dev{}, Logger: quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { aNode.Close(context.Background()) })
	readytest.Wait(t, "http://"+aNode.Addr()+"/readyz")
	aURL := "ws://" + aNode.Addr() + "/ws"
	b := start(t, "serve", nil, func(o *server.Options) { o.RedisURL, o.RedisPrefix = addr, prefix })
	ctx := testCtx(t)

	chk := checker.New()
	var resumed, fresh atomic.Int64
	var draining atomic.Bool // connections before the drain are not counted
	froms := make([]uint64, clients)
	sessions := make([]*client.Session, clients)
	for i := range clients {
		name := fmt.Sprintf("u%d", i)
		s, err := client.Connect(ctx, aURL, client.SessionOptions{
			Options:   client.Options{Token: name, Encoding: protocol.Encoding(i % 2)},
			Fallbacks: []string{b.wsURL},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		j, err := s.Join(ctx, "deploy")
		if err != nil {
			t.Fatal(err)
		}
		sessions[i], froms[i] = s, j.GetSeq()
		go func() {
			for ev := range s.Events() {
				switch ev.Kind {
				case client.EventFrame:
					if m := ev.Frame.GetMessage(); m != nil {
						chk.Received(name, m.GetRoom(), m.GetSeq(), m.GetId())
					}
				case client.EventConnected:
					if !draining.Load() {
						continue
					}
					if ev.Resumed {
						resumed.Add(1)
					} else {
						fresh.Add(1)
					}
				case client.EventReset:
					chk.Reset(name, ev.Room)
				}
			}
		}()
	}

	pub := dial(t, b, "pub", protocol.JSON)
	if _, err := pub.Join(ctx, "deploy", 0, ""); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range pub.Frames() {
		}
	}()
	var last atomic.Uint64
	stop := make(chan struct{})
	pubDone := make(chan error, 1)
	go func() {
		for k := 0; ; k++ {
			select {
			case <-stop:
				pubDone <- nil
				return
			case <-time.After(5 * time.Millisecond):
			}
			id := fmt.Sprintf("m%d", k)
			p, err := pub.Publish(ctx, "deploy", id, payload(k))
			if err != nil {
				pubDone <- err
				return
			}
			chk.Acked("deploy", p.GetSeq(), id)
			last.Store(p.GetSeq())
		}
	}()

	// flow waits until n more messages were published.
	flow := func(n uint64) {
		t.Helper()
		from := last.Load()
		eventually.True(t, 30*time.Second, func() bool { return last.Load() >= from+n }, "%d messages published", n)
	}
	flow(20)
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	draining.Store(true)
	if err := aNode.Drain(dctx, time.Second); err != nil {
		t.Fatalf("drain: %v", err)
	}
	eventually.Within(30*time.Second, func() bool { return resumed.Load()+fresh.Load() >= clients })
	if r, f := resumed.Load(), fresh.Load(); r != clients || f != 0 {
		t.Fatalf("after the drain %d sessions resumed and %d started anew, want %d and 0", r, f, clients)
	}
	flow(20) // live traffic on b
	close(stop)
	if err := <-pubDone; err != nil {
		t.Fatal(err)
	}
	upto := last.Load()
	for i := range clients {
		name := fmt.Sprintf("u%d", i)
		eventually.Within(10*time.Second, func() bool { return chk.Count(name, "deploy") >= int(upto-froms[i]) })
		chk.Member(name, "deploy", froms[i], upto)
	}
	if err := chk.Check(); err != nil {
		t.Fatal(err)
	}
}
