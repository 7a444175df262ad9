package events_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/corral-rt/corral/events"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/internal/redistest"
)

// kit is one kind of log under test, with a history store that commits
// its message events into it.
type kit struct {
	log   events.Log
	hist  history.Store
	reset func(t *testing.T) // loses the log's contents
	// unordered: a room's message events may enter the log out of seq
	// order (Redis Cluster writes them after the append).
	unordered bool
}

type newKit func(t *testing.T, maxLen int) *kit

func memoryKit(t *testing.T, maxLen int) *kit {
	k := &kit{}
	mk := func() {
		m := events.NewMemory(events.MemoryOptions{MaxLen: maxLen})
		k.log = m
		k.hist = history.NewMemory(history.MemoryOptions{Events: m})
	}
	mk()
	k.reset = func(*testing.T) { mk() } // a restart
	return k
}

func redisKit(t *testing.T, maxLen int) *kit {
	addr := redistest.Start(t)
	client := redistest.Client(t, addr)
	prefix := redistest.Prefix(t)
	r := events.NewRedis(client, events.RedisOptions{MaxLen: maxLen, Prefix: prefix})
	h := history.NewRedis(client, history.RedisOptions{Prefix: prefix, Events: r})
	t.Cleanup(func() { h.Close() })
	return &kit{log: r, hist: h, reset: func(t *testing.T) {
		if err := client.Do(context.Background(), client.B().Del().Key(r.Key()).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}}
}

// clusterKit is redisKit on a Redis Cluster, where history writes message
// events after the append instead of in its script. Its kits share the
// cluster, each under a prefix of its own.
func clusterKit(cluster *redistest.Cluster) newKit {
	return func(t *testing.T, maxLen int) *kit {
		return clusterKitOn(t, cluster, maxLen)
	}
}

func clusterKitOn(t *testing.T, cluster *redistest.Cluster, maxLen int) *kit {
	client := cluster.Client(t)
	prefix := redistest.Prefix(t)
	r := events.NewRedis(client, events.RedisOptions{MaxLen: maxLen, Prefix: prefix})
	h := history.NewRedis(client, history.RedisOptions{Prefix: prefix, Events: r})
	t.Cleanup(func() { h.Close() })
	return &kit{log: r, hist: h, unordered: true, reset: func(t *testing.T) {
		if err := client.Do(context.Background(), client.B().Del().Key(r.Key()).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}}
}

func TestLogs(t *testing.T) {
	kits := map[string]newKit{"memory": memoryKit, "redis": redisKit, "cluster": clusterKit(redistest.StartCluster(t))}
	tests := map[string]func(*testing.T, newKit){
		"ResumeExactlyOnce":   testResumeExactlyOnce,
		"MessagesWithHistory": testMessagesWithHistory,
		"WaitWakes":           testWaitWakes,
		"Trimmed":             testTrimmed,
		"Reset":               testReset,
		"BadPosition":         testBadPosition,
		"ConcurrentAppends":   testConcurrentAppends,
	}
	for kname, nk := range kits {
		t.Run(kname, func(t *testing.T) {
			for name, fn := range tests {
				t.Run(name, func(t *testing.T) { fn(t, nk) })
			}
		})
	}
}

func joined(room, user string) *corralv1.Event {
	return &corralv1.Event{Room: room, TimeMs: time.Now().UnixMilli(), Kind: &corralv1.Event_Joined{Joined: &corralv1.MemberJoined{UserId: user, SessionId: "s-" + user}}}
}

func appendN(t *testing.T, l events.Log, room string, from, n int) {
	t.Helper()
	evs := make([]*corralv1.Event, n)
	for i := range evs {
		evs[i] = joined(room, fmt.Sprintf("u%d", from+i))
	}
	if err := l.Append(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
}

// readAll reads after pos until the log has nothing more.
func readAll(t *testing.T, l events.Log, pos string, limit int) ([]*corralv1.Event, string) {
	t.Helper()
	var out []*corralv1.Event
	for {
		evs, err := l.Read(context.Background(), pos, limit, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			return out, pos
		}
		out = append(out, evs...)
		pos = evs[len(evs)-1].GetPosition()
	}
}

func users(evs []*corralv1.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.GetJoined().GetUserId()
	}
	return out
}

func testResumeExactlyOnce(t *testing.T, nk newKit) {
	k := nk(t, 0)
	ctx := context.Background()
	start, err := k.log.Tail(ctx)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, k.log, "r", 0, 10)
	// A reader processes part of the log, "restarts", and resumes from the
	// last position it processed.
	first, err := k.log.Read(ctx, start, 4, 0)
	if err != nil || len(first) != 4 {
		t.Fatalf("read: %d events, %v", len(first), err)
	}
	appendN(t, k.log, "r", 10, 5)
	rest, _ := readAll(t, k.log, first[3].GetPosition(), 3)
	got := append(users(first), users(rest)...)
	if len(got) != 15 {
		t.Fatalf("got %d events: %v", len(got), got)
	}
	for i, u := range got {
		if u != fmt.Sprintf("u%d", i) {
			t.Fatalf("event %d is %s: %v", i, u, got)
		}
	}
	// From the oldest: everything; from the tail: nothing.
	all, _ := readAll(t, k.log, "", 0)
	if len(all) != 15 {
		t.Fatalf("from the oldest: %d events", len(all))
	}
	head, err := k.log.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fromHead, _ := readAll(t, k.log, head, 4); len(fromHead) != 15 || fromHead[0].GetPosition() != all[0].GetPosition() {
		t.Fatalf("from the head %q: %d events", head, len(fromHead))
	}
	tail, _ := k.log.Tail(ctx)
	if evs, err := k.log.Read(ctx, tail, 0, 0); err != nil || len(evs) != 0 {
		t.Fatalf("after the tail: %d events, %v", len(evs), err)
	}
	if tail != all[14].GetPosition() {
		t.Fatalf("tail %q, newest event at %q", tail, all[14].GetPosition())
	}
}

func testMessagesWithHistory(t *testing.T, nk newKit) {
	k := nk(t, 0)
	ctx := context.Background()
	start, _ := k.log.Tail(ctx)
	for i := range 3 {
		msg := &corralv1.Message{Room: "chat", Sender: "ann", Payload: fmt.Appendf(nil, "%d", i), TimeMs: 1700000000000}
		if _, err := k.hist.Append(ctx, "chat", msg, "k"+fmt.Sprint(i%2)); err != nil {
			t.Fatal(err)
		}
	}
	appendN(t, k.log, "chat", 0, 1)
	evs, _ := readAll(t, k.log, start, 0)
	// The third append repeated the first's dedupe key: not a message.
	if len(evs) != 3 {
		t.Fatalf("got %d events, want 2 messages and a join", len(evs))
	}
	for i, ev := range evs[:2] {
		m := ev.GetMessage()
		if m.GetSeq() != uint64(i+1) || ev.GetRoom() != "chat" || string(m.GetPayload()) != fmt.Sprint(i) || ev.GetTimeMs() != 1700000000000 {
			t.Fatalf("event %d: %v", i, ev)
		}
	}
	if evs[2].GetJoined() == nil {
		t.Fatalf("last event: %v", evs[2])
	}
}

func testWaitWakes(t *testing.T, nk newKit) {
	k := nk(t, 0)
	ctx := context.Background()
	tail, _ := k.log.Tail(ctx)
	begin := time.Now()
	if evs, err := k.log.Read(ctx, tail, 0, 50*time.Millisecond); err != nil || len(evs) != 0 {
		t.Fatalf("idle read: %d events, %v", len(evs), err)
	}
	if time.Since(begin) < 40*time.Millisecond {
		t.Fatal("idle read did not wait")
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		appendN(t, k.log, "r", 0, 1)
	}()
	begin = time.Now()
	evs, err := k.log.Read(ctx, tail, 0, 10*time.Second)
	if err != nil || len(evs) != 1 {
		t.Fatalf("read: %d events, %v", len(evs), err)
	}
	if time.Since(begin) > 5*time.Second {
		t.Fatal("the append did not wake the read")
	}
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := k.log.Read(cctx, evs[0].GetPosition(), 0, 10*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled read: %v", err)
	}
}

func testTrimmed(t *testing.T, nk newKit) {
	k := nk(t, 10)
	ctx := context.Background()
	start, _ := k.log.Tail(ctx)
	appendN(t, k.log, "r", 0, 1)
	evs, _ := readAll(t, k.log, start, 0)
	for i := 0; i < 1000; i += 100 {
		appendN(t, k.log, "r", i, 100)
	}
	for _, pos := range []string{start, evs[0].GetPosition()} {
		if _, err := k.log.Read(ctx, pos, 0, 0); !errors.Is(err, events.ErrGap) {
			t.Fatalf("read after trimmed %q: %v, want ErrGap", pos, err)
		}
	}
	// The oldest retained event is still a valid start, and so is the head.
	all, _ := readAll(t, k.log, "", 0)
	if len(all) == 0 || len(all) > 200 {
		t.Fatalf("retained %d events", len(all))
	}
	head, _ := k.log.Head(ctx)
	if fromHead, _ := readAll(t, k.log, head, 0); len(fromHead) != len(all) {
		t.Fatalf("from the head: %d of %d", len(fromHead), len(all))
	}
	rest, _ := readAll(t, k.log, all[0].GetPosition(), 0)
	if len(rest) != len(all)-1 {
		t.Fatalf("resumed %d of %d", len(rest), len(all)-1)
	}
	appendN(t, k.log, "r", 2000, 500) // trims the head's event
	if _, err := k.log.Read(ctx, head, 0, 0); !errors.Is(err, events.ErrGap) {
		t.Fatalf("read after a trimmed head: %v, want ErrGap", err)
	}
}

func testReset(t *testing.T, nk newKit) {
	k := nk(t, 0)
	ctx := context.Background()
	appendN(t, k.log, "r", 0, 5)
	evs, _ := readAll(t, k.log, "", 0)
	mid := evs[1].GetPosition()
	k.reset(t)
	appendN(t, k.log, "r", 100, 10) // the new log gets past the old position
	if _, err := k.log.Read(ctx, mid, 0, 0); !errors.Is(err, events.ErrGap) {
		t.Fatalf("read after a reset: %v, want ErrGap", err)
	}
}

func testBadPosition(t *testing.T, nk newKit) {
	k := nk(t, 0)
	for _, pos := range []string{"x", ".", "12", "abc.def", "1-2-3.x"} {
		if _, err := k.log.Read(context.Background(), pos, 0, 0); !errors.Is(err, events.ErrBadPosition) && !errors.Is(err, events.ErrGap) {
			t.Errorf("read after %q: %v", pos, err)
		}
	}
}

func testConcurrentAppends(t *testing.T, nk newKit) {
	k := nk(t, 0)
	ctx := context.Background()
	start, _ := k.log.Tail(ctx)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 25 {
				msg := &corralv1.Message{Room: fmt.Sprint("room", w%3), Payload: []byte("x")}
				if _, err := k.hist.Append(ctx, msg.Room, msg, ""); err != nil {
					t.Error(err)
				}
				appendN(t, k.log, msg.Room, w*100+i, 2)
			}
		})
	}
	wg.Wait()
	evs, _ := readAll(t, k.log, start, 7)
	if len(evs) != 8*25*3 {
		t.Fatalf("got %d events, want %d", len(evs), 8*25*3)
	}
	// Message events of a room are in seq order, or at least each seq is
	// there once.
	last := map[string]uint64{}
	seen := map[string]map[uint64]bool{}
	for _, ev := range evs {
		m := ev.GetMessage()
		if m == nil {
			continue
		}
		room := ev.GetRoom()
		if seen[room] == nil {
			seen[room] = map[uint64]bool{}
		}
		if seen[room][m.GetSeq()] {
			t.Fatalf("room %s: seq %d twice", room, m.GetSeq())
		}
		seen[room][m.GetSeq()] = true
		if !k.unordered && m.GetSeq() != last[room]+1 {
			t.Fatalf("room %s: seq %d after %d", room, m.GetSeq(), last[room])
		}
		last[room] = m.GetSeq()
	}
}
