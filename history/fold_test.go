package history_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
)

// testGrowFolded: a read with Assembled holds each growing message once,
// assembled, in the place of its last chunk, in both directions and in
// pages of any size or byte bound: paging by Next never splits a message
// nor repeats or loses an entry.
func testGrowFolded(t *testing.T, newStore newStoreFunc) {
	ctx := context.Background()
	s := newStore(t, 0)
	g := s.(history.Grower)
	lim := history.GrowLimits{}
	plain := func(p string) {
		t.Helper()
		if _, err := s.Append(ctx, "r", &corralv1.Message{Room: "r", Payload: []byte(`"` + p + `"`)}, ""); err != nil {
			t.Fatal(err)
		}
	}
	grow := func(id, data string, final bool) {
		t.Helper()
		if _, err := g.Grow(ctx, "r", chunk("r", id, data, false, final), lim); err != nil {
			t.Fatal(err)
		}
	}
	// seq 1 q, 2 a:"He", 3 b:"x", 4 a:"llo", 5 p, 6 a:"!" final, 7 b:"y"
	// (b stays open), 8 z.
	plain("q")
	grow("a", "He", false)
	grow("b", "x", false)
	grow("a", "llo", false)
	plain("p")
	grow("a", "!", true)
	grow("b", "y", false)
	plain("z")
	entry := func(m *corralv1.Message) string {
		if c := m.GetChunk(); c != nil {
			return fmt.Sprintf("%d:%s=%s v%d of %d r%v f%v", m.GetSeq(), m.GetId(), c.GetData(), c.GetVersion(), c.GetMessageSeq(), c.GetReplace(), c.GetFinal())
		}
		return fmt.Sprintf("%d:%s", m.GetSeq(), m.GetPayload())
	}
	want := []string{`1:"q"`, `5:"p"`, "6:a=Hello! v3 of 2 rtrue ftrue", "7:b=xy v2 of 3 rtrue ffalse", `8:"z"`}
	for _, reverse := range []bool{false, true} {
		for _, limit := range []int{1, 2, 3, 100} {
			for _, maxBytes := range []int{0, 1, 40} {
				name := fmt.Sprintf("reverse=%v limit=%d maxBytes=%d", reverse, limit, maxBytes)
				var got []string
				q := history.Query{Room: "r", Reverse: reverse, Limit: limit, MaxBytes: maxBytes, Assembled: true}
				for range 20 {
					p, err := s.Read(ctx, q)
					if err != nil {
						t.Fatal(err)
					}
					for _, m := range p.Messages {
						got = append(got, entry(m))
					}
					if !p.More {
						break
					}
					if reverse {
						q.Before = p.Next
					} else {
						q.After = p.Next
					}
				}
				w := slices.Clone(want)
				if reverse {
					slices.Reverse(w)
				}
				if !slices.Equal(got, w) {
					t.Errorf("%s:\n got %s\nwant %s", name, strings.Join(got, ", "), strings.Join(w, ", "))
				}
			}
		}
	}
	// Without Assembled, the chunks are read as they were written.
	p, err := s.Read(ctx, history.Query{Room: "r"})
	if err != nil || len(p.Messages) != 8 {
		t.Fatalf("plain read: %d messages, %v", len(p.Messages), err)
	}
	// A room without history reads empty when peeking.
	if p, err := s.Read(ctx, history.Query{Room: "none", Peek: true, Assembled: true}); err != nil || len(p.Messages) != 0 || p.Epoch != "" {
		t.Fatalf("peek of a room without history: %+v, %v", p, err)
	}
}
