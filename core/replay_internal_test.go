package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/corral-rt/corral/core/replay"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
)

// TestJoinAtPosition covers goLive's decisions for a join at a position:
// live from now, nothing missed, a replay of what was missed, or a Reset
// when the position cannot be continued (another epoch, ahead of the
// room, or older than what history retains).
func TestJoinAtPosition(t *testing.T) {
	for name, tc := range map[string]struct {
		published int // messages in the room before the join (history keeps 5)
		since     uint64
		epoch     string // "" means the room's own
		noPos     bool   // a plain join, without a position
		want      []string
	}{
		"no position":       {published: 3, noPos: true, want: []string{"joined 3"}},
		"at the head":       {published: 3, since: 3, want: []string{"joined 3"}},
		"missed two":        {published: 3, since: 1, want: []string{"joined 1 replay", "batch [2 3]", "replay-end 3"}},
		"another epoch":     {published: 3, since: 1, epoch: "other", want: []string{"reset 3", "joined 3"}},
		"ahead of the room": {published: 3, since: 9, want: []string{"reset 3", "joined 3"}},
		"trimmed":           {published: 8, since: 1, want: []string{"reset 8", "joined 8"}},
		"just retained":     {published: 8, since: 3, want: []string{"joined 3 replay", "batch [4 5 6 7 8]", "replay-end 8"}},
	} {
		t.Run(name, func(t *testing.T) {
			c := newTestCore(t, Config{History: history.NewMemory(history.MemoryOptions{MaxLen: 5})})
			got := publishThenJoin(t, context.Background(), c, tc.published, len(tc.want), func(epoch string) *corralv1.Join {
				j := &corralv1.Join{Room: "r"}
				if tc.epoch != "" {
					epoch = tc.epoch
				}
				if !tc.noPos {
					j.SinceSeq, j.Epoch, j.FromPosition = tc.since, epoch, true
				}
				return j
			})
			if !slices.Equal(got, tc.want) {
				t.Fatalf("frames %q, want %q", got, tc.want)
			}
		})
	}
}

// describe names a join's frame by kind and position.
func describe(f *corralv1.ServerFrame) string {
	switch {
	case f.GetJoined() != nil:
		if f.GetJoined().GetReplay() {
			return fmt.Sprintf("joined %d replay", f.GetJoined().GetSeq())
		}
		return fmt.Sprintf("joined %d", f.GetJoined().GetSeq())
	case f.GetReset_() != nil:
		return fmt.Sprintf("reset %d", f.GetReset_().GetSeq())
	case f.GetBatch() != nil:
		var seqs []uint64
		for _, m := range f.GetBatch().GetFrames() {
			seqs = append(seqs, m.GetMessage().GetSeq())
		}
		return fmt.Sprintf("batch %v", seqs)
	case f.GetReplayEnd() != nil:
		return fmt.Sprintf("replay-end %d", f.GetReplayEnd().GetSeq())
	}
	return fmt.Sprintf("%T", f.GetKind())
}

// TestReadJoinedConcurrent: joins reading at once all get their own pages,
// whichever batch they went in.
func TestReadJoinedConcurrent(t *testing.T) {
	c := newTestCore(t, Config{})
	ctx := context.Background()
	appendN(t, c.hist, "r", 20)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			after := uint64(i % 20)
			pages, err := c.missed.Read(ctx, []history.Query{{Room: "r", After: after, Limit: int(20 - after)}})
			if err != nil {
				t.Error(err)
				return
			}
			if got := seqs(pages[0].Messages); len(got) != int(20-after) || (len(got) > 0 && got[0] != after+1) {
				t.Errorf("after %d: got %v", after, got)
			}
		})
	}
	wg.Wait()
}

// TestMissedReadsBatched: the joins' reads asked while a batch is in
// flight wait for it, then go to the store together, in one ReadMany
// that holds one query per room (their ranges merged); each gets the page
// a read of its own gives.
func TestMissedReadsBatched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, h := newGatedCore(t, replay.MaxQueued)
		// The bubble's clock: a read that is never served fails the test
		// in a minute of it, not in the test binary's timeout.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		appendN(t, h, "a", 30)
		appendN(t, h, "b", 30)

		first := make(chan error, 1)
		go func() {
			_, err := c.missed.Read(ctx, []history.Query{{Room: "a", After: 0, Limit: 1}})
			first <- err
		}()
		synctest.Wait() // the first batch is in flight, alone, held
		asks := []history.Query{
			{Room: "a", After: 2, Limit: 3},
			{Room: "b", After: 5, Limit: 5},
			{Room: "a", After: 10, Limit: 5},
			{Room: "b", After: 20, Limit: 10},
			{Room: "a", After: 0, Limit: 20},
			{Room: "b", After: 25, Limit: 5},
		}
		type answer struct {
			q    history.Query
			page history.Page
			err  error
		}
		answers := make(chan answer, len(asks))
		for _, q := range asks {
			go func() {
				pages, err := c.missed.Read(ctx, []history.Query{q})
				a := answer{q: q, err: err}
				if err == nil {
					a.page = pages[0]
				}
				answers <- a
			}()
		}
		synctest.Wait() // all queued behind the first batch
		if n := c.missed.InFlight(); n != int64(1+len(asks)) {
			t.Fatalf("%d calls in flight or queued, want %d", n, 1+len(asks))
		}
		close(h.gate)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		for range asks {
			a := <-answers
			if a.err != nil {
				t.Fatalf("%+v: %v", a.q, a.err)
			}
			sameAsOwnRead(t, h, a.q, a.page)
		}
		reads := h.reads()
		if len(reads) != 2 {
			t.Fatalf("%d ReadMany calls %v, want 2: the first alone, then the six together", len(reads), reads)
		}
		got := slices.Clone(reads[1])
		slices.SortFunc(got, func(x, y history.Query) int { return strings.Compare(x.Room, y.Room) })
		want := []history.Query{{Room: "a", After: 0, Limit: 20}, {Room: "b", After: 5, Limit: 25}}
		if !slices.Equal(got, want) {
			t.Fatalf("second ReadMany %+v, want one query per room, %+v", got, want)
		}
		synctest.Wait() // Finish frees a slot after its caller has its reply
		if n := c.missed.InFlight(); n != 0 {
			t.Fatalf("%d slots still taken", n)
		}
	})
}

// TestMissedReadsBusy: past the bound of the queued replay reads, a join
// at a position is not replayed: the client gets Reset (never a silent
// gap), the drop is counted as replay_busy, and the reads queued before
// it are served.
func TestMissedReadsBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, h := newGatedCore(t, 2)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		held := make(chan error, 2)
		for range 2 { // one in flight, one queued: the bound
			go func() {
				_, err := c.missed.Read(ctx, []history.Query{{Room: "r", After: 0, Limit: 3}})
				held <- err
			}()
			synctest.Wait()
		}
		if _, err := c.missed.Read(ctx, []history.Query{{Room: "r", After: 1, Limit: 2}}); !errors.Is(err, replay.ErrBusy) || !errors.Is(err, history.ErrBusy) {
			t.Fatalf("Read past the bound: %v, want replay.ErrBusy (a history.ErrBusy)", err)
		}

		if got, want := joinMissingTwo(t, ctx, c), []string{"reset 3", "joined 3"}; !slices.Equal(got, want) {
			t.Fatalf("join past the bound: frames %q, want %q", got, want)
		}
		if busy, failed := replayDrops(c); busy != 1 || failed != 0 {
			t.Fatalf("dropped{replay_busy} = %v, {replay_failed} = %v; want 1, 0", busy, failed)
		}
		if n := counterValue(c.metrics.storeErrors.WithLabelValues("read_many", "busy")); n != 1 {
			t.Fatalf("store_errors{read_many,busy} = %v, want 1", n)
		}

		close(h.gate)
		for range 2 {
			if err := <-held; err != nil {
				t.Fatalf("a read queued within the bound: %v", err)
			}
		}
		synctest.Wait() // Finish frees a slot after its caller has its reply
		if n := c.missed.InFlight(); n != 0 {
			t.Fatalf("%d slots still taken", n)
		}
	})
}

// TestReplayReadFails: a join at a position whose history read fails is
// not replayed: the client gets Reset (never a silent gap) and the drop is
// counted as replay_failed.
func TestReplayReadFails(t *testing.T) {
	h := &failingHistory{Memory: history.NewMemory(history.MemoryOptions{})}
	defer h.Close()
	c := newTestCore(t, Config{History: h, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if got, want := joinMissingTwo(t, context.Background(), c), []string{"reset 3", "joined 3"}; !slices.Equal(got, want) {
		t.Fatalf("join with the read failing: frames %q, want %q", got, want)
	}
	if busy, failed := replayDrops(c); busy != 0 || failed != 1 {
		t.Fatalf("dropped{replay_busy} = %v, {replay_failed} = %v; want 0, 1", busy, failed)
	}
}

// joinMissingTwo publishes three messages to room r, then a session joins
// r at seq 1 (two missed); it returns the join's two frames, described.
func joinMissingTwo(t *testing.T, ctx context.Context, c *Core) []string {
	t.Helper()
	return publishThenJoin(t, ctx, c, 3, 2, func(epoch string) *corralv1.Join {
		return &corralv1.Join{Room: "r", SinceSeq: 1, Epoch: epoch, FromPosition: true}
	})
}

// publishThenJoin publishes n messages to room r, then a new session
// sends the join that join makes of r's epoch; it returns the first want
// frames the session gets after Welcome, described.
func publishThenJoin(t *testing.T, ctx context.Context, c *Core, n, want int, join func(epoch string) *corralv1.Join) []string {
	t.Helper()
	var epoch string
	for range n {
		res, err := apiPublish(ctx, c, "r", []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		epoch = res.Epoch
	}
	l := fakeLink(c)
	id := &corralv1.Identity{UserId: "u", Join: []string{"*"}}
	s := c.life.Attach(ctx, l, 1, nil, &linkv1.Attach{Identity: id, Hello: &corralv1.Hello{}})
	if s == nil {
		t.Fatal("attach refused")
	}
	frames(t, l, 1) // Welcome
	c.handleClient(ctx, s, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: join(epoch)}})
	var got []string
	for _, f := range frames(t, l, want) {
		got = append(got, describe(f))
	}
	return got
}

// replayDrops is corral_core_dropped_total's replay reasons.
func replayDrops(c *Core) (busy, failed float64) {
	return counterValue(c.metrics.dropped.WithLabelValues(droppedReplayBusy.String())),
		counterValue(c.metrics.dropped.WithLabelValues(droppedReplayFailed.String()))
}

// failingHistory is the memory history whose ReadMany fails.
type failingHistory struct{ *history.Memory }

func (*failingHistory) ReadMany(context.Context, []history.Query) ([]history.Page, error) {
	return nil, errors.New("test: read failed")
}

// gatedHistory is the memory history whose ReadMany records its queries
// and waits until gate is closed (or its ctx ends), so that tests can
// queue reads behind a batch in flight.
type gatedHistory struct {
	*history.Memory
	gate chan struct{}

	mu      sync.Mutex // guards the following field
	readLog [][]history.Query
}

// newGatedCore returns a core on a gatedHistory whose replay reads are
// bounded by limit calls queued or in flight; t's cleanup closes both.
func newGatedCore(t *testing.T, limit int) (*Core, *gatedHistory) {
	h := &gatedHistory{Memory: history.NewMemory(history.MemoryOptions{}), gate: make(chan struct{})}
	t.Cleanup(func() { h.Close() })
	c := New(Config{History: h, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(func() { c.Close() })
	c.missed.Close()
	c.missed = c.newMissedReads(replay.MaxBatch, limit)
	return c, h
}

func (h *gatedHistory) ReadMany(ctx context.Context, qs []history.Query) ([]history.Page, error) {
	h.mu.Lock()
	h.readLog = append(h.readLog, slices.Clone(qs))
	h.mu.Unlock()
	select {
	case <-h.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return h.Memory.ReadMany(ctx, qs)
}

// reads is the queries of each ReadMany so far.
func (h *gatedHistory) reads() [][]history.Query {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.readLog)
}

// appendN appends n messages to room.
func appendN(t testing.TB, h history.Store, room string, n int) {
	t.Helper()
	for range n {
		if _, err := h.Append(context.Background(), room, &corralv1.Message{Room: room, Payload: []byte(`{}`)}, ""); err != nil {
			t.Fatal(err)
		}
	}
}

// sameAsOwnRead fails t unless got is the page a read of q alone gives.
func sameAsOwnRead(t *testing.T, h history.Store, q history.Query, got history.Page) {
	t.Helper()
	want, err := h.Read(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != want.State || got.More != want.More || !slices.Equal(seqs(got.Messages), seqs(want.Messages)) {
		t.Errorf("query %+v: got %v (state %+v, more %v), want %v (state %+v, more %v)", q,
			seqs(got.Messages), got.State, got.More, seqs(want.Messages), want.State, want.More)
	}
}

func seqs(ms []*corralv1.Message) []uint64 {
	out := make([]uint64, len(ms))
	for i, m := range ms {
		out[i] = m.GetSeq()
	}
	return out
}
