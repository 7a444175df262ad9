package integration_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/server"
	"github.com/redis/rueidis"
)

// TestPubSubReconnectCatchesUp: two cores share Redis; the members are on
// one, the publisher on the other, so everything reaches the members over
// Redis pub/sub. Redis drops the pub/sub connections (CLIENT KILL TYPE
// pubsub) while messages are published, three times; the last burst ends
// with no message after it that could reveal a gap. Each core resubscribes
// and catches up every active room from history: the members get every
// message once, in order, and no Reset.
func TestPubSubReconnectCatchesUp(t *testing.T) {
	addr := redistest.Start(t)
	prefix := redistest.Prefix(t)
	var nodes []*deployment
	for range 2 {
		nodes = append(nodes, start(t, "serve", nil, func(o *server.Options) {
			o.RedisURL = "redis://" + addr
			o.RedisPrefix = prefix
		}))
	}
	rc := redistest.Client(t, addr)
	ctx := testCtx(t)
	const room, bursts, perBurst = "wire", 3, 40
	const total = bursts * perBurst
	chk := checker.New()

	var recv sync.WaitGroup
	var mu sync.Mutex
	resets := 0
	for i := range 6 {
		name := fmt.Sprintf("m%d", i)
		c := dial(t, nodes[1], name, protocol.Encoding(i%2))
		if _, err := c.Join(ctx, room, 0, ""); err != nil {
			t.Fatal(err)
		}
		chk.Member(name, room, 0, total)
		recv.Add(1)
		go func() {
			var once sync.Once
			defer once.Do(recv.Done)
			for f := range c.Frames() {
				if m := f.GetMessage(); m != nil {
					chk.Received(name, room, m.GetSeq(), m.GetId())
					if m.GetSeq() >= total {
						once.Do(recv.Done)
					}
				}
				if f.GetReset_() != nil {
					mu.Lock()
					resets++
					mu.Unlock()
				}
			}
		}()
	}
	pub := dial(t, nodes[0], "pub", protocol.JSON)
	if _, err := pub.Join(ctx, room, 0, ""); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range pub.Frames() {
		}
	}()
	killed := int64(0)
	n := 0
	for b := range bursts {
		last := b == bursts-1
		if last {
			// Hold the cores off until the burst is in: no later message
			// can reveal the gap, only the catch-up after the reconnect.
			if !redistest.Private(addr) {
				t.Skip("needs a private redis-server (CONFIG SET maxclients)")
			}
			info, err := rc.Do(ctx, rc.B().Info().Section("clients").Build()).ToString()
			if err != nil {
				t.Fatal(err)
			}
			var clients int64
			for _, line := range strings.Split(info, "\r\n") {
				if v, ok := strings.CutPrefix(line, "connected_clients:"); ok {
					clients, _ = strconv.ParseInt(v, 10, 64)
				}
			}
			// The two pub/sub connections go; nobody may come back.
			setMax(t, rc, clients-2)
		}
		// Kill first: the burst is published while the cores reconnect.
		k, err := rc.Do(ctx, rc.B().ClientKill().TypePubsub().Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		killed += k
		for range perBurst {
			id := fmt.Sprintf("p%d", n)
			res, err := pub.Publish(ctx, room, id, payload(n))
			// The kill may cut the connection an append is on (rueidis
			// shares it): the server answers "retry" (4103), and a retry
			// with the same id is applied once.
			if err != nil && retryable(err) {
				eventually.WithinEvery(time.Second, 20*time.Millisecond, func() bool {
					res, err = pub.Publish(ctx, room, id, payload(n))
					return err == nil || !retryable(err)
				})
			}
			if err != nil {
				t.Fatal(err)
			}
			chk.Acked(room, res.GetSeq(), id)
			n++
		}
		if last {
			time.Sleep(300 * time.Millisecond)
			setMax(t, rc, 10000)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if killed < bursts {
		t.Fatalf("CLIENT KILL TYPE pubsub closed %d connections, want at least %d", killed, bursts)
	}
	done := make(chan struct{})
	go func() { recv.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Log("not every member received everything; the checker says what is missing")
	}
	if err := chk.Check(); err != nil {
		t.Fatal(err)
	}
	if resets > 0 {
		t.Fatalf("%d Resets: history was intact, catching up needs none", resets)
	}
}

func setMax(t *testing.T, rc rueidis.Client, n int64) {
	t.Helper()
	err := rc.Do(context.Background(), rc.B().ConfigSet().ParameterValue().ParameterValue("maxclients", strconv.FormatInt(n, 10)).Build()).Error()
	if err != nil {
		t.Fatal(err)
	}
}

// TestCoreUnsubscribesEmptyRooms: a core is subscribed to a room's channel
// only while it has members there.
func TestCoreUnsubscribesEmptyRooms(t *testing.T) {
	addr := redistest.Start(t)
	d := start(t, "serve", nil, func(o *server.Options) {
		o.RedisURL = "redis://" + addr
		o.RedisPrefix = redistest.Prefix(t)
		o.Core.UnsubscribeDelay = 50 * time.Millisecond
	})
	rc := redistest.Client(t, addr)
	ctx := testCtx(t)
	// subscribed counts the channels subscribed: one per room in use, its
	// messages' and its keyed state's changes on the same channel
	// (state.RedisOptions.Channel), each held by one subscriber.
	subscribed := func() int {
		chs, err := rc.Do(ctx, rc.B().PubsubChannels().Pattern("*{lobby*").Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		held := 0
		for _, ch := range chs {
			a, err := rc.Do(ctx, rc.B().PubsubNumsub().Channel(ch).Build()).ToArray()
			if err != nil || len(a) != 2 {
				t.Fatal(a, err)
			}
			// 0: unsubscribed between the two questions (a room emptied
			// meanwhile), so not counted; more than 1: a second
			// subscription of this core.
			n, _ := a[1].AsInt64()
			if n > 1 {
				t.Errorf("%s has %d subscribers, want this core's one", ch, n)
			}
			if n == 1 {
				held++
			}
		}
		return held
	}
	var conns []interface{ CloseNow() }
	for i := range 3 {
		c := dial(t, d, fmt.Sprintf("u%d", i), protocol.JSON)
		if _, err := c.Join(ctx, fmt.Sprintf("lobby%d", i), 0, ""); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	if n := subscribed(); n != 3 {
		t.Fatalf("%d channels subscribed with members in 3 rooms, want one per room", n)
	}
	for _, c := range conns {
		c.CloseNow()
	}
	if !eventually.Within(10*time.Second, func() bool { return subscribed() == 0 }) {
		t.Fatalf("%d rooms still subscribed without members", subscribed())
	}
}

// retryable reports whether err is the server's refusal with a "retry"
// code.
func retryable(err error) bool {
	var se *client.ServerError
	return errors.As(err, &se) && protocol.AdviceOf(se.Err.GetCode()) == protocol.AdviceRetry
}
