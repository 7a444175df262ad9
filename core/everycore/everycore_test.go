package everycore_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/corral-rt/corral/core"
	"github.com/corral-rt/corral/core/everycore"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"google.golang.org/protobuf/proto"
)

// answerBus is a control bus that keeps the function its core answers
// other cores' queries with, and whose Ask the test scripts.
type answerBus struct {
	answer  func(ctx context.Context, q []byte) []byte
	answers [][]byte // what Ask returns
	asked   int
	err     error
}

func (b *answerBus) Publish(context.Context, []byte) (int, error) { return 0, nil }
func (b *answerBus) Listen(func([]byte))                          {}
func (b *answerBus) Answer(fn func(ctx context.Context, q []byte) []byte) {
	b.answer = fn
}
func (b *answerBus) Ask(ctx context.Context, q []byte) ([][]byte, int, error) {
	return b.answers, b.asked, b.err
}

// FuzzAnswerQuery: a query from the control bus (bytes another process
// wrote to Redis) never panics the core; an answer, when there is one,
// decodes as the response of the query's kind.
func FuzzAnswerQuery(f *testing.F) {
	kinds := everycore.QueryKinds
	seed := func(kind byte, m proto.Message) {
		b, _ := proto.Marshal(m)
		f.Add(append([]byte{kind}, b...))
	}
	seed(kinds["info"], &corralv1.InfoRequest{})
	seed(kinds["rooms"], &corralv1.RoomsRequest{Pattern: "game:*", Limit: 2, EveryCore: true})
	seed(kinds["connections"], &corralv1.ConnectionsRequest{Target: &corralv1.ConnectionsRequest_UserId{UserId: "u"}})
	seed(kinds["signals"], &corralv1.SignalsRequest{Room: "r", EveryCore: true})
	seed(kinds["members"], &corralv1.MembersRequest{Room: "r"})
	seed(kinds["disconnect"], &corralv1.DisconnectRequest{Target: &corralv1.DisconnectRequest_UserId{UserId: "u"}, Code: corralv1.Code_CODE_GOING_AWAY})
	f.Add([]byte{})
	f.Add([]byte("r\xff\xff"))
	bus := &answerBus{}
	c := core.New(core.Config{Control: bus})
	f.Cleanup(func() { c.Close() })
	if bus.answer == nil {
		f.Fatal("the core set no answer function on a control bus that asks")
	}
	responses := map[byte]func() proto.Message{
		kinds["info"]:        func() proto.Message { return &corralv1.InfoResponse{} },
		kinds["rooms"]:       func() proto.Message { return &corralv1.RoomsResponse{} },
		kinds["connections"]: func() proto.Message { return &corralv1.ConnectionsResponse{} },
		kinds["signals"]:     func() proto.Message { return &corralv1.SignalsResponse{} },
		kinds["members"]:     func() proto.Message { return &corralv1.MembersResponse{} },
		kinds["disconnect"]:  func() proto.Message { return &corralv1.DisconnectResponse{} },
	}
	f.Fuzz(func(t *testing.T, q []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		a := bus.answer(ctx, q)
		if a == nil {
			return
		}
		newRes, ok := responses[q[0]]
		if !ok {
			t.Fatalf("answered an unknown kind %q", q[0])
		}
		if err := proto.Unmarshal(a, newRes()); err != nil {
			t.Fatalf("answer to %q: %v", q[0], err)
		}
	})
}

// local is a core whose tables the test sets.
type local struct {
	everycore.Local
	members *corralv1.MembersResponse
}

func (l local) Members(context.Context, *corralv1.MembersRequest) (*corralv1.MembersResponse, error) {
	return proto.CloneOf(l.members), nil
}

func marshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// TestMerges: each view merges the other cores' answers with this
// core's: Members once per user, Rooms by name, Disconnect's ids once,
// and counts who answered and who did not (an undecodable answer is
// missing).
func TestMerges(t *testing.T) {
	ctx := context.Background()
	bus := &answerBus{asked: 3}
	own := &corralv1.MembersResponse{Members: []*corralv1.Member{{UserId: "a", SessionIds: []string{"s1"}, Connections: 1}}}
	cores := everycore.New(everycore.Options{Asker: bus, Local: local{members: own}, MaxMembers: 2,
		PageToken: func(last string) string { return "after:" + last }})

	t.Run("members", func(t *testing.T) {
		bus.answers = [][]byte{
			marshal(&corralv1.MembersResponse{Members: []*corralv1.Member{{UserId: "a", SessionIds: []string{"s2", "s1"}, Connections: 2}}}),
			marshal(&corralv1.MembersResponse{Members: []*corralv1.Member{{UserId: "b", SessionIds: []string{"s3"}, Connections: 1}}}),
			[]byte("\xff"),
		}
		res, err := cores.Members(ctx, &corralv1.MembersRequest{Room: "r", EveryCore: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.GetMembers()) != 2 || !slices.Equal(res.GetMembers()[0].GetSessionIds(), []string{"s1", "s2"}) || res.GetConnections() != 4 {
			t.Fatalf("merged %v", res)
		}
		if res.GetCoresAnswered() != 3 || res.GetCoresMissing() != 1 {
			t.Fatalf("answered %d, missing %d; want 3 (with this one) and 1", res.GetCoresAnswered(), res.GetCoresMissing())
		}
		bus.answers = append(bus.answers, marshal(&corralv1.MembersResponse{Members: []*corralv1.Member{{UserId: "c"}, {UserId: "d"}}}))
		if _, err := cores.Members(ctx, &corralv1.MembersRequest{Room: "r", EveryCore: true}); !errors.Is(err, everycore.ErrTooManyMembers) {
			t.Fatalf("past MaxMembers: %v, want ErrTooManyMembers", err)
		}
	})
	t.Run("rooms", func(t *testing.T) {
		bus.answers = [][]byte{marshal(&corralv1.RoomsResponse{Rooms: []*corralv1.RoomInfo{
			{Name: "a", Members: 2, LastSeq: 9, Epoch: "e2"}, {Name: "c", Members: 1},
		}})}
		mine := &corralv1.RoomsResponse{Rooms: []*corralv1.RoomInfo{{Name: "a", Members: 1, LastSeq: 5, Epoch: "e1"}, {Name: "b"}}}
		res := cores.Rooms(ctx, &corralv1.RoomsRequest{EveryCore: true}, mine, 2)
		if len(res.GetRooms()) != 2 || res.GetRooms()[0].GetMembers() != 3 || res.GetRooms()[0].GetEpoch() != "e2" || res.GetRooms()[1].GetName() != "b" {
			t.Fatalf("merged %v", res)
		}
		if res.GetNextPageToken() != "after:b" {
			t.Fatalf("next page token %q, want after:b", res.GetNextPageToken())
		}
	})
	t.Run("disconnect", func(t *testing.T) {
		bus.answers = [][]byte{marshal(&corralv1.DisconnectResponse{SessionIds: []string{"s2", "s1"}})}
		res := cores.Disconnect(ctx, &corralv1.DisconnectRequest{EveryCore: true}, &corralv1.DisconnectResponse{SessionIds: []string{"s1"}})
		if !slices.Equal(res.GetSessionIds(), []string{"s1", "s2"}) {
			t.Fatalf("closed %v", res.GetSessionIds())
		}
	})
}

// TestAloneAnswersForItself: without an Asker every view is this core's
// own, and AskNodes asks nobody.
func TestAloneAnswersForItself(t *testing.T) {
	cores := everycore.New(everycore.Options{Local: local{members: &corralv1.MembersResponse{}}, MaxMembers: 10})
	res := cores.Disconnect(context.Background(), &corralv1.DisconnectRequest{}, &corralv1.DisconnectResponse{SessionIds: []string{"s"}})
	if res.GetCoresAnswered() != 1 || res.GetCoresMissing() != 0 {
		t.Fatalf("alone: answered %d, missing %d", res.GetCoresAnswered(), res.GetCoresMissing())
	}
	if answers, asked := cores.AskNodes(context.Background(), []byte{everycore.NodeQueryKind}); answers != nil || asked != 0 {
		t.Fatalf("alone, AskNodes got %v from %d", answers, asked)
	}
}
