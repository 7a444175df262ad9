package api_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/corral-rt/corral/core/api"
	"github.com/corral-rt/corral/core/door"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
)

// TestHistoryAssembled: History returns a growing message as one entry
// (its assembled body, version and final mark, at its last chunk's seq),
// and pages bounded in bytes never split one: reading by next_seq, each
// of five interleaved 1 MiB messages comes once, whole, with the plain
// messages between them, in both directions.
func TestHistoryAssembled(t *testing.T) {
	ctx := context.Background()
	h := history.NewMemory(history.MemoryOptions{})
	s := api.New(api.Options{Core: &fakeCore{}, Door: door.New(door.Options{MaxRoomName: 50}),
		MaxPayload: func(string) int { return 100 }, History: h})
	const msgs, chunks = 5, 16
	piece := func(i, j int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 64<<10) }
	for j := range chunks {
		for i := range msgs {
			m := &corralv1.Message{Room: "r", Id: fmt.Sprint("m", i), Chunk: &corralv1.MessageChunk{
				Data: piece(i, j), Final: j == chunks-1 && i%2 == 0}}
			if _, err := h.Grow(ctx, "r", m, history.GrowLimits{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := h.Append(ctx, "r", &corralv1.Message{Room: "r", Payload: []byte(fmt.Sprint(j))}, ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, reverse := range []bool{false, true} {
		seen := map[string]int{}
		plain, pages := 0, 0
		var last uint64
		req := &corralv1.HistoryRequest{Room: "r", Reverse: reverse}
		for {
			pages++
			res, err := s.History(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range res.GetMessages() {
				if last != 0 && (m.GetSeq() > last) == reverse {
					t.Fatalf("reverse=%v: seq %d after %d", reverse, m.GetSeq(), last)
				}
				last = m.GetSeq()
				c := m.GetChunk()
				if c == nil {
					plain++
					continue
				}
				i := int(m.GetId()[1] - '0')
				seen[m.GetId()]++
				if want := bytes.Repeat(piece(i, 0), chunks); !c.GetReplace() || !bytes.Equal(c.GetData(), want) ||
					c.GetVersion() != chunks || c.GetFinal() != (i%2 == 0) {
					t.Fatalf("reverse=%v: %s: %d bytes v%d replace %v final %v", reverse, m.GetId(), len(c.GetData()), c.GetVersion(), c.GetReplace(), c.GetFinal())
				}
			}
			if !res.GetMore() {
				break
			}
			if reverse {
				req.BeforeSeq = res.GetNextSeq()
			} else {
				req.AfterSeq = res.GetNextSeq()
			}
			if pages > 100 {
				t.Fatal("paging does not end")
			}
		}
		if len(seen) != msgs || plain != chunks || pages < 2 {
			t.Fatalf("reverse=%v: messages %v, %d plain, %d pages", reverse, seen, plain, pages)
		}
		for id, n := range seen {
			if n != 1 {
				t.Fatalf("reverse=%v: %s came %d times", reverse, id, n)
			}
		}
	}
}
