package history_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/corral-rt/corral/events"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/internal/redistest"
)

func chunk(room, id, data string, replace, final bool) *corralv1.Message {
	return &corralv1.Message{Room: room, Id: id, Sender: "bot",
		Chunk: &corralv1.MessageChunk{Data: []byte(data), Replace: replace, Final: final}}
}

func testGrow(t *testing.T, newStore newStoreFunc) {
	ctx := context.Background()
	s := newStore(t, 0)
	g := s.(history.Grower)
	lim := history.GrowLimits{MaxBytes: 16}
	grow := func(data string, replace, final bool) history.AppendResult {
		t.Helper()
		res, err := g.Grow(ctx, "r", chunk("r", "reply", data, replace, final), lim)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if _, err := s.Append(ctx, "r", &corralv1.Message{Room: "r", Payload: []byte(`"q"`)}, ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := g.Assembled(ctx, "r", "reply"); !errors.Is(err, history.ErrNotFound) {
		t.Fatalf("Assembled before the first chunk: %v", err)
	}
	first := grow("Hel", false, false)
	if _, err := s.Append(ctx, "r", &corralv1.Message{Room: "r", Payload: []byte(`"other"`)}, ""); err != nil {
		t.Fatal(err)
	}
	grow("lo", false, false)
	a, st, err := g.Assembled(ctx, "r", "reply")
	if err != nil {
		t.Fatal(err)
	}
	if string(a.GetChunk().GetData()) != "Hello" || a.GetChunk().GetVersion() != 2 || a.GetSeq() != 4 ||
		!a.GetChunk().GetReplace() || a.GetChunk().GetFinal() || a.GetChunk().GetMessageSeq() != first.Seq ||
		a.GetId() != "reply" || a.GetSender() != "bot" || st.Last != 4 || st.Epoch != first.Epoch {
		t.Fatalf("assembled %v at %+v", a, st)
	}
	if _, err := g.Grow(ctx, "r", chunk("r", "reply", "0123456789ab", false, false), lim); !errors.Is(err, history.ErrTooLarge) {
		t.Fatalf("a chunk past the bound: %v", err)
	}
	last := grow("Hello, world!", true, true)
	if _, err := g.Grow(ctx, "r", chunk("r", "reply", "!", false, false), lim); !errors.Is(err, history.ErrFinal) {
		t.Fatalf("a chunk after the final one: %v", err)
	}
	if st, _ := s.State(ctx, "r"); st.Last != last.Seq {
		t.Fatalf("refused chunks were stored: last %d, want %d", st.Last, last.Seq)
	}
	a, _, err = g.Assembled(ctx, "r", "reply")
	if err != nil || string(a.GetChunk().GetData()) != "Hello, world!" || !a.GetChunk().GetFinal() || a.GetChunk().GetVersion() != 3 {
		t.Fatalf("final assembled %v, %v", a, err)
	}
	// The log holds the chunks in room order, with their places.
	page, err := s.Read(ctx, history.Query{Room: "r"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range page.Messages {
		if c := m.GetChunk(); c != nil {
			got = append(got, fmt.Sprintf("%d:%s v%d of %d r%v f%v", m.GetSeq(), c.GetData(), c.GetVersion(), c.GetMessageSeq(), c.GetReplace(), c.GetFinal()))
		} else {
			got = append(got, fmt.Sprintf("%d:%s", m.GetSeq(), m.GetPayload()))
		}
	}
	want := fmt.Sprint([]string{`1:"q"`, "2:Hel v1 of 2 rfalse ffalse", `3:"other"`, "4:lo v2 of 2 rfalse ffalse",
		"5:Hello, world! v3 of 2 rtrue ftrue"})
	if fmt.Sprint(got) != want {
		t.Fatalf("log\n %v\nwant\n %v", got, want)
	}
	// Another id is another message.
	if res, err := g.Grow(ctx, "r", chunk("r", "second", "x", false, false), lim); err != nil || res.Seq != 6 {
		t.Fatalf("second message: %+v, %v", res, err)
	}
}

// testGrowMidStream has members join while a message grows: each takes
// the assembled prefix, then the chunks after its seq from the log, and
// must end with the whole message, every version once and in order.
func testGrowMidStream(t *testing.T, newStore newStoreFunc) {
	ctx := context.Background()
	s := newStore(t, 0)
	g := s.(history.Grower)
	const chunks, joiners = 60, 6
	var want []byte
	for i := range chunks {
		want = fmt.Appendf(want, "t%d,", i)
	}
	var wg sync.WaitGroup
	started := make(chan struct{})
	wg.Go(func() {
		for i := range chunks {
			if _, err := g.Grow(ctx, "r", chunk("r", "m", fmt.Sprintf("t%d,", i), false, i == chunks-1), history.GrowLimits{}); err != nil {
				t.Error(err)
				return
			}
			if i == 0 {
				close(started)
			}
		}
	})
	<-started
	for range joiners {
		wg.Go(func() {
			a, _, err := g.Assembled(ctx, "r", "m")
			if err != nil {
				t.Error(err)
				return
			}
			body := append([]byte(nil), a.GetChunk().GetData()...)
			version, after := a.GetChunk().GetVersion(), a.GetSeq()
			for version < chunks {
				page, err := s.Read(ctx, history.Query{Room: "r", After: after})
				if err != nil {
					t.Error(err)
					return
				}
				for _, m := range page.Messages {
					c := m.GetChunk()
					if c.GetVersion() != version+1 {
						t.Errorf("after version %d came %d", version, c.GetVersion())
						return
					}
					body = append(body, c.GetData()...)
					version, after = c.GetVersion(), m.GetSeq()
				}
			}
			if string(body) != string(want) {
				t.Errorf("joiner assembled %q, want %q", body, want)
			}
		})
	}
	wg.Wait()
}

// TestGrowEvents checks that the event log carries a growing message once,
// assembled, when its final chunk is appended (memory and Redis).
func TestGrowEvents(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t, redistest.Start(t))
	prefix := redistest.Prefix(t)
	memLog := events.NewMemory(events.MemoryOptions{})
	redisLog := events.NewRedis(client, events.RedisOptions{Prefix: prefix})
	for name, s := range map[string]struct {
		store history.Store
		log   events.Log
	}{
		"memory": {history.NewMemory(history.MemoryOptions{Events: memLog}), memLog},
		"redis":  {history.NewRedis(client, history.RedisOptions{Prefix: prefix, Events: redisLog}), redisLog},
	} {
		t.Run(name, func(t *testing.T) {
			defer s.store.Close()
			g := s.store.(history.Grower)
			for i, data := range []string{"a", "b", "c"} {
				if _, err := g.Grow(ctx, "r", chunk("r", "m", data, false, i == 2), history.GrowLimits{}); err != nil {
					t.Fatal(err)
				}
			}
			evs, err := s.log.Read(ctx, "", 10, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 1 {
				t.Fatalf("%d events, want 1: %v", len(evs), evs)
			}
			m := evs[0].GetMessage()
			if c := m.GetChunk(); string(c.GetData()) != "abc" || !c.GetFinal() || !c.GetReplace() || c.GetVersion() != 3 ||
				m.GetSeq() != 3 || c.GetMessageSeq() != 1 || m.GetId() != "m" || m.GetSender() != "bot" {
				t.Fatalf("event message %v", m)
			}
		})
	}
}

// testGrowRetry: chunks carrying the version they make are applied once
// when retried, and refused when one is missing.
func testGrowRetry(t *testing.T, newStore newStoreFunc) {
	ctx := context.Background()
	s := newStore(t, 0)
	g := s.(history.Grower)
	grow := func(data string, version uint64, final bool) (history.AppendResult, error) {
		m := chunk("r", "m", data, false, final)
		m.Chunk.Version = version
		return g.Grow(ctx, "r", m, history.GrowLimits{})
	}
	if _, err := grow("a", 2, false); !errors.Is(err, history.ErrOutOfOrder) {
		t.Fatalf("version 2 first: %v", err)
	}
	first, err := grow("a", 1, false)
	if err != nil {
		t.Fatal(err)
	}
	second, err := grow("b", 2, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []uint64{1, 2} {
		res, err := grow("again", v, false)
		if err != nil || !res.Duplicate || res.Seq != second.Seq || res.Epoch != first.Epoch {
			t.Fatalf("retry of version %d: %+v, %v", v, res, err)
		}
	}
	if _, err := grow("d", 4, false); !errors.Is(err, history.ErrOutOfOrder) {
		t.Fatalf("version 4 after 2: %v", err)
	}
	last, err := grow("c", 3, true)
	if err != nil {
		t.Fatal(err)
	}
	// A retried final chunk is a duplicate, not a refusal.
	if res, err := grow("c", 3, true); err != nil || !res.Duplicate || res.Seq != last.Seq {
		t.Fatalf("retry of the final chunk: %+v, %v", res, err)
	}
	if _, err := grow("e", 0, false); !errors.Is(err, history.ErrFinal) {
		t.Fatalf("an unchecked chunk after the final one: %v", err)
	}
	a, _, err := g.Assembled(ctx, "r", "m")
	if err != nil || string(a.GetChunk().GetData()) != "abc" || a.GetChunk().GetVersion() != 3 {
		t.Fatalf("assembled %v, %v", a, err)
	}
	if st, _ := s.State(ctx, "r"); st.Last != 3 {
		t.Fatalf("%d seqs taken for 3 chunks", st.Last)
	}
}

// testGrowOpen: Open returns the room's open growing messages as
// assembled, each at the seq of its last chunk, none final, with the
// room's state of the same moment.
func testGrowOpen(t *testing.T, newStore newStoreFunc) {
	ctx := context.Background()
	s := newStore(t, 0)
	g := s.(history.Grower)
	if open, st, err := g.Open(ctx, "r"); err != nil || len(open) != 0 || st.Last != 0 {
		t.Fatalf("an empty room: %v, %+v, %v", open, st, err)
	}
	grow := func(id, data string, final bool) {
		t.Helper()
		if _, err := g.Grow(ctx, "r", chunk("r", id, data, false, final), history.GrowLimits{}); err != nil {
			t.Fatal(err)
		}
	}
	grow("a", "x", false)
	grow("b", "1", false)
	grow("a", "y", false)
	grow("b", "2", true)
	if _, err := s.Append(ctx, "r", &corralv1.Message{Room: "r", Payload: []byte(`"m"`)}, ""); err != nil {
		t.Fatal(err)
	}
	open, st, err := g.Open(ctx, "r")
	if err != nil || len(open) != 1 || st.Last != 5 || st.Epoch == "" {
		t.Fatalf("open %v at %+v, %v", open, st, err)
	}
	a := open[0]
	if a.GetId() != "a" || a.GetSeq() != 3 || string(a.GetChunk().GetData()) != "xy" || a.GetChunk().GetVersion() != 2 ||
		!a.GetChunk().GetReplace() || a.GetChunk().GetFinal() || a.GetChunk().GetMessageSeq() != 1 {
		t.Fatalf("open message %v", a)
	}
	grow("a", "z", true)
	if open, _, err := g.Open(ctx, "r"); err != nil || len(open) != 0 {
		t.Fatalf("after the final chunk: %v, %v", open, err)
	}
}
