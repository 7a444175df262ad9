package history_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"google.golang.org/protobuf/proto"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/redistest"
)

func TestRedis(t *testing.T) {
	addr := redistest.Start(t)
	client := redistest.Client(t, addr)
	testStore(t, func(t *testing.T, maxLen int) history.Store {
		s := history.NewRedis(client, history.RedisOptions{MaxLen: maxLen, Prefix: redistest.Prefix(t)})
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// newRedis returns a store under a fresh prefix on a Redis of this test.
func newRedis(t *testing.T, opts history.RedisOptions) (*history.Redis, rueidis.Client, string) {
	t.Helper()
	addr := redistest.Start(t)
	client := redistest.Client(t, addr)
	if opts.Prefix == "" {
		opts.Prefix = redistest.Prefix(t)
	}
	s := history.NewRedis(client, opts)
	t.Cleanup(func() { s.Close() })
	return s, client, addr
}

// TestRedisEncoding checks that the stream holds the canonical encoding of
// the message with its seq, the bytes that pub/sub carries.
func TestRedisEncoding(t *testing.T) {
	s, client, _ := newRedis(t, history.RedisOptions{Prefix: "enc"})
	ctx := context.Background()
	for i, msg := range []*corralv1.Message{
		newMsg("r", 1, 1),
		{Room: "r"},
		{Room: "r", Payload: make([]byte, 300), Id: "x"},
	} {
		if _, err := s.Append(ctx, "r", msg, ""); err != nil {
			t.Fatal(err)
		}
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := client.Do(ctx, client.B().Xrange().Key("enc:{r}:log").Start("-").End("+").Build()).AsXRange()
		if err != nil {
			t.Fatal(err)
		}
		e := entries[i]
		if e.ID != strconv.FormatUint(msg.GetSeq(), 10)+"-0" {
			t.Errorf("entry id %q for seq %d", e.ID, msg.GetSeq())
		}
		if e.FieldValues["m"] != string(want) {
			t.Errorf("seq %d stored %x, want %x", msg.GetSeq(), e.FieldValues["m"], want)
		}
	}
	// Seq 300 needs a two-byte varint.
	for range 297 {
		if _, err := s.Append(ctx, "r", &corralv1.Message{Room: "r", Id: "y"}, ""); err != nil {
			t.Fatal(err)
		}
	}
	p, err := s.Read(ctx, history.Query{Room: "r", Reverse: true, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Messages[0]; got.GetSeq() != 300 || got.GetId() != "y" || got.GetRoom() != "r" {
		t.Fatalf("newest message %v", got)
	}
}

func TestRedisExpiry(t *testing.T) {
	s, client, _ := newRedis(t, history.RedisOptions{Prefix: "ttl", TTL: time.Hour, DedupeWindow: time.Minute})
	ctx := context.Background()
	if _, err := s.Append(ctx, "r", newMsg("r", 0, 0), "k"); err != nil {
		t.Fatal(err)
	}
	tests := map[string]time.Duration{
		"ttl:{r}:seq":      time.Hour,
		"ttl:{r}:log":      time.Hour,
		"ttl:{r}:epoch":    time.Hour,
		"ttl:{r}:dedupe:k": time.Minute,
	}
	for key, want := range tests {
		t.Run(key, func(t *testing.T) {
			ms, err := client.Do(ctx, client.B().Pttl().Key(key).Build()).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			if got := time.Duration(ms) * time.Millisecond; got <= want-time.Minute/2 || got > want {
				t.Errorf("PTTL %s = %v, want about %v", key, got, want)
			}
		})
	}
}

func TestRedisDedupeWindow(t *testing.T) {
	s, _, _ := newRedis(t, history.RedisOptions{DedupeWindow: 500 * time.Millisecond})
	ctx := context.Background()
	if res, err := s.Append(ctx, "r", newMsg("r", 0, 0), "k"); err != nil || res.Seq != 1 {
		t.Fatalf("first: %+v %v", res, err)
	}
	if res, err := s.Append(ctx, "r", newMsg("r", 0, 0), "k"); err != nil || res.Seq != 1 || !res.Duplicate {
		t.Fatalf("within the window: %+v %v", res, err)
	}
	// Once the window passes, the same key appends anew; until then each
	// try is a duplicate that appends nothing.
	var res history.AppendResult
	var err error
	eventually.True(t, 10*time.Second, func() bool {
		res, err = s.Append(ctx, "r", newMsg("r", 0, 0), "k")
		return err != nil || !res.Duplicate
	}, "the dedupe window to pass")
	if err != nil || res.Seq != 2 || res.Duplicate {
		t.Fatalf("after window: %+v %v", res, err)
	}
}

// TestRedisLostHistory checks that a lost history (flushed, or partly
// evicted) gets a new epoch and starts again at seq 1.
func TestRedisLostHistory(t *testing.T) {
	tests := map[string]func(t *testing.T, c rueidis.Client, addr, prefix string){
		"flushall": func(t *testing.T, c rueidis.Client, addr, prefix string) {
			if redistest.Private(addr) {
				mustDo(t, c, c.B().Flushall().Build())
				return
			}
			// A shared REDIS_URL server: drop this test's keys only.
			for _, k := range []string{"seq", "log", "epoch", "dedupe:k"} {
				mustDo(t, c, c.B().Del().Key(prefix+":{r}:"+k).Build())
			}
		},
		"seq evicted": func(t *testing.T, c rueidis.Client, addr, prefix string) {
			mustDo(t, c, c.B().Del().Key(prefix+":{r}:seq").Build())
		},
		"epoch evicted": func(t *testing.T, c rueidis.Client, addr, prefix string) {
			mustDo(t, c, c.B().Del().Key(prefix+":{r}:epoch").Build())
		},
	}
	for name, lose := range tests {
		t.Run(name, func(t *testing.T) {
			prefix := redistest.Prefix(t)
			s, client, addr := newRedis(t, history.RedisOptions{Prefix: prefix})
			ctx := context.Background()
			for i := range 3 {
				if _, err := s.Append(ctx, "r", newMsg("r", 0, i), "k"); err != nil {
					t.Fatal(err)
				}
			}
			before, err := s.State(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			if again, _ := s.State(ctx, "r"); again != before {
				t.Fatalf("state changed without loss: %+v then %+v", before, again)
			}
			lose(t, client, addr, prefix)
			after, err := s.State(ctx, "r")
			if err != nil {
				t.Fatal(err)
			}
			if after.Epoch == before.Epoch || after.Epoch == "" || after.Last != 0 || after.First != 0 {
				t.Fatalf("after loss: %+v, before: %+v", after, before)
			}
			// The old dedupe key belongs to the old epoch.
			res, err := s.Append(ctx, "r", newMsg("r", 0, 9), "k")
			if err != nil {
				t.Fatal(err)
			}
			if want := (history.AppendResult{Seq: 1, Epoch: after.Epoch}); res != want {
				t.Fatalf("append after loss = %+v, want %+v", res, want)
			}
			p, err := s.Read(ctx, history.Query{Room: "r"})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(seqs(p.Messages), []uint64{1}) {
				t.Fatalf("history after loss: %v", seqs(p.Messages))
			}
		})
	}
}

func mustDo(t *testing.T, c rueidis.Client, cmd rueidis.Completed) {
	t.Helper()
	if err := c.Do(context.Background(), cmd).Error(); err != nil {
		t.Fatal(err)
	}
}

// collector gathers what a subscription delivers.
type collector struct {
	mu   sync.Mutex // guards the following fields
	msgs []*corralv1.Message
	gaps []string // rooms signalled with a nil message
}

func (c *collector) handle(room string, msg *corralv1.Message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if msg == nil {
		c.gaps = append(c.gaps, room)
		return
	}
	if msg.GetRoom() != room {
		panic("room mismatch")
	}
	c.msgs = append(c.msgs, msg)
}

func (c *collector) snapshot() ([]*corralv1.Message, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.msgs), slices.Clone(c.gaps)
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventually.True(t, 10*time.Second, cond, "%s", what)
}

// TestRedisPubSubOrder has two independent stores (two processes' worth)
// append concurrently into one room; a subscriber sees 1..N in order.
func TestRedisPubSubOrder(t *testing.T) {
	addr := redistest.Start(t)
	prefix := redistest.Prefix(t)
	var cores [2]*history.Redis
	for i := range cores {
		cores[i] = history.NewRedis(redistest.Client(t, addr), history.RedisOptions{Prefix: prefix})
		t.Cleanup(func() { cores[i].Close() })
	}
	var got collector
	sub, err := cores[0].Subscribe(context.Background(), got.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := sub.Add(context.Background(), "r", "quiet"); err != nil {
		t.Fatal(err)
	}
	const perWriter, writersPerCore = 250, 4
	const n = perWriter * writersPerCore * len(cores)
	var wg sync.WaitGroup
	for c, core := range cores {
		for w := range writersPerCore {
			wg.Go(func() {
				for i := range perWriter {
					if _, err := core.Append(context.Background(), "r", newMsg("r", c*10+w, i), ""); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	waitFor(t, "all messages", func() bool { msgs, _ := got.snapshot(); return len(msgs) >= n })
	msgs, gaps := got.snapshot()
	if !slices.Equal(seqs(msgs), seqRange(1, uint64(n))) {
		t.Fatalf("subscriber saw %d messages out of order: %v", len(msgs), seqs(msgs))
	}
	if len(gaps) != 0 {
		t.Fatalf("gap signals %v without a reconnect", gaps)
	}
	p, err := cores[1].Read(context.Background(), history.Query{Room: "r", Reverse: true, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(p.Messages[0], msgs[n-1]) {
		t.Fatalf("history holds %v, pub/sub carried %v", p.Messages[0], msgs[n-1])
	}
}

func TestRedisSubscriptionRemove(t *testing.T) {
	s, _, _ := newRedis(t, history.RedisOptions{})
	ctx := context.Background()
	var got collector
	sub, err := s.Subscribe(ctx, got.handle)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Add(ctx, "a", "b"); err != nil {
		t.Fatal(err)
	}
	if err := sub.Remove(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	// Room b last: pub/sub keeps order on the connection, so once b's
	// message is in, a's would have been too.
	for _, room := range []string{"a", "c", "b"} {
		if _, err := s.Append(ctx, room, newMsg(room, 0, 0), ""); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "room b", func() bool { msgs, _ := got.snapshot(); return len(msgs) > 0 })
	msgs, _ := got.snapshot()
	for _, m := range msgs {
		if m.GetRoom() != "b" {
			t.Errorf("delivered a message of room %q", m.GetRoom())
		}
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sub.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := sub.Add(ctx, "x"); err == nil {
		t.Fatal("Add after Close succeeded")
	}
}

// TestRedisRestart kills Redis under a subscription: the history comes back
// under a new epoch, and the subscription reconnects, signals the possible
// gap, and delivers again.
func TestRedisRestart(t *testing.T) {
	srv := redistest.StartProcess(t, 0)
	client := redistest.Client(t, srv.Addr())
	s := history.NewRedis(client, history.RedisOptions{})
	defer s.Close()
	ctx := context.Background()
	var got collector
	sub, err := s.Subscribe(ctx, got.handle)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Add(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	first, err := s.Append(ctx, "r", newMsg("r", 0, 0), "")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "first message", func() bool { msgs, _ := got.snapshot(); return len(msgs) == 1 })

	srv.Restart()
	waitFor(t, "gap signal", func() bool { _, gaps := got.snapshot(); return slices.Equal(gaps, []string{"r"}) })

	var res history.AppendResult
	waitFor(t, "append after restart", func() bool {
		res, err = s.Append(ctx, "r", newMsg("r", 0, 1), "")
		return err == nil
	})
	if res.Seq != 1 || res.Epoch == first.Epoch {
		t.Fatalf("append after restart = %+v, before %+v", res, first)
	}
	waitFor(t, "message after restart", func() bool { msgs, _ := got.snapshot(); return len(msgs) == 2 })
}

// TestRedisBusy blocks one call inside Redis (CLIENT PAUSE) with
// MaxInFlight 1: the next call fails at once with ErrBusy.
func TestRedisBusy(t *testing.T) {
	s, _, addr := newRedis(t, history.RedisOptions{MaxInFlight: 1})
	admin := redistest.Client(t, addr)
	ctx := context.Background()
	if _, err := s.State(ctx, "r"); err != nil { // load the scripts
		t.Fatal(err)
	}
	mustDo(t, admin, admin.B().ClientPause().Timeout(10000).Write().Build())
	done := make(chan error, 1)
	go func() {
		_, err := s.Append(ctx, "r", newMsg("r", 0, 0), "")
		done <- err
	}()
	waitFor(t, "a call in flight", func() bool { return history.InFlight(s) == 1 })

	start := time.Now()
	_, err := s.Append(ctx, "r", newMsg("r", 0, 1), "")
	if !errors.Is(err, history.ErrBusy) {
		t.Fatalf("Append past the bound: %v, want ErrBusy", err)
	}
	if _, err := s.Read(ctx, history.Query{Room: "r"}); !errors.Is(err, history.ErrBusy) {
		t.Fatalf("Read past the bound: %v, want ErrBusy", err)
	}
	if _, err := s.State(ctx, "r"); !errors.Is(err, history.ErrBusy) {
		t.Fatalf("State past the bound: %v, want ErrBusy", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("ErrBusy took %v", d)
	}
	mustDo(t, admin, admin.B().ClientUnpause().Build())
	if err := <-done; err != nil {
		t.Fatalf("blocked Append: %v", err)
	}
	if res, err := s.Append(ctx, "r", newMsg("r", 0, 1), ""); err != nil || res.Seq != 2 {
		t.Fatalf("Append after the block: %+v %v", res, err)
	}
}

func TestRedisClosed(t *testing.T) {
	s, _, _ := newRedis(t, history.RedisOptions{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Append(context.Background(), "r", newMsg("r", 0, 0), ""); err == nil {
		t.Fatal("Append after Close succeeded")
	}
}

// TestRedisPeekCreatesNothing: reads for the internal API (Peek) of rooms
// that never existed must not grow Redis, and must say the room has no
// history (an empty epoch); a real room peeks as it reads.
func TestRedisPeekCreatesNothing(t *testing.T) {
	s, client, _ := newRedis(t, history.RedisOptions{})
	ctx := context.Background()
	res, err := s.Append(ctx, "real", newMsg("real", 1, 1), "")
	if err != nil {
		t.Fatal(err)
	}
	dbsize := func() int64 {
		t.Helper()
		n, err := client.Do(ctx, client.B().Dbsize().Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := dbsize()
	qs := make([]history.Query, 0, 100)
	for i := range 1000 {
		room := fmt.Sprintf("made-up-%d", i)
		if i%2 == 0 {
			p, err := s.Read(ctx, history.Query{Room: room, Peek: true, Reverse: i%4 == 0})
			if err != nil {
				t.Fatal(err)
			}
			if p.Epoch != "" || p.Last != 0 || p.First != 0 || len(p.Messages) != 0 {
				t.Fatalf("peek of %q = %+v, want an empty page without epoch", room, p)
			}
			continue
		}
		qs = append(qs, history.Query{Room: room, Peek: true})
		if len(qs) == cap(qs) {
			pages, err := s.ReadMany(ctx, qs)
			if err != nil {
				t.Fatal(err)
			}
			for j, p := range pages {
				if p.Epoch != "" || p.Last != 0 || len(p.Messages) != 0 {
					t.Fatalf("peek of %q = %+v, want an empty page without epoch", qs[j].Room, p)
				}
			}
			qs = qs[:0]
		}
	}
	if after := dbsize(); after != before {
		t.Fatalf("reading 1,000 made-up rooms changed the key count from %d to %d", before, after)
	}
	p, err := s.Read(ctx, history.Query{Room: "real", Peek: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.Epoch != res.Epoch || p.Last != 1 || len(p.Messages) != 1 {
		t.Fatalf("peek of a real room = %+v, want epoch %q and its one message", p, res.Epoch)
	}
}
