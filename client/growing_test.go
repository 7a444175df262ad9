package client_test

import (
	"errors"
	"testing"

	"github.com/coder/websocket"

	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	"github.com/corral-rt/corral/delta"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// chunkF is the message frame of one chunk of the growing message "a7"
// in room "chat", which opened at seq 17.
func chunkF(seq, version uint64, data string, replace, final bool) *corralv1.Message {
	return &corralv1.Message{Room: "chat", Seq: seq, Id: "a7", Chunk: &corralv1.MessageChunk{
		MessageSeq: 17, Version: version, Data: []byte(data), Replace: replace, Final: final,
	}}
}

func deltaF(seq, version uint64, from, to string) *corralv1.Message {
	m := chunkF(seq, version, "", true, false)
	m.Chunk.Delta = delta.Encode([]byte(from), []byte(to))
	return m
}

// TestAssembler feeds a member's frames (live, a mid-stream join, a resume
// replaying chunks, duplicates, gaps, deltas) and checks what it applied
// with checker.Assembly against what was written.
func TestAssembler(t *testing.T) {
	tests := map[string]struct {
		frames  []*corralv1.Message
		applied []bool // per frame: changed the message
		gapAt   int    // index of the frame refused with ErrChunkGap (-1: none)
		want    string
		final   bool
	}{
		"live from the first chunk": {
			frames:  []*corralv1.Message{chunkF(17, 1, "Hel", false, false), chunkF(19, 2, "lo", false, false), chunkF(20, 3, "!", false, true)},
			applied: []bool{true, true, true}, gapAt: -1, want: "Hello!", final: true,
		},
		"a join mid-stream: the prefix at seq S, then only chunks above S": {
			frames:  []*corralv1.Message{chunkF(19, 2, "Hello", true, false), chunkF(20, 3, "!", false, true)},
			applied: []bool{true, true}, gapAt: -1, want: "Hello!", final: true,
		},
		"a resume replays chunks the member holds: each applied once": {
			frames: []*corralv1.Message{
				chunkF(17, 1, "Hel", false, false), chunkF(19, 2, "lo", false, false),
				chunkF(17, 1, "Hel", false, false), chunkF(19, 2, "lo", false, false), chunkF(20, 3, "!", false, true),
			},
			applied: []bool{true, true, false, false, true}, gapAt: -1, want: "Hello!", final: true,
		},
		"a chunk below the joiner's prefix is ignored": {
			frames:  []*corralv1.Message{chunkF(19, 2, "Hello", true, false), chunkF(17, 1, "Hel", false, false), chunkF(20, 3, " you", false, false)},
			applied: []bool{true, false, true}, gapAt: -1, want: "Hello you",
		},
		"an append chunk ahead of the next version is refused": {
			frames:  []*corralv1.Message{chunkF(17, 1, "Hel", false, false), chunkF(20, 3, "!", false, true)},
			applied: []bool{true, false}, gapAt: 1, want: "Hel",
		},
		"a chunk after the final one is refused": {
			frames:  []*corralv1.Message{chunkF(17, 1, "Hi", false, true), chunkF(18, 2, "?", false, false)},
			applied: []bool{true, false}, gapAt: 1, want: "Hi", final: true,
		},
		"a replace sent as a delta against the previous body": {
			frames:  []*corralv1.Message{chunkF(17, 1, "The quick brown fox", false, false), deltaF(18, 2, "The quick brown fox", "The quick red fox"), chunkF(19, 3, " jumps", false, true)},
			applied: []bool{true, true, true}, gapAt: -1, want: "The quick red fox jumps", final: true,
		},
		"a delta to a version the member does not hold is refused": {
			frames:  []*corralv1.Message{chunkF(17, 1, "abc", false, false), deltaF(19, 3, "abcd", "abXd")},
			applied: []bool{true, false}, gapAt: 1, want: "abc",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			a := client.NewAssembler()
			var got []checker.Chunk
			for i, m := range tt.frames {
				_, ok, err := a.Feed(m)
				if (i == tt.gapAt) != errors.Is(err, client.ErrChunkGap) {
					t.Fatalf("frame %d: err %v", i, err)
				}
				if ok != tt.applied[i] {
					t.Fatalf("frame %d: applied %v, want %v", i, ok, tt.applied[i])
				}
				if ok {
					c := m.GetChunk()
					got = append(got, checker.Chunk{Seq: m.GetSeq(), Version: c.GetVersion(), Data: c.GetData(), Delta: c.GetDelta(), Replace: c.GetReplace(), Final: c.GetFinal()})
				}
			}
			if err := checker.Assembly(got, []byte(tt.want), tt.final); err != nil {
				t.Fatal(err)
			}
			g := a.Get("chat", "a7")
			if string(g.Body) != tt.want || g.Final != tt.final || g.MessageSeq != 17 {
				t.Fatalf("assembled %+v, want %q final %v", g, tt.want, tt.final)
			}
		})
	}
}

func TestAssemblerIgnoresPlainMessages(t *testing.T) {
	a := client.NewAssembler()
	g, ok, err := a.Feed(&corralv1.Message{Room: "chat", Seq: 1, Id: "m1", Payload: []byte(`1`)})
	if g != nil || ok || err != nil {
		t.Fatalf("a plain message: %v %v %v", g, ok, err)
	}
}

func TestAssemblerBound(t *testing.T) {
	a := &client.Assembler{MaxBytes: 4}
	if _, _, err := a.Feed(chunkF(17, 1, "abc", false, false)); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.Feed(chunkF(18, 2, "de", false, false)); ok || err == nil {
		t.Fatalf("past MaxBytes: applied %v, err %v", ok, err)
	}
}

// TestSessionGrowingScripted: a Session joins while a message grows (the
// prefix as a replace chunk at seq 19, the room at 20), then resumes after
// a drop and the server replays chunks it holds. Frames go through the
// JSON wire (dataBase64) and the Session's seq filter; an Assembler fed
// with its events ends with the whole message, each version once.
func TestSessionGrowingScripted(t *testing.T) {
	fake := newScripted(t)
	ctx := testCtx(t)
	s, c1 := fake.session(t, ctx)

	var applied []checker.Chunk
	a := client.NewAssembler()
	done := make(chan *client.Growing, 1)
	go func() {
		for ev := range s.Events() {
			m := ev.Frame.GetMessage()
			if ev.Kind != client.EventFrame || m.GetChunk() == nil {
				continue
			}
			g, ok, err := a.Feed(m)
			if err != nil {
				t.Error(err)
			}
			if ok {
				c := m.GetChunk()
				applied = append(applied, checker.Chunk{Seq: m.GetSeq(), Version: c.GetVersion(), Data: c.GetData(), Replace: c.GetReplace(), Final: c.GetFinal()})
			}
			if g != nil && g.Final {
				done <- g
				return
			}
		}
	}()

	joined := make(chan error, 1)
	go func() {
		_, err := s.Join(ctx, "chat")
		joined <- err
	}()
	c1.read()
	frame := func(m *corralv1.Message) *corralv1.ServerFrame {
		return &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Message{Message: m}}
	}
	c1.send(joinedF("chat", 20, "e1", false), frame(chunkF(19, 2, "Hello", true, false)), frame(chunkF(21, 3, ",", false, false)))
	if err := <-joined; err != nil {
		t.Fatal(err)
	}
	c1.ws.Close(websocket.StatusCode(corralv1.Code_CODE_GOING_AWAY), "restart")

	c2 := fake.accept(t)
	c2.read() // the resume
	// The replay holds chunks the member has (below its position and at
	// it), then the rest.
	c2.send(welcomeF(true), joinedF("chat", 21, "e1", true),
		frame(chunkF(19, 2, "Hello", true, false)), frame(chunkF(21, 3, ",", false, false)),
		frame(chunkF(22, 4, " you", false, false)), frame(chunkF(23, 5, "!", false, true)))
	c2.discard()
	select {
	case g := <-done:
		if err := checker.Assembly(applied, []byte("Hello, you!"), true); err != nil {
			t.Fatal(err)
		}
		if string(g.Body) != "Hello, you!" || g.Version != 5 {
			t.Fatalf("assembled %q v%d", g.Body, g.Version)
		}
	case <-ctx.Done():
		t.Fatalf("no final chunk; applied %v", applied)
	}
}

// FuzzAssembler feeds chunks and state changes decoded from arbitrary
// bytes (versions, seqs, flags, data, deltas as the network could send
// them): nothing panics, and whatever is applied keeps versions growing.
func FuzzAssembler(f *testing.F) {
	f.Add([]byte("\x01\x11\x00Hel\x02\x13\x00lo\x03\x14\x03!"))
	f.Add(append([]byte("\x01\x11\x00abc\x02\x12\x05"), delta.Encode([]byte("abc"), []byte("abd"))...))
	f.Fuzz(func(t *testing.T, b []byte) {
		a := &client.Assembler{MaxBytes: 1 << 12}
		st := client.NewState("doc")
		st.Snapshot(&corralv1.StateSnapshot{Room: "doc", Epoch: "e", Position: 0})
		var last uint64
		for len(b) >= 3 {
			version, seq, flags := uint64(b[0]), uint64(b[1]), b[2]
			b = b[3:]
			n := min(len(b), 8)
			data := b[:n]
			b = b[n:]
			c := &corralv1.MessageChunk{MessageSeq: 1, Version: version, Replace: flags&1 != 0, Final: flags&2 != 0}
			if flags&4 != 0 {
				c.Delta = data
			} else {
				c.Data = data
			}
			g, ok, _ := a.Feed(&corralv1.Message{Room: "r", Id: "x", Seq: seq, Chunk: c})
			if ok {
				if g.Version <= last && last != 0 {
					t.Fatalf("version %d applied after %d", g.Version, last)
				}
				last = g.Version
			}
			_, _ = st.Change(&corralv1.StateChange{Room: "doc", Key: "k", Version: version, Position: seq, Epoch: "e", Value: c.Data, Delta: c.Delta, Deleted: flags&8 != 0})
		}
	})
}
