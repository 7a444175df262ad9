package history_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"google.golang.org/protobuf/proto"
)

// newStoreFunc returns an empty store retaining at least maxLen messages
// per room (0: the default), closed when the test ends.
type newStoreFunc func(t *testing.T, maxLen int) history.Store

// testStore runs the conformance suite every Store passes.
func testStore(t *testing.T, newStore newStoreFunc) {
	tests := map[string]func(*testing.T, newStoreFunc){
		"ConcurrentAppend": testConcurrentAppend,
		"Dedupe":           testDedupe,
		"MaxLen":           testMaxLen,
		"Read":             testRead,
		"ReadEmpty":        testReadEmpty,
		"ReadMany":         testReadMany,
		"ReadBytes":        testReadBytes,
		"Epoch":            testEpoch,
		"BadRoom":          testBadRoom,
		"SenderInfo":       testSenderInfo,
		"SenderOrder":      testSenderOrder,
		"Grow":             testGrow,
		"GrowMidStream":    testGrowMidStream,
		"GrowRetry":        testGrowRetry,
		"GrowOpen":         testGrowOpen,
		"GrowFolded":       testGrowFolded,
	}
	for name, fn := range tests {
		t.Run(name, func(t *testing.T) { fn(t, newStore) })
	}
}

func newMsg(room string, writer, i int) *corralv1.Message {
	return &corralv1.Message{
		Room:    room,
		Sender:  fmt.Sprintf("user%d", writer),
		Payload: fmt.Appendf(nil, `{"w":%d,"i":%d}`, writer, i),
		TimeMs:  1700000000000 + int64(i),
		Id:      fmt.Sprintf("p%d-%d", writer, i),
	}
}

func mustAppend(t *testing.T, s history.Store, room string, n int) {
	t.Helper()
	for i := range n {
		if _, err := s.Append(context.Background(), room, newMsg(room, 0, i), ""); err != nil {
			t.Fatal(err)
		}
	}
}

func seqs(msgs []*corralv1.Message) []uint64 {
	out := make([]uint64, len(msgs))
	for i, m := range msgs {
		out[i] = m.GetSeq()
	}
	return out
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	if from <= to {
		for s := from; s <= to; s++ {
			out = append(out, s)
		}
	} else {
		for s := from; s >= to; s-- {
			out = append(out, s)
		}
	}
	return out
}

func testConcurrentAppend(t *testing.T, newStore newStoreFunc) {
	const writers, each = 8, 100
	s := newStore(t, 0)
	ctx := context.Background()
	got := make([][]uint64, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				msg := newMsg("r", w, i)
				res, err := s.Append(ctx, "r", msg, "")
				if err != nil {
					t.Error(err)
					return
				}
				if res.Seq != msg.GetSeq() || res.Duplicate {
					t.Errorf("result %+v, msg.Seq %d", res, msg.GetSeq())
				}
				got[w] = append(got[w], res.Seq)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// Each writer sees its own appends in order; together they are 1..N.
	owner := map[uint64][2]int{}
	for w, ss := range got {
		if !slices.IsSorted(ss) {
			t.Errorf("writer %d got seqs out of order: %v", w, ss)
		}
		for i, seq := range ss {
			owner[seq] = [2]int{w, i}
		}
	}
	if len(owner) != writers*each {
		t.Fatalf("%d distinct seqs, want %d", len(owner), writers*each)
	}
	var all []*corralv1.Message
	for after := uint64(0); ; {
		p, err := s.Read(ctx, history.Query{Room: "r", After: after, Limit: 64})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, p.Messages...)
		if !p.More {
			break
		}
		after = p.Messages[len(p.Messages)-1].GetSeq()
	}
	if want := seqRange(1, writers*each); !slices.Equal(seqs(all), want) {
		t.Fatalf("read seqs %v, want 1..%d", seqs(all), writers*each)
	}
	for _, m := range all {
		o := owner[m.GetSeq()]
		want := newMsg("r", o[0], o[1])
		if string(m.GetPayload()) != string(want.GetPayload()) || m.GetSender() != want.GetSender() ||
			m.GetId() != want.GetId() || m.GetTimeMs() != want.GetTimeMs() || m.GetRoom() != "r" {
			t.Fatalf("seq %d holds %v, want %v", m.GetSeq(), m, want)
		}
	}
}

func testDedupe(t *testing.T, newStore newStoreFunc) {
	s := newStore(t, 0)
	ctx := context.Background()
	first, err := s.Append(ctx, "r", newMsg("r", 0, 0), "client1:a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "r", newMsg("r", 0, 1), ""); err != nil {
		t.Fatal(err)
	}
	again := newMsg("r", 0, 2)
	dup, err := s.Append(ctx, "r", again, "client1:a")
	if err != nil {
		t.Fatal(err)
	}
	want := history.AppendResult{Seq: first.Seq, Epoch: first.Epoch, Duplicate: true}
	if dup != want {
		t.Fatalf("duplicate append = %+v, want %+v", dup, want)
	}
	if again.GetSeq() != first.Seq {
		t.Errorf("duplicate msg.Seq = %d, want %d", again.GetSeq(), first.Seq)
	}
	other, err := s.Append(ctx, "r", newMsg("r", 0, 3), "client2:a")
	if err != nil {
		t.Fatal(err)
	}
	if other.Seq != 3 || other.Duplicate {
		t.Fatalf("other key = %+v, want seq 3", other)
	}
	p, err := s.Read(ctx, history.Query{Room: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if got := seqs(p.Messages); !slices.Equal(got, []uint64{1, 2, 3}) || p.Last != 3 {
		t.Fatalf("stored seqs %v (last %d), want [1 2 3]", got, p.Last)
	}
	if string(p.Messages[0].GetPayload()) != string(newMsg("r", 0, 0).GetPayload()) {
		t.Fatalf("seq 1 holds %q, want the first publish", p.Messages[0].GetPayload())
	}
	// The same key in another room is another publish.
	res, err := s.Append(ctx, "r2", newMsg("r2", 0, 0), "client1:a")
	if err != nil || res.Duplicate || res.Seq != 1 {
		t.Fatalf("other room = %+v, %v", res, err)
	}
}

func testMaxLen(t *testing.T, newStore newStoreFunc) {
	const maxLen, n = 10, 350
	s := newStore(t, maxLen)
	ctx := context.Background()
	mustAppend(t, s, "r", n)
	st, err := s.State(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if st.Last != n || st.First <= 1 || st.Last-st.First+1 < maxLen {
		t.Fatalf("state %+v, want Last %d, First > 1 and at least %d retained", st, n, maxLen)
	}
	p, err := s.Read(ctx, history.Query{Room: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if want := seqRange(st.First, st.Last); !slices.Equal(seqs(p.Messages), want) {
		t.Fatalf("read %v, want %d..%d", seqs(p.Messages), st.First, st.Last)
	}
	p, err = s.Read(ctx, history.Query{Room: "r", Reverse: true, Before: st.First + 1})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seqs(p.Messages), []uint64{st.First}) || p.More {
		t.Fatalf("reverse from First read %v more=%v", seqs(p.Messages), p.More)
	}
}

func testRead(t *testing.T, newStore newStoreFunc) {
	s := newStore(t, 0)
	ctx := context.Background()
	mustAppend(t, s, "r", 25)
	st, err := s.State(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		q    history.Query
		want []uint64
		more bool
	}{
		"forward first page":  {history.Query{Limit: 10}, seqRange(1, 10), true},
		"forward middle":      {history.Query{After: 10, Limit: 10}, seqRange(11, 20), true},
		"forward partial end": {history.Query{After: 20, Limit: 10}, seqRange(21, 25), false},
		"forward exact end":   {history.Query{After: 15, Limit: 10}, seqRange(16, 25), false},
		"forward at end":      {history.Query{After: 25}, nil, false},
		"forward past end":    {history.Query{After: 100}, nil, false},
		"forward no limit":    {history.Query{}, seqRange(1, 25), false},
		"forward over max":    {history.Query{Limit: history.MaxPage + 1}, seqRange(1, 25), false},
		"reverse newest":      {history.Query{Reverse: true, Limit: 10}, seqRange(25, 16), true},
		"reverse before":      {history.Query{Reverse: true, Before: 16, Limit: 10}, seqRange(15, 6), true},
		"reverse to start":    {history.Query{Reverse: true, Before: 6, Limit: 10}, seqRange(5, 1), false},
		"reverse exact start": {history.Query{Reverse: true, Before: 11, Limit: 10}, seqRange(10, 1), false},
		"reverse before 1":    {history.Query{Reverse: true, Before: 1}, nil, false},
		"reverse past end":    {history.Query{Reverse: true, Before: 100, Limit: 3}, seqRange(25, 23), true},
		"reverse no limit":    {history.Query{Reverse: true}, seqRange(25, 1), false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			tt.q.Room = "r"
			p, err := s.Read(ctx, tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(seqs(p.Messages), tt.want) || p.More != tt.more {
				t.Errorf("Read(%+v) = %v more=%v, want %v more=%v", tt.q, seqs(p.Messages), p.More, tt.want, tt.more)
			}
			if p.State != st || st.First != 1 || st.Last != 25 {
				t.Errorf("page state %+v, room state %+v", p.State, st)
			}
		})
	}
	t.Run("paging", func(t *testing.T) {
		for _, reverse := range []bool{false, true} {
			var got []uint64
			q := history.Query{Room: "r", Reverse: reverse, Limit: 7}
			for {
				p, err := s.Read(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, seqs(p.Messages)...)
				if !p.More {
					break
				}
				q.After = p.Messages[len(p.Messages)-1].GetSeq()
				q.Before = q.After
			}
			want := seqRange(1, 25)
			if reverse {
				want = seqRange(25, 1)
			}
			if !slices.Equal(got, want) {
				t.Errorf("reverse=%v paged %v", reverse, got)
			}
		}
	})
}

func testReadEmpty(t *testing.T, newStore newStoreFunc) {
	s := newStore(t, 0)
	for _, q := range []history.Query{{Room: "none"}, {Room: "none", Reverse: true}} {
		p, err := s.Read(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		if p.Epoch == "" || p.First != 0 || p.Last != 0 || len(p.Messages) != 0 || p.More {
			t.Fatalf("Read(%+v) = %+v", q, p)
		}
	}
}

func testReadMany(t *testing.T, newStore newStoreFunc) {
	s := newStore(t, 0)
	ctx := context.Background()
	mustAppend(t, s, "a", 5)
	mustAppend(t, s, "b", 3)
	qs := []history.Query{
		{Room: "a", After: 2},
		{Room: "b", Reverse: true, Limit: 2},
		{Room: "c"},
		{Room: "a", Reverse: true, Before: 3},
	}
	pages, err := s.ReadMany(ctx, qs)
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) != len(qs) {
		t.Fatalf("%d pages for %d queries", len(pages), len(qs))
	}
	want := [][]uint64{{3, 4, 5}, {3, 2}, nil, {2, 1}}
	for i, q := range qs {
		one, err := s.Read(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(seqs(pages[i].Messages), want[i]) || !slices.Equal(seqs(one.Messages), want[i]) ||
			pages[i].State != one.State || pages[i].More != one.More {
			t.Errorf("query %+v: ReadMany %v %+v, Read %v %+v, want %v",
				q, seqs(pages[i].Messages), pages[i].State, seqs(one.Messages), one.State, want[i])
		}
	}
	if pages[0].Epoch == pages[1].Epoch {
		t.Errorf("rooms a and b share epoch %q", pages[0].Epoch)
	}
	if pages, err := s.ReadMany(ctx, nil); err != nil || len(pages) != 0 {
		t.Errorf("ReadMany(nil) = %v, %v", pages, err)
	}
}

func testEpoch(t *testing.T, newStore newStoreFunc) {
	s := newStore(t, 0)
	ctx := context.Background()
	st1, err := s.State(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	st2, err := s.State(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if st1.Epoch == "" || st1 != st2 || st1.Last != 0 || st1.First != 0 {
		t.Fatalf("states %+v then %+v", st1, st2)
	}
	res, err := s.Append(ctx, "r", newMsg("r", 0, 0), "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Epoch != st1.Epoch || res.Seq != 1 {
		t.Fatalf("append %+v, state epoch %q", res, st1.Epoch)
	}
	st3, err := s.State(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if want := (history.State{Epoch: st1.Epoch, First: 1, Last: 1}); st3 != want {
		t.Fatalf("state after append %+v, want %+v", st3, want)
	}
	other, err := s.Append(ctx, "other", newMsg("other", 0, 0), "")
	if err != nil {
		t.Fatal(err)
	}
	if other.Epoch == st1.Epoch {
		t.Fatalf("two rooms share epoch %q", other.Epoch)
	}
}

func testBadRoom(t *testing.T, newStore newStoreFunc) {
	s := newStore(t, 0)
	ctx := context.Background()
	if _, err := s.Append(ctx, "a", newMsg("b", 0, 0), ""); err == nil {
		t.Error("append of a message for room b to room a succeeded")
	}
	if _, err := s.Append(ctx, "", newMsg("", 0, 0), ""); err == nil {
		t.Error("append to the empty room succeeded")
	}
	if _, err := s.State(ctx, ""); err == nil {
		t.Error("state of the empty room succeeded")
	}
	if _, err := s.Read(ctx, history.Query{}); err == nil || errors.Is(err, history.ErrBusy) {
		t.Errorf("read of the empty room: %v", err)
	}
}

// testSenderInfo: a message's sender_info is stored and read back with it;
// a message without one reads back without.
func testSenderInfo(t *testing.T, newStore newStoreFunc) {
	s := newStore(t, 0)
	ctx := context.Background()
	in := []*corralv1.Message{
		{Room: "r", Sender: "ann", Payload: []byte(`1`), SenderInfo: []byte(`{"name":"Ann"}`)},
		{Room: "r", Payload: []byte(`2`)},
	}
	for _, m := range in {
		if _, err := s.Append(ctx, "r", m, ""); err != nil {
			t.Fatal(err)
		}
	}
	p, err := s.Read(ctx, history.Query{Room: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Messages) != 2 || string(p.Messages[0].GetSenderInfo()) != `{"name":"Ann"}` || p.Messages[1].GetSenderInfo() != nil {
		t.Fatalf("read back %v", p.Messages)
	}
}

// testSenderOrder: a sender's publish is refused while its predecessor is
// not stored, a retry of a stored one is a duplicate (whatever came after
// it), a stream is independent of the others, and a place at or below
// the mark under a new id starts the stream again.
func testSenderOrder(t *testing.T, newStore newStoreFunc) {
	ctx := context.Background()
	s := newStore(t, 0)
	so, ok := s.(history.SenderOrder)
	if !ok {
		t.Fatalf("%T does not keep sender order", s)
	}
	const room = "order"
	steps := []struct {
		stream, id string
		seq        uint64
		want       string // "ok", "dup" or "refused"
	}{
		{"a", "a1", 1, "ok"},      // nothing known: taken
		{"a", "a3", 3, "refused"}, // 2 is not stored
		{"b", "b7", 7, "ok"},      // another stream, nothing known of it
		{"a", "a2", 2, "ok"},
		{"a", "a3", 3, "ok"},
		{"a", "a2", 2, "dup"},     // a retry of a stored publish
		{"a", "a5", 5, "refused"}, // 4 is not stored
		{"b", "b8", 8, "ok"},
		{"a", "x1", 1, "ok"},      // a new instance starts again
		{"a", "x3", 3, "refused"}, // ... and is held to its own order
		{"a", "x2", 2, "ok"},
	}
	var stored []string
	for i, st := range steps {
		msg := newMsg(room, 0, i)
		msg.Id = st.id
		res, err := so.AppendOrdered(ctx, room, msg, "s:"+st.stream+":"+st.id, history.Sender{Stream: st.stream, Seq: st.seq}, history.State{})
		got := "ok"
		switch {
		case errors.Is(err, history.ErrOutOfOrder):
			got = "refused"
		case err != nil:
			t.Fatalf("step %d (%s %d): %v", i, st.id, st.seq, err)
		case res.Duplicate:
			got = "dup"
		default:
			stored = append(stored, st.id)
		}
		if got != st.want {
			t.Fatalf("step %d (%s place %d): %s, want %s", i, st.id, st.seq, got, st.want)
		}
	}
	p, err := s.Read(ctx, history.Query{Room: room})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range p.Messages {
		ids = append(ids, m.GetId())
	}
	if !slices.Equal(ids, stored) {
		t.Fatalf("history holds %v, want %v", ids, stored)
	}
	if _, err := so.AppendOrdered(ctx, room, newMsg(room, 0, 99), "", history.Sender{Stream: "a", Seq: 4}, history.State{}); err == nil {
		t.Fatal("a sender's place without a dedupe key was taken")
	}
}

// testReadBytes checks pages bounded in bytes (Query.MaxBytes), forward
// and back: read page by page, the history comes whole, in order and once;
// a page's messages add up to at most MaxBytes unless it holds one (a
// message larger than the bound comes alone, so readers advance); More is
// false only on the last page.
func testReadBytes(t *testing.T, newStore newStoreFunc) {
	ctx := context.Background()
	s := newStore(t, 0)
	const room, n, maxBytes = "bytes", 150, 4000
	for i := range n {
		m := newMsg(room, 0, i)
		size := (i * 997) % 3000
		if i%17 == 5 {
			size = 2 * maxBytes // larger than a page
		}
		m.Payload = make([]byte, size)
		if _, err := s.Append(ctx, room, m, ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, reverse := range []bool{false, true} {
		for _, limit := range []int{0, 3} {
			var got []uint64
			var pos uint64
			for pages := 0; ; pages++ {
				if pages > n {
					t.Fatalf("reverse=%v limit=%d: no end after %d pages", reverse, limit, pages)
				}
				q := history.Query{Room: room, After: pos, Limit: limit, MaxBytes: maxBytes, Reverse: reverse}
				if reverse {
					q.After, q.Before = 0, pos
				}
				p, err := s.Read(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if len(p.Messages) == 0 {
					t.Fatalf("reverse=%v limit=%d: empty page after %v", reverse, limit, got)
				}
				size := 0
				for _, m := range p.Messages {
					size += proto.Size(m)
				}
				if size > maxBytes && len(p.Messages) > 1 {
					t.Fatalf("reverse=%v limit=%d: page of %d messages holds %d bytes, bound %d", reverse, limit, len(p.Messages), size, maxBytes)
				}
				if limit > 0 && len(p.Messages) > limit {
					t.Fatalf("reverse=%v limit=%d: page of %d messages", reverse, limit, len(p.Messages))
				}
				got = append(got, seqs(p.Messages)...)
				pos = got[len(got)-1]
				if !p.More {
					break
				}
			}
			want := seqRange(1, n)
			if reverse {
				want = seqRange(n, 1)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("reverse=%v limit=%d: read %v, want %v", reverse, limit, got, want)
			}
		}
	}
	// A bound the page fits in whole changes nothing (past the Redis
	// script's chunks of 64).
	for _, reverse := range []bool{false, true} {
		p, err := s.Read(ctx, history.Query{Room: room, MaxBytes: 1 << 30, Reverse: reverse})
		if err != nil {
			t.Fatal(err)
		}
		want := seqRange(1, n)
		if reverse {
			want = seqRange(n, 1)
		}
		if got := seqs(p.Messages); !slices.Equal(got, want) || p.More {
			t.Fatalf("reverse=%v: read %v (more %v), want %v", reverse, got, p.More, want)
		}
	}
	// ReadMany applies each query's own bound.
	pages, err := s.ReadMany(ctx, []history.Query{
		{Room: room, MaxBytes: 1},
		{Room: room},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pages[0].Messages) != 1 || !pages[0].More || len(pages[1].Messages) != n {
		t.Fatalf("ReadMany: pages of %d (more %v) and %d messages, want 1 (more) and %d",
			len(pages[0].Messages), pages[0].More, len(pages[1].Messages), n)
	}
}
