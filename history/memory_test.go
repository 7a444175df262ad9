package history_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
)

func TestMemory(t *testing.T) {
	testStore(t, func(t *testing.T, maxLen int) history.Store {
		s := history.NewMemory(history.MemoryOptions{MaxLen: maxLen})
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestMemoryTrimsExactly(t *testing.T) {
	s := history.NewMemory(history.MemoryOptions{MaxLen: 10})
	mustAppend(t, s, "r", 25)
	p, err := s.Read(context.Background(), history.Query{Room: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if p.First != 16 || p.Last != 25 || !slices.Equal(seqs(p.Messages), seqRange(16, 25)) {
		t.Fatalf("page %+v %v, want 16..25", p.State, seqs(p.Messages))
	}
}

func TestMemoryDedupeWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := history.NewMemory(history.MemoryOptions{DedupeWindow: time.Minute})
		ctx := context.Background()
		appendKey := func(key string) history.AppendResult {
			t.Helper()
			res, err := s.Append(ctx, "r", newMsg("r", 0, 0), key)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		if res := appendKey("k"); res.Seq != 1 || res.Duplicate {
			t.Fatalf("first: %+v", res)
		}
		time.Sleep(59 * time.Second)
		appendKey("other")
		if res := appendKey("k"); res.Seq != 1 || !res.Duplicate {
			t.Fatalf("within window: %+v", res)
		}
		time.Sleep(2 * time.Second)
		if res := appendKey("k"); res.Seq != 3 || res.Duplicate {
			t.Fatalf("after window: %+v", res)
		}
		if res := appendKey("other"); res.Seq != 2 || !res.Duplicate {
			t.Fatalf("other within its window: %+v", res)
		}
	})
}

// TestMemorySenderMarkWindow: a sender's mark is kept for the dedupe
// window after the stream's last append, not its first (a refreshed mark
// outlives the expiry queued for its older appends), and is then
// forgotten: the state is bounded by the streams that appended within the
// window.
func TestMemorySenderMarkWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := history.NewMemory(history.MemoryOptions{DedupeWindow: time.Minute})
		ctx := context.Background()
		n := 0
		appendAt := func(place uint64) error {
			t.Helper()
			n++
			id := fmt.Sprintf("p%d", n)
			_, err := s.AppendOrdered(ctx, "r", newMsg("r", 0, n), "s:a:"+id, history.Sender{Stream: "a", Seq: place}, history.State{})
			return err
		}
		if err := appendAt(1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Second)
		if err := appendAt(2); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Second) // past place 1's window, within place 2's
		if err := appendAt(4); !errors.Is(err, history.ErrOutOfOrder) {
			t.Fatalf("place 4 after 2 within the window: %v, want ErrOutOfOrder", err)
		}
		time.Sleep(41 * time.Second) // past place 2's window: forgotten
		if err := appendAt(4); err != nil {
			t.Fatalf("place 4 after the mark expired: %v", err)
		}
	})
}

func TestMemoryAppendAllocs(t *testing.T) {
	s := history.NewMemory(history.MemoryOptions{MaxLen: 100})
	ctx := context.Background()
	msg := &corralv1.Message{Room: "r", Payload: []byte("x")}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := s.Append(ctx, "r", msg, ""); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Append allocates %v times per call, want 0", allocs)
	}
}

func ExampleNewMemory() {
	s := history.NewMemory(history.MemoryOptions{MaxLen: 100})
	defer s.Close()
	ctx := context.Background()
	for _, text := range []string{`"hello"`, `"world"`} {
		msg := &corralv1.Message{Room: "lobby", Sender: "ann", Payload: []byte(text)}
		if _, err := s.Append(ctx, "lobby", msg, ""); err != nil {
			panic(err)
		}
	}
	page, err := s.Read(ctx, history.Query{Room: "lobby", After: 1})
	if err != nil {
		panic(err)
	}
	for _, m := range page.Messages {
		fmt.Println(m.GetSeq(), string(m.GetPayload()))
	}
	fmt.Println("first", page.First, "last", page.Last)
	// Output:
	// 2 "world"
	// first 1 last 2
}

// TestMemoryMaxBytes: rooms nobody holds, one 60 KB message each, are
// shed whole past MaxBytes, least recently used first, and come back
// under a new epoch; a held room is never evicted but its oldest history
// is trimmed (a position before it then resets); the bytes held stay
// under the bound after every append.
func TestMemoryMaxBytes(t *testing.T) {
	ctx := context.Background()
	const bound = 1 << 20
	m := history.NewMemory(history.MemoryOptions{MaxBytes: bound})
	payload := make([]byte, 60<<10)
	msg := func(room string) *corralv1.Message { return &corralv1.Message{Room: room, Payload: payload} }
	first, err := m.Append(ctx, "abandoned-0", msg("abandoned-0"), "")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 1040; i++ {
		room := fmt.Sprintf("abandoned-%d", i)
		if _, err := m.Append(ctx, room, msg(room), ""); err != nil {
			t.Fatal(err)
		}
		if b := m.Stats().Bytes; b > bound {
			t.Fatalf("after %d rooms the store holds %d bytes, over the bound %d", i+1, b, bound)
		}
	}
	st := m.Stats()
	if st.ShedRooms < 1000 || m.Len() > 20 {
		t.Fatalf("shed %d rooms, %d left in memory", st.ShedRooms, m.Len())
	}
	if s, _ := m.State(ctx, "abandoned-1039"); s.Last != 1 {
		t.Fatalf("the most recent room was shed: %+v", s)
	}
	again, err := m.Append(ctx, "abandoned-0", msg("abandoned-0"), "")
	if err != nil {
		t.Fatal(err)
	}
	if again.Epoch == first.Epoch || again.Seq != 1 {
		t.Fatalf("a shed room came back as %+v, first %+v: want seq 1 under a new epoch", again, first)
	}

	m.Hold("held")
	for i := range 100 {
		if _, err := m.Append(ctx, "held", msg("held"), ""); err != nil {
			t.Fatal(err)
		}
		if b := m.Stats().Bytes; b > bound {
			t.Fatalf("after %d messages to a held room the store holds %d bytes", i+1, b)
		}
	}
	s, err := m.State(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	if s.Last != 100 || s.First <= 1 || m.Stats().ShedMessages == 0 {
		t.Fatalf("held room %+v, stats %+v: want its oldest history trimmed, seq kept", s, m.Stats())
	}
	p, err := m.Read(ctx, history.Query{Room: "held", After: 0, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for i, got := range p.Messages {
		if got.GetSeq() != s.First+uint64(i) {
			t.Fatalf("message %d has seq %d, want %d", i, got.GetSeq(), s.First+uint64(i))
		}
	}
	if uint64(len(p.Messages)) != s.Last-s.First+1 {
		t.Fatalf("read %d messages of %d..%d", len(p.Messages), s.First, s.Last)
	}
}

// TestMemoryMaxKeys: a flood of distinct dedupe keys, in distinct rooms
// and in one held room, never makes the store remember more than MaxKeys;
// past it a new key is refused with ErrBusy (counted) and nothing is
// stored, while a retry of a key remembered within its window is still
// answered as the duplicate it is. Once the window passes, the keys are
// forgotten and appends with new keys go through again.
func TestMemoryMaxKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const bound = 1000
		m := history.NewMemory(history.MemoryOptions{MaxKeys: bound, DedupeWindow: time.Minute})
		m.Hold("active")
		msg := func(room string) *corralv1.Message { return &corralv1.Message{Room: room, Payload: []byte("x")} }
		kept := map[string]uint64{}
		for i := range 10 {
			key := fmt.Sprint("kept-", i)
			res, err := m.Append(ctx, "active", msg("active"), key)
			if err != nil {
				t.Fatal(err)
			}
			kept[key] = res.Seq
		}
		refused := 0
		for i := range 5000 {
			room := fmt.Sprint("flood-", i)
			if i%2 == 0 {
				room = "active"
			}
			_, err := m.AppendOrdered(ctx, room, msg(room), fmt.Sprint("new-", i), history.Sender{Stream: fmt.Sprint("s-", i), Seq: 1}, history.State{})
			if errors.Is(err, history.ErrBusy) {
				refused++
			} else if err != nil {
				t.Fatal(err)
			}
			if k := m.Stats().Keys; k > bound {
				t.Fatalf("after %d appends the store remembers %d keys, over the bound %d", i+1, k, bound)
			}
		}
		st := m.Stats()
		if refused == 0 || st.Refused[history.RefusedKeys] != uint64(refused) {
			t.Fatalf("%d refused, stats %+v", refused, st)
		}
		last, _ := m.State(ctx, "active")
		for key, seq := range kept {
			res, err := m.Append(ctx, "active", msg("active"), key)
			if err != nil || !res.Duplicate || res.Seq != seq {
				t.Fatalf("retry of %s within its window: %+v %v, want the duplicate of seq %d", key, res, err, seq)
			}
		}
		if s, _ := m.State(ctx, "active"); s.Last != last.Last {
			t.Fatalf("retries stored: last %d, was %d", s.Last, last.Last)
		}

		time.Sleep(time.Minute + 2*time.Second) // fake time: the window passes
		if _, err := m.Append(ctx, "active", msg("active"), "after-the-window"); err != nil {
			t.Fatalf("a new key after the window: %v", err)
		}
		if k := m.Stats().Keys; k > 10 {
			t.Fatalf("%d keys remembered after the window, want the expired ones forgotten", k)
		}
	})
}

// TestMemoryUnbounded: negative MaxBytes and MaxKeys bound nothing.
func TestMemoryUnbounded(t *testing.T) {
	ctx := context.Background()
	m := history.NewMemory(history.MemoryOptions{MaxBytes: -1, MaxKeys: -1})
	for i := range 2000 {
		room := fmt.Sprint("r-", i)
		if _, err := m.Append(ctx, room, &corralv1.Message{Room: room, Payload: make([]byte, 1024)}, fmt.Sprint("k-", i)); err != nil {
			t.Fatal(err)
		}
	}
	if st := m.Stats(); st.Keys != 2000 || st.ShedRooms != 0 {
		t.Fatalf("stats %+v: want 2000 keys, nothing shed", st)
	}
}
