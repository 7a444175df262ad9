package core

import (
	"context"
	"fmt"
	"slices"
	"testing"

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
			ctx := context.Background()
			c := newTestCore(t, Config{History: history.NewMemory(history.MemoryOptions{MaxLen: 5})})
			var epoch string
			for range tc.published {
				res, err := c.apiPublish(ctx, "r", []byte("x"), "", "")
				if err != nil {
					t.Fatal(err)
				}
				epoch = res.Epoch
			}
			if tc.epoch != "" {
				epoch = tc.epoch
			}
			l := fakeLink(c)
			id := &corralv1.Identity{UserId: "u", Join: []string{"*"}}
			s := c.attach(ctx, l, 1, nil, &linkv1.Attach{Identity: id, Hello: &corralv1.Hello{}})
			if s == nil {
				t.Fatal("attach refused")
			}
			frames(t, l, 1) // Welcome
			j := &corralv1.Join{Room: "r"}
			if !tc.noPos {
				j.SinceSeq, j.Epoch, j.FromPosition = tc.since, epoch, true
			}
			c.handleClient(ctx, s, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: j}})
			var got []string
			for _, f := range frames(t, l, len(tc.want)) {
				got = append(got, describe(f))
			}
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
