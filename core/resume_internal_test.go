package core

import (
	"context"
	"slices"
	"sync"
	"testing"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
)

// TestReadBatchSameAsOwnReads: the joins' batched history reads
// (readBatch, merging the ranges of one room) give every query the page a
// read of its own gives: the same messages, state and More.
func TestReadBatchSameAsOwnReads(t *testing.T) {
	c := newTestCore(t, Config{History: history.NewMemory(history.MemoryOptions{MaxLen: 5000})})
	ctx := context.Background()
	for room, n := range map[string]int{"a": 50, "b": 1500, "c": 3} {
		for range n {
			if _, err := c.hist.Append(ctx, room, &corralv1.Message{Room: room, Payload: []byte(`{}`)}, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	calls := []*missedCall{
		{qs: []history.Query{{Room: "a", After: 10, Limit: 5}, {Room: "b", After: 0, Limit: 1000}}},
		{qs: []history.Query{{Room: "a", After: 0, Limit: 50}}},
		{qs: []history.Query{{Room: "a", After: 30, Limit: 30}, {Room: "c", After: 1, Limit: 2}}},
		{qs: []history.Query{{Room: "b", After: 900, Limit: 600}}}, // with the first b: wider than a page
		{qs: []history.Query{{Room: "a", After: 45, Limit: 1}, {Room: "b", Reverse: true, Limit: 10}}},
		{qs: []history.Query{{Room: "c", After: 3, Limit: 1}, {Room: "nobody", After: 0, Limit: 5}}},
		{qs: []history.Query{{Room: "a", After: 60, Limit: 5}}}, // past the room's last
	}
	for _, call := range calls {
		call.done = make(chan struct{})
	}
	c.readBatch(ctx, calls)
	for i, call := range calls {
		if call.err != nil {
			t.Fatalf("call %d: %v", i, call.err)
		}
		for j, q := range call.qs {
			want, err := c.hist.Read(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			got := call.pages[j]
			if got.State != want.State || got.More != want.More || !slices.Equal(seqs(got.Messages), seqs(want.Messages)) {
				t.Errorf("call %d query %+v: got %v (state %+v, more %v), want %v (state %+v, more %v)", i, q,
					seqs(got.Messages), got.State, got.More, seqs(want.Messages), want.State, want.More)
			}
		}
	}
}

// TestReadJoinedConcurrent: joins reading at once all get their own pages,
// whichever batch they went in.
func TestReadJoinedConcurrent(t *testing.T) {
	c := newTestCore(t, Config{})
	ctx := context.Background()
	for range 20 {
		if _, err := c.hist.Append(ctx, "r", &corralv1.Message{Room: "r", Payload: []byte(`{}`)}, ""); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			after := uint64(i % 20)
			pages, err := c.readJoined(ctx, []history.Query{{Room: "r", After: after, Limit: int(20 - after)}})
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

func seqs(ms []*corralv1.Message) []uint64 {
	out := make([]uint64, len(ms))
	for i, m := range ms {
		out[i] = m.GetSeq()
	}
	return out
}
