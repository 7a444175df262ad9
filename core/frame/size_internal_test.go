package frame

import (
	"math"
	"strings"
	"testing"

	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Size must be proto.Size for every frame: the link's queue bound
// and its sends' byte bound count it.
func TestFrameSizeIsProtoSize(t *testing.T) {
	rooms := []string{"", "r", strings.Repeat("a", 127), strings.Repeat("b", 128), strings.Repeat("c", 20000)}
	seqs := []uint64{0, 1, 127, 128, 1 << 35, math.MaxUint64}
	epochs := []string{"", "e1", strings.Repeat("x", 300)}
	var frames []*linkv1.CoreFrame
	for _, room := range rooms {
		for _, seq := range seqs {
			for _, epoch := range epochs {
				for _, conn := range []uint64{0, 5, math.MaxUint64} {
					for _, b := range []bool{false, true} {
						frames = append(frames,
							Position(conn, room, seq, epoch, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Joined{Joined: &corralv1.Joined{
								Room: room, Seq: seq, Epoch: epoch, Resumed: b, Replay: !b,
							}}}),
							Position(conn, room, seq, epoch, Reset(room, seq, epoch)),
							Position(conn, room, seq, epoch, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_ReplayEnd{ReplayEnd: &corralv1.ReplayEnd{Room: room, Seq: seq}}}),
							Position(conn, room, seq, epoch, nil),
							Position(conn, room, seq, epoch, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Joined{}}),
							Membership(conn, room, b),
							PresenceMembership(conn, room),
							Session(conn, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Welcome{Welcome: &corralv1.Welcome{
								SessionId: room, ResumeToken: epoch, UserId: room + epoch, Resumed: b,
								HeartbeatMs: uint32(seq), SessionTtlMs: math.MaxUint32, ExpiresUnix: int64(seq),
							}}}),
							Session(conn, nil),
							Replay(conn, room, seq, epoch, batchOf(room, seq, epoch, b)),
							Replay(conn, room, seq, epoch, nil),
							ReplayAck(conn, room, seq, epoch, batchOf(room, seq, epoch, b)),
							Live(room, seq, epoch, batchOf(room, seq, epoch, b).GetBatch().GetFrames()[0]),
							Live(room, seq, epoch, Reset(room, seq, epoch)),
						)
					}
				}
			}
		}
	}
	withUnknown := &corralv1.Message{Room: "r", Seq: 9, Payload: []byte("p")}
	withUnknown.ProtoReflect().SetUnknown(protoreflect.RawFields{0x40, 0x07}) // field 8, varint 7
	frames = append(frames,
		Replay(1, "r", 9, "e", &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Batch{Batch: &corralv1.Batch{
			Frames: []*corralv1.ServerFrame{{Kind: &corralv1.ServerFrame_Message{Message: withUnknown}}},
		}}}),
		Replay(1, "r", 9, "e", &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Batch{Batch: &corralv1.Batch{}}}),
		Replay(1, "r", 9, "e", &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Batch{Batch: &corralv1.Batch{
			Frames: []*corralv1.ServerFrame{{}, {Kind: &corralv1.ServerFrame_Message{Message: &corralv1.Message{}}}},
		}}}),
		Replay(1, "r", 9, "e", &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Batch{Batch: &corralv1.Batch{
			Frames: []*corralv1.ServerFrame{{Kind: &corralv1.ServerFrame_Pong{Pong: &corralv1.Pong{}}}},
		}}}),
	)
	// Kinds sized by proto.Size, and frames a sizer must not take for its
	// own (an empty kind, another ServerFrame in a position).
	frames = append(frames,
		&linkv1.CoreFrame{},
		&linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Position{}},
		&linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Membership{}},
		&linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Session{}},
		Position(1, "r", 2, "e", &corralv1.ServerFrame{}),
		Position(1, "r", 2, "e", &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Pong{Pong: &corralv1.Pong{}}}),
		Session(1, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Pong{Pong: &corralv1.Pong{}}}),
		Live("r", 3, "e", &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Signal{Signal: &corralv1.SignalEvent{Room: "r"}}}),
		Signals("r", &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Batch{Batch: &corralv1.Batch{}}}),
		Close(1, corralv1.Code_CODE_GOING_AWAY, "bye", 100),
		Left(1, &corralv1.Left{Room: "r"}),
	)
	for i, f := range frames {
		if got, want := Size(f), proto.Size(f); got != want {
			t.Fatalf("frame %d (%v): Size %d, proto.Size %d", i, f.GetKind(), got, want)
		}
	}
}

// batchOf is a replay Batch of three messages of room, every field set
// (or, with !full, the zero values of the optional ones).
func batchOf(room string, seq uint64, epoch string, full bool) *corralv1.ServerFrame {
	var frames []*corralv1.ServerFrame
	for i := range uint64(3) {
		m := &corralv1.Message{Room: room, Seq: seq + i}
		if full {
			m.Sender, m.Payload, m.TimeMs, m.Id, m.SenderInfo = epoch, []byte(room), -int64(seq), room+epoch, []byte(epoch)
			if i == 1 {
				m.Chunk = &corralv1.MessageChunk{MessageSeq: seq, Version: 2, Data: []byte(room), Replace: true, Final: true, Delta: []byte(epoch)}
			} else if i == 2 {
				m.Chunk = &corralv1.MessageChunk{} // set, every field zero
			}
		}
		frames = append(frames, &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Message{Message: m}})
	}
	return &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Batch{Batch: &corralv1.Batch{Frames: frames}}}
}

// Size knows these messages' fields by number: a field added to one
// of them must be added there too.
func TestFrameSizeKnowsEveryField(t *testing.T) {
	known := map[protoreflect.FullName][]protoreflect.FieldNumber{
		"corral.link.v1.ConnPosition": {1, 2, 3, 4, 5},
		"corral.link.v1.Membership":   {1, 2, 3, 4},
		"corral.link.v1.ConnSession":  {1, 2, 3, 4},
		"corral.link.v1.ConnReplay":   {1, 2, 3, 4, 5, 6},
		"corral.link.v1.RoomLive":     {1, 2, 3, 4},
		"corral.v1.Message":           {1, 2, 3, 4, 5, 6, 7, 8},
		"corral.v1.MessageChunk":      {1, 2, 3, 4, 5, 6},
		"corral.v1.Batch":             {1},
		"corral.v1.Joined":            {1, 2, 3, 4, 5},
		"corral.v1.Reset":             {1, 2, 3},
		"corral.v1.ReplayEnd":         {1, 2},
		"corral.v1.Welcome":           {1, 2, 3, 4, 5, 6, 7},
	}
	for _, m := range []proto.Message{
		&linkv1.ConnPosition{}, &linkv1.Membership{}, &linkv1.ConnSession{}, &linkv1.ConnReplay{}, &linkv1.RoomLive{},
		&corralv1.Message{}, &corralv1.MessageChunk{}, &corralv1.Batch{},
		&corralv1.Joined{}, &corralv1.Reset{}, &corralv1.ReplayEnd{}, &corralv1.Welcome{},
	} {
		d := m.ProtoReflect().Descriptor()
		want := known[d.FullName()]
		fields := d.Fields()
		if fields.Len() != len(want) {
			t.Errorf("%s has %d fields; Size sizes %v", d.FullName(), fields.Len(), want)
			continue
		}
		for _, n := range want {
			if fields.ByNumber(n) == nil {
				t.Errorf("%s has no field %d; Size sizes it", d.FullName(), n)
			}
		}
	}
}

// The join's frames sized by Size and by proto.Size: a Joined
// position, a replay Batch of three messages, a ReplayEnd, a membership.
func BenchmarkFrameSize(b *testing.B) {
	frames := []*linkv1.CoreFrame{
		Position(7, "room-42", 1000, "e1", &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Joined{Joined: &corralv1.Joined{Room: "room-42", Seq: 1000, Epoch: "e1", Replay: true}}}),
		Replay(7, "room-42", 1003, "e1", batchOf("room-42", 1001, "e1", true)),
		Position(7, "room-42", 1003, "e1", &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_ReplayEnd{ReplayEnd: &corralv1.ReplayEnd{Room: "room-42", Seq: 1003}}}),
		Membership(7, "room-42", true),
	}
	b.Run("Size", func(b *testing.B) {
		for b.Loop() {
			for _, f := range frames {
				Size(f)
			}
		}
	})
	b.Run("proto.Size", func(b *testing.B) {
		for b.Loop() {
			for _, f := range frames {
				proto.Size(f)
			}
		}
	})
}
