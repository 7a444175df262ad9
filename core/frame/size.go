package frame

import (
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The encoded size of a CoreFrame, which the link's queue counts
// (linkserver.Link.Enqueue, linkserver.EnqueueEach). proto.Size walks a
// frame through reflection, two oneofs deep (CoreFrame, then ServerFrame) and deeper for
// a Batch; on a connection's worker goroutine that walk also grew the
// goroutine's stack. In a rejoin storm it was the largest single cost of
// the join path (1.4% of the server's CPU, most of it the replay's
// Batch). The frames a join, a connect and a room's fan-out send (a
// position with Joined, Reset or ReplayEnd; a replay Batch of Messages; a
// live Message or Reset; a membership; a session with its Welcome) are
// sized here from their fields instead, exactly as proto.Size would
// (size_internal_test.go checks both agree, and fails when one of
// these messages gains a field); any other frame goes to proto.Size.

// Size returns proto.Size(f).
func Size(f *linkv1.CoreFrame) int {
	switch k := f.GetKind().(type) {
	case *linkv1.CoreFrame_Position:
		p := k.Position
		if p == nil {
			break
		}
		inner, ok := serverFrameField(5, p.GetFrame())
		if !ok {
			break
		}
		return sizeMessage(6, sizeUint(1, p.GetConn())+sizeString(2, p.GetRoom())+sizeUint(3, p.GetSeq())+
			sizeString(4, p.GetEpoch())+inner)
	case *linkv1.CoreFrame_Replay:
		r := k.Replay
		if r == nil {
			break
		}
		inner, ok := serverFrameField(5, r.GetFrame())
		if !ok {
			break
		}
		return sizeMessage(4, sizeUint(1, r.GetConn())+sizeString(2, r.GetRoom())+sizeUint(3, r.GetSeq())+
			sizeString(4, r.GetEpoch())+inner+sizeBool(6, r.GetAck()))
	case *linkv1.CoreFrame_Live:
		l := k.Live
		if l == nil {
			break
		}
		inner, ok := serverFrameField(4, l.GetFrame())
		if !ok {
			break
		}
		return sizeMessage(1, sizeString(1, l.GetRoom())+sizeUint(2, l.GetSeq())+sizeString(3, l.GetEpoch())+inner)
	case *linkv1.CoreFrame_Membership:
		m := k.Membership
		if m == nil {
			break
		}
		return sizeMessage(10, sizeUint(1, m.GetConn())+sizeString(2, m.GetRoom())+sizeBool(3, m.GetMember())+sizeBool(4, m.GetPresence()))
	case *linkv1.CoreFrame_Session:
		s := k.Session
		if s == nil {
			break
		}
		inner, ok := serverFrameField(4, s.GetFrame())
		if !ok {
			break
		}
		return sizeMessage(8, sizeUint(1, s.GetConn())+sizeString(2, s.GetSessionId())+sizeString(3, s.GetResumeToken())+inner)
	}
	return proto.Size(f)
}

// serverFrameField sizes f, a ServerFrame this file knows, as field num
// of its parent (ok false: another kind). A nil f is no field at all.
func serverFrameField(num protowire.Number, f *corralv1.ServerFrame) (int, bool) {
	if f == nil {
		return 0, true
	}
	n, ok := serverFrameBody(f)
	if !ok {
		return 0, false
	}
	return sizeMessage(num, n), true
}

// serverFrameBody is the encoded size of f itself.
func serverFrameBody(f *corralv1.ServerFrame) (int, bool) {
	switch k := f.GetKind().(type) {
	case *corralv1.ServerFrame_Joined:
		if j := k.Joined; j != nil {
			return sizeMessage(2, sizeString(1, j.GetRoom())+sizeUint(2, j.GetSeq())+sizeString(3, j.GetEpoch())+
				sizeBool(4, j.GetResumed())+sizeBool(5, j.GetReplay())), true
		}
	case *corralv1.ServerFrame_Reset_:
		if r := k.Reset_; r != nil {
			return sizeMessage(10, sizeString(1, r.GetRoom())+sizeUint(2, r.GetSeq())+sizeString(3, r.GetEpoch())), true
		}
	case *corralv1.ServerFrame_ReplayEnd:
		if e := k.ReplayEnd; e != nil {
			return sizeMessage(15, sizeString(1, e.GetRoom())+sizeUint(2, e.GetSeq())), true
		}
	case *corralv1.ServerFrame_Message:
		if m := k.Message; m != nil {
			return sizeMessage(4, messageSize(m)), true
		}
	case *corralv1.ServerFrame_Welcome:
		if w := k.Welcome; w != nil {
			return sizeMessage(1, welcomeSize(w)), true
		}
	case *corralv1.ServerFrame_Batch:
		b := k.Batch
		if b == nil {
			break
		}
		n := 0
		for _, e := range b.GetFrames() {
			if e == nil {
				return 0, false
			}
			m, ok := serverFrameBody(e)
			if !ok {
				return 0, false
			}
			n += sizeMessage(1, m)
		}
		return sizeMessage(11, n), true
	}
	return 0, false
}

// messageSize counts a Message's unknown fields too: messages come from
// the history store, which a newer release may have written.
func messageSize(m *corralv1.Message) int {
	return len(m.ProtoReflect().GetUnknown()) + sizeString(1, m.GetRoom()) + sizeUint(2, m.GetSeq()) + sizeString(3, m.GetSender()) +
		sizeBytes(4, m.GetPayload()) + sizeUint(5, uint64(m.GetTimeMs())) + sizeString(6, m.GetId()) +
		sizeBytes(7, m.GetSenderInfo()) + chunkSize(m.GetChunk())
}

// chunkSize is Message.chunk's field (a growing message's chunk), nothing
// when unset.
func chunkSize(c *corralv1.MessageChunk) int {
	if c == nil {
		return 0
	}
	return sizeMessage(8, len(c.ProtoReflect().GetUnknown())+sizeUint(1, c.GetMessageSeq())+sizeUint(2, c.GetVersion())+
		sizeBytes(3, c.GetData())+sizeBool(4, c.GetReplace())+sizeBool(5, c.GetFinal())+sizeBytes(6, c.GetDelta()))
}

func welcomeSize(w *corralv1.Welcome) int {
	return sizeString(1, w.GetSessionId()) + sizeString(2, w.GetResumeToken()) + sizeString(3, w.GetUserId()) +
		sizeBool(4, w.GetResumed()) + sizeUint(5, uint64(w.GetHeartbeatMs())) + sizeUint(6, uint64(w.GetSessionTtlMs())) +
		sizeUint(7, uint64(w.GetExpiresUnix()))
}

// The encoded size of one proto3 field, nothing when it holds its zero
// value (a message field is always encoded when set).

func sizeUint(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(v)
}

func sizeString(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

func sizeBytes(num protowire.Number, b []byte) int {
	if len(b) == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(b))
}

func sizeBool(num protowire.Number, b bool) int {
	if !b {
		return 0
	}
	return protowire.SizeTag(num) + 1
}

func sizeMessage(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}
