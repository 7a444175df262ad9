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
