package edge

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	"github.com/corral-rt/corral/gen/corral/link/v1/linkv1connect"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestLinkLostAnswersQueued: frames a client sent that were still queued for
// the core when the link's stream ended are answered 4103 UNAVAILABLE with
// their id (the SDK resends at once), not left to the SDK's resend timeout;
// frames that expect no answer are not answered. A growing message's
// append is answered as a publish (ref: its id).
func TestLinkLostAnswersQueued(t *testing.T) {
	cfg := (&Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Cores: make([]linkv1connect.LinkServiceClient, 1)}).withDefaults()
	e := &Edge{cfg: cfg, metrics: newMetrics(nil), conns: make(map[*conn]struct{}), users: make(map[string]int)}
	l := newLink(e, 0)
	l.up = true
	c := fuzzConn(e, l, 1, protocol.JSON)
	l.dispatch([]*linkv1.CoreFrame{{Kind: &linkv1.CoreFrame_Session{Session: &linkv1.ConnSession{Conn: 1, SessionId: "s", ResumeToken: "t", Frame: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Welcome{Welcome: &corralv1.Welcome{SessionId: "s", ResumeToken: "t"}}}}}}})
	c.mu.Lock()
	c.queue = c.queue[:0]
	c.mu.Unlock()

	sent := []*corralv1.ClientFrame{
		{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Room: "r", Id: "p1"}}},
		{Kind: &corralv1.ClientFrame_Ack{Ack: &corralv1.Ack{Room: "r", Seq: 1}}},
		{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Room: "r", Id: "p2"}}},
		{Kind: &corralv1.ClientFrame_Call{Call: &corralv1.Call{Id: 7}}},
		{Kind: &corralv1.ClientFrame_Append{Append: &corralv1.Append{Room: "r", Id: "a1", Data: []byte("tok")}}},
	}
	for _, f := range sent {
		if !l.forward(c, f) {
			t.Fatalf("forward %v: refused with the link up", f)
		}
	}
	l.down() // the stream ended with all of them still queued

	c.mu.Lock()
	queued := c.queue
	c.mu.Unlock()
	var got []string
	for _, b := range queued {
		var f corralv1.ServerFrame
		if err := protocol.DecodeServer(protocol.JSON, b, &f); err != nil {
			t.Fatal(err)
		}
		switch {
		case f.GetError() != nil:
			if f.GetError().GetCode() != corralv1.Code_CODE_UNAVAILABLE {
				t.Fatalf("publish %s answered %v, want CODE_UNAVAILABLE", f.GetError().GetRef(), f.GetError().GetCode())
			}
			got = append(got, "error:"+f.GetError().GetRef())
		case f.GetCallResult() != nil:
			if f.GetCallResult().GetError().GetCode() != corralv1.Code_CODE_UNAVAILABLE {
				t.Fatalf("call answered %v, want CODE_UNAVAILABLE", f.GetCallResult().GetError())
			}
			got = append(got, fmt.Sprint("call:", f.GetCallResult().GetId()))
		default:
			t.Fatalf("unexpected frame %v", &f)
		}
	}
	want := []string{"error:p1", "error:p2", "call:7", "error:a1"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the link dropped the client got %q, want %q", got, want)
	}
	if n := testutil.ToFloat64(e.metrics.refusedBy[refusedLinkLost]); n != 4 {
		t.Fatalf("refused{link_lost} = %v, want 4", n)
	}
}

// TestLinkLostAnswersInFlight: requests of every kind that expects an
// answer, passed to a core whose stream then ended after it took them
// (not queued), are each answered 4103 once, in the order sent; those the
// core answered before it went away get no extra error, and frames that
// expect no answer get none.
func TestLinkLostAnswersInFlight(t *testing.T) {
	cfg := (&Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Cores: make([]linkv1connect.LinkServiceClient, 1)}).withDefaults()
	e := &Edge{cfg: cfg, metrics: newMetrics(nil), conns: make(map[*conn]struct{}), users: make(map[string]int)}
	l := newLink(e, 0)
	l.up = true
	c := fuzzConn(e, l, 1, protocol.JSON)
	l.dispatch([]*linkv1.CoreFrame{{Kind: &linkv1.CoreFrame_Session{Session: &linkv1.ConnSession{Conn: 1, SessionId: "s", ResumeToken: "t", Frame: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Welcome{Welcome: &corralv1.Welcome{SessionId: "s", ResumeToken: "t"}}}}}}})

	sent := []*corralv1.ClientFrame{
		{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: "a"}}},
		{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: "b"}}},
		{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Room: "a", Id: "p1", Seq: 1}}},
		{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Room: "a", Id: "p2", Seq: 2}}},
		{Kind: &corralv1.ClientFrame_Signal{Signal: &corralv1.Signal{Room: "a", Key: "k"}}},
		{Kind: &corralv1.ClientFrame_Ack{Ack: &corralv1.Ack{Room: "a", Seq: 1}}},
		{Kind: &corralv1.ClientFrame_SetPresence{SetPresence: &corralv1.SetPresence{Room: "a"}}},
		{Kind: &corralv1.ClientFrame_Publish{Publish: &corralv1.Publish{Room: "a", Id: "p3", Seq: 3}}},
		{Kind: &corralv1.ClientFrame_Leave{Leave: &corralv1.Leave{Room: "b"}}},
		{Kind: &corralv1.ClientFrame_PresenceQuery{PresenceQuery: &corralv1.PresenceQuery{Room: "a"}}},
		{Kind: &corralv1.ClientFrame_Append{Append: &corralv1.Append{Room: "a", Id: "g1"}}},
		{Kind: &corralv1.ClientFrame_SetState{SetState: &corralv1.SetState{Room: "a", Key: "x", Ref: "s1"}}},
		{Kind: &corralv1.ClientFrame_DeleteState{DeleteState: &corralv1.DeleteState{Room: "a", Key: "x", Ref: "d1"}}},
		{Kind: &corralv1.ClientFrame_SetState{SetState: &corralv1.SetState{Room: "a", Key: "y", Ref: "s2"}}},
		{Kind: &corralv1.ClientFrame_Call{Call: &corralv1.Call{Id: 7}}},
		{Kind: &corralv1.ClientFrame_Call{Call: &corralv1.Call{Id: 8}}},
		{Kind: &corralv1.ClientFrame_PresenceQuery{PresenceQuery: &corralv1.PresenceQuery{Room: "b"}}},
	}
	for _, f := range sent {
		if !l.forward(c, f) {
			t.Fatalf("forward %v: refused with the link up", f)
		}
	}
	if !l.refresh(c, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Refresh{Refresh: &corralv1.Refresh{Token: "t2"}}},
		&corralv1.Identity{UserId: "u"}) {
		t.Fatal("refresh refused with the link up")
	}
	// The stream carried them all to the core ...
	if n := len(l.queue.Take(linkQueueFrames, 1<<30)); n != len(sent)+1 {
		t.Fatalf("the link queued %d frames, want %d", n, len(sent)+1)
	}
	// ... which answered some, out of order, before it went away: a
	// success or a refusal each, and room traffic that answers nothing.
	conn := func(f *corralv1.ServerFrame) *linkv1.CoreFrame {
		return &linkv1.CoreFrame{Kind: &linkv1.CoreFrame_Conn{Conn: &linkv1.ConnFrame{Conn: 1, Frame: f}}}
	}
	l.dispatch([]*linkv1.CoreFrame{
		{Kind: &linkv1.CoreFrame_Position{Position: &linkv1.ConnPosition{Conn: 1, Room: "a", Seq: 0, Epoch: "e",
			Frame: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Joined{Joined: &corralv1.Joined{Room: "a", Epoch: "e"}}}}}},
		conn(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Published{Published: &corralv1.Published{Room: "a", Id: "p2", Seq: 2}}}),
		conn(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Error{Error: &corralv1.Error{Room: "a", Ref: "p1", Code: corralv1.Code_CODE_FORBIDDEN}}}),
		{Kind: &linkv1.CoreFrame_Left{Left: &linkv1.ConnLeft{Conn: 1, Room: "b",
			Frame: &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Left{Left: &corralv1.Left{Room: "b"}}}}}},
		conn(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_StateUpdated{StateUpdated: &corralv1.StateUpdated{Room: "a", Ref: "s1"}}}),
		conn(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Error{Error: &corralv1.Error{Room: "a", Ref: "d1", Code: corralv1.Code_CODE_VERSION_CONFLICT}}}),
		conn(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_CallResult{CallResult: &corralv1.CallResult{Id: 8}}}),
		conn(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_PresencePage{PresencePage: &corralv1.PresencePage{Room: "b"}}}),
		conn(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Pong{Pong: &corralv1.Pong{Id: 1}}}),
	})
	c.mu.Lock()
	c.queue = c.queue[:0]
	c.mu.Unlock()
	l.down() // the stream ended with the rest unanswered

	want := []string{"error:b/", "error:a/p3", "error:a/", "error:a/g1", "error:a/s2", "call:7", "error:/"}
	if got := answersQueued(t, c); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the link dropped the client got %q, want %q", got, want)
	}
	if n := testutil.ToFloat64(e.metrics.refusedBy[refusedLinkLost]); n != float64(len(want)) {
		t.Fatalf("refused{link_lost} = %v, want %d", n, len(want))
	}
	// Nothing is left to answer a second time.
	c.mu.Lock()
	c.queue = c.queue[:0]
	c.mu.Unlock()
	l.down()
	if got := answersQueued(t, c); len(got) != 0 {
		t.Fatalf("a second failure answered %q again", got)
	}
}

// TestUnansweredBounded: a connection whose requests the core never
// answers keeps at most maxUnanswered of them; an answer settles one.
func TestUnansweredBounded(t *testing.T) {
	c := &conn{}
	for i := range maxUnanswered + 10 {
		c.trackLocked(request{kind: reqPublish, room: "r", ref: fmt.Sprint(i)})
	}
	if n := len(c.unanswered); n != maxUnanswered {
		t.Fatalf("tracked %d requests, want at most %d", n, maxUnanswered)
	}
	c.settleLocked(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Published{Published: &corralv1.Published{Room: "r", Id: "5"}}})
	c.settleLocked(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Published{Published: &corralv1.Published{Room: "r", Id: "5"}}})
	c.settleLocked(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Published{Published: &corralv1.Published{Room: "r", Id: "0"}}})
	if n := len(c.unanswered); n != maxUnanswered-2 {
		t.Fatalf("after two answers %d requests are left, want %d", n, maxUnanswered-2)
	}
	if r := c.unanswered[0]; r.ref != "1" {
		t.Fatalf("the earliest left is %q, want 1", r.ref)
	}
}

// answersQueued decodes c's queued answers as "error:room/ref" and
// "call:id".
func answersQueued(t *testing.T, c *conn) []string {
	t.Helper()
	c.mu.Lock()
	queued := append([][]byte(nil), c.queue...)
	c.mu.Unlock()
	var got []string
	for _, b := range queued {
		var f corralv1.ServerFrame
		if err := protocol.DecodeServer(protocol.JSON, b, &f); err != nil {
			t.Fatal(err)
		}
		switch {
		case f.GetError() != nil:
			if f.GetError().GetCode() != corralv1.Code_CODE_UNAVAILABLE {
				t.Fatalf("%v answered %v, want CODE_UNAVAILABLE", &f, f.GetError().GetCode())
			}
			got = append(got, "error:"+f.GetError().GetRoom()+"/"+f.GetError().GetRef())
		case f.GetCallResult() != nil:
			if f.GetCallResult().GetError().GetCode() != corralv1.Code_CODE_UNAVAILABLE {
				t.Fatalf("call answered %v, want CODE_UNAVAILABLE", f.GetCallResult().GetError())
			}
			got = append(got, fmt.Sprint("call:", f.GetCallResult().GetId()))
		default:
			t.Fatalf("unexpected frame %v", &f)
		}
	}
	return got
}

// TestAnswersMatchedByRequest (issue 35): an Error settles only the
// request of the kind it refuses (Error.frame): a refusal of a signal, a
// presence update or a presence query in a room leaves a join of that
// room in flight, and it is still answered 4103 when the link ends; a
// join's own refusal settles it. An Error naming no frame (a core from
// before the field) is matched by room and ref, as before.
func TestAnswersMatchedByRequest(t *testing.T) {
	errFrame := func(frame, room, ref string) *corralv1.ServerFrame {
		return &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Error{Error: &corralv1.Error{
			Code: corralv1.Code_CODE_NOT_JOINED, Frame: frame, Room: room, Ref: ref}}}
	}
	join := request{kind: reqJoin, frame: "join", room: "r"}
	query := request{kind: reqPresenceQuery, frame: "presenceQuery", room: "r"}
	pub := request{kind: reqPublish, frame: "publish", room: "r"} // no id
	for _, tc := range []struct {
		name   string
		answer *corralv1.ServerFrame
		left   []request // still unanswered, in order
	}{
		{"a signal's refusal settles nothing", errFrame("signal", "r", ""), []request{join, query, pub}},
		{"a presence update's refusal settles nothing", errFrame("setPresence", "r", ""), []request{join, query, pub}},
		{"a presence query's refusal settles the query", errFrame("presenceQuery", "r", ""), []request{join, pub}},
		{"an id-less publish's refusal settles the publish", errFrame("publish", "r", ""), []request{join, query}},
		{"a join's refusal settles the join", errFrame("join", "r", ""), []request{query, pub}},
		{"a join's refusal in another room settles nothing", errFrame("join", "s", ""), []request{join, query, pub}},
		{"an Error without frame: room and ref, the earliest", errFrame("", "r", ""), []request{query, pub}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &conn{}
			c.trackLocked(join)
			c.trackLocked(query)
			c.trackLocked(pub)
			c.settleLocked(tc.answer)
			if got := c.takeUnansweredLocked(); fmt.Sprint(got) != fmt.Sprint(tc.left) {
				t.Fatalf("unanswered after %v: %v, want %v", tc.answer, got, tc.left)
			}
		})
	}
}

// TestRefusalNamesFrame: the edge's own refusal of a request names the
// kind of frame it refuses, as the core's do.
func TestRefusalNamesFrame(t *testing.T) {
	for _, f := range []*corralv1.ClientFrame{
		{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: "r"}}},
		{Kind: &corralv1.ClientFrame_Signal{Signal: &corralv1.Signal{Room: "r"}}},
		{Kind: &corralv1.ClientFrame_PresenceQuery{PresenceQuery: &corralv1.PresenceQuery{Room: "r"}}},
		{Kind: &corralv1.ClientFrame_DeleteState{DeleteState: &corralv1.DeleteState{Room: "r", Ref: "d"}}},
	} {
		want := f.ProtoReflect().WhichOneof(f.ProtoReflect().Descriptor().Oneofs().ByName("kind")).JSONName()
		if got := requestOf(f).frame; got != want {
			t.Errorf("requestOf(%v).frame = %q, want %q", f, got, want)
		}
	}
}
