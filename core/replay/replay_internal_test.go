package replay

import (
	"context"
	"slices"
	"testing"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
)

// TestSlicePage: a forward page cut to (after, upto] is what a read of
// that range alone would have returned, More included.
func TestSlicePage(t *testing.T) {
	var ms []*corralv1.Message
	for seq := uint64(1); seq <= 6; seq++ {
		ms = append(ms, &corralv1.Message{Seq: seq})
	}
	p := history.Page{State: history.State{Epoch: "e"}, Messages: ms}
	for name, tc := range map[string]struct {
		after, upto uint64
		want        []uint64
		more        bool
	}{
		"middle":     {after: 2, upto: 4, want: []uint64{3, 4}, more: true},
		"to the end": {after: 4, upto: 6, want: []uint64{5, 6}, more: false},
		"empty":      {after: 6, upto: 9, want: nil, more: false},
	} {
		t.Run(name, func(t *testing.T) {
			got := slicePage(p, tc.after, tc.upto)
			var seqs []uint64
			for _, m := range got.Messages {
				seqs = append(seqs, m.GetSeq())
			}
			if !slices.Equal(seqs, tc.want) || got.More != tc.more || got.Epoch != "e" {
				t.Fatalf("slicePage(%d, %d) = %v more %v epoch %q, want %v more %v", tc.after, tc.upto, seqs, got.More, got.Epoch, tc.want, tc.more)
			}
		})
	}
}

// TestReadMergedSameAsOwnReads: the joins' batched history reads
// (readMerged, merging the ranges of one room) give every query the page
// a read of its own gives: the same messages, state and More.
func TestReadMergedSameAsOwnReads(t *testing.T) {
	h := history.NewMemory(history.MemoryOptions{MaxLen: 5000})
	t.Cleanup(func() { h.Close() })
	ctx := context.Background()
	r := New(Options{Store: h, Max: MaxBatch, Limit: MaxQueued, Ctx: ctx})
	t.Cleanup(r.Close)
	for room, n := range map[string]int{"a": 50, "b": 1500, "c": 3} {
		appendN(t, h, room, n)
	}
	qss := [][]history.Query{
		{{Room: "a", After: 10, Limit: 5}, {Room: "b", After: 0, Limit: 1000}},
		{{Room: "a", After: 0, Limit: 50}},
		{{Room: "a", After: 30, Limit: 30}, {Room: "c", After: 1, Limit: 2}},
		{{Room: "b", After: 900, Limit: 600}}, // with the first b: wider than a page
		{{Room: "a", After: 45, Limit: 1}, {Room: "b", Reverse: true, Limit: 10}},
		{{Room: "c", After: 3, Limit: 1}, {Room: "nobody", After: 0, Limit: 5}},
		{{Room: "a", After: 60, Limit: 5}}, // past the room's last
	}
	pages, err := r.readMerged(ctx, qss)
	if err != nil {
		t.Fatal(err)
	}
	for i, qs := range qss {
		for j, q := range qs {
			sameAsOwnRead(t, h, q, pages[i][j])
		}
	}
}

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
