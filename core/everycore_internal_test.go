package core

import (
	"context"
	"testing"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"google.golang.org/protobuf/proto"
)

// FuzzAnswerQuery: a query from the control bus (bytes another process
// wrote to Redis) never panics the core; an answer, when there is one,
// decodes as the response of the query's kind.
func FuzzAnswerQuery(f *testing.F) {
	seed := func(kind byte, m proto.Message) {
		b, _ := proto.Marshal(m)
		f.Add(append([]byte{kind}, b...))
	}
	seed(queryInfo, &corralv1.InfoRequest{})
	seed(queryRooms, &corralv1.RoomsRequest{Pattern: "game:*", Limit: 2, EveryCore: true})
	seed(queryConnections, &corralv1.ConnectionsRequest{Target: &corralv1.ConnectionsRequest_UserId{UserId: "u"}})
	seed(querySignals, &corralv1.SignalsRequest{Room: "r", EveryCore: true})
	seed(queryMembers, &corralv1.MembersRequest{Room: "r"})
	seed(queryDisconnect, &corralv1.DisconnectRequest{Target: &corralv1.DisconnectRequest_UserId{UserId: "u"}, Code: corralv1.Code_CODE_GOING_AWAY})
	f.Add([]byte{})
	f.Add([]byte("r\xff\xff"))
	c := New(Config{})
	f.Cleanup(func() { c.Close() })
	f.Fuzz(func(t *testing.T, q []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		a := c.answerQuery(ctx, q)
		if a == nil {
			return
		}
		var res proto.Message
		switch q[0] {
		case queryInfo:
			res = &corralv1.InfoResponse{}
		case queryRooms:
			res = &corralv1.RoomsResponse{}
		case queryConnections:
			res = &corralv1.ConnectionsResponse{}
		case querySignals:
			res = &corralv1.SignalsResponse{}
		case queryMembers:
			res = &corralv1.MembersResponse{}
		case queryDisconnect:
			res = &corralv1.DisconnectResponse{}
		default:
			t.Fatalf("answered an unknown kind %q", q[0])
		}
		if err := proto.Unmarshal(a, res); err != nil {
			t.Fatalf("answer to %q: %v", q[0], err)
		}
	})
}
