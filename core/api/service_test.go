package api_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect/v2"
	"github.com/corral-rt/corral/core/api"
	"github.com/corral-rt/corral/core/door"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/sessions"
)

// fakeCore is a core whose tables the test writes: it records what the
// API asks of it. A method of api.Core it does not define panics (the
// nil embedded interface): no test here calls one.
type fakeCore struct {
	api.Core
	mu        sync.Mutex
	published []*corralv1.Message
	coreBytes uint64
	edgeBytes uint64
	members   []*corralv1.Member
	rooms     []*corralv1.RoomInfo
	kicked    []string
	left      string // the reason UnsubscribeHere was given
	presErr   error  // what Presence fails with
}

func (f *fakeCore) Publish(ctx context.Context, msg *corralv1.Message, dedupe string, order history.Sender) (history.AppendResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.published = append(f.published, msg)
	return history.AppendResult{Seq: uint64(len(f.published)), Epoch: "e"}, nil
}

func (f *fakeCore) Backlog() (uint64, uint64, bool) { return f.coreBytes, f.edgeBytes, false }

func (f *fakeCore) Members(room string, limit int) ([]*corralv1.Member, bool) {
	return f.members, len(f.members) > limit
}

func (f *fakeCore) Presence(ctx context.Context, room string) ([]*corralv1.PresenceMember, error) {
	return nil, f.presErr
}

func (f *fakeCore) Rooms(after string, keep func(string) bool, n int) []*corralv1.RoomInfo {
	var out []*corralv1.RoomInfo
	for _, r := range f.rooms {
		if r.GetName() > after && keep(r.GetName()) && len(out) < n {
			out = append(out, r)
		}
	}
	return out
}

func (f *fakeCore) Nodes() []*corralv1.NodeInfo {
	return []*corralv1.NodeInfo{{Id: "me", Role: "core"}}
}

func (f *fakeCore) Connections(user, session, after string, n int) []*corralv1.ConnectionInfo {
	return nil
}

func (f *fakeCore) Signals(room string, n int) []*corralv1.SignalEvent { return nil }

func (f *fakeCore) Kick(user, session string, code corralv1.Code, reason string, delayMs uint32, stop bool) []string {
	return f.kicked
}

func (f *fakeCore) EnforceGrants(ctx context.Context, user string) ([]string, int) { return nil, 0 }

func (f *fakeCore) SubscribeHere(ctx context.Context, req *corralv1.SubscribeRequest, since map[string]*corralv1.RoomPosition, wait bool) *corralv1.SubscribeResponse {
	return &corralv1.SubscribeResponse{}
}

func (f *fakeCore) UnsubscribeHere(ctx context.Context, req *corralv1.UnsubscribeRequest, reason string, wait bool) *corralv1.UnsubscribeResponse {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.left = reason
	return &corralv1.UnsubscribeResponse{}
}

// newService returns a Service over f with small bounds, and the reasons
// it counted.
func newService(t *testing.T, f *fakeCore, sess sessions.Store) (*api.Service, *[]api.Reason) {
	t.Helper()
	var counted []api.Reason
	s := api.New(api.Options{
		Core: f,
		Config: api.Config{
			MaxBroadcastRooms: 10, MaxMembers: 2, MaxBatch: 10, BroadcastConcurrency: 2,
			OverloadQueueBytes: 1000,
		},
		Door:       door.New(door.Options{MaxRoomName: 50}),
		MaxPayload: func(string) int { return 100 },
		History:    history.NewMemory(history.MemoryOptions{}),
		Sessions:   sess,
		Count:      func(r api.Reason) { counted = append(counted, r) },
	})
	return s, &counted
}

// TestPublishChecksThenPublishes: a publish is checked (room name,
// payload bound) before the core sees it, and the API's idempotency key
// reaches the core as its dedupe key.
func TestPublishChecksThenPublishes(t *testing.T) {
	f := &fakeCore{}
	s, _ := newService(t, f, nil)
	ctx := context.Background()
	for name, req := range map[string]*corralv1.PublishRequest{
		"no room":       {Payload: []byte(`1`)},
		"payload > 100": {Room: "r", Payload: make([]byte, 101)},
		"bad sender":    {Room: "r", Payload: []byte(`1`), Sender: "a\x00b"},
	} {
		if _, err := s.Publish(ctx, req); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("%s: %v, want invalid_argument", name, err)
		}
	}
	res, err := s.Publish(ctx, &corralv1.PublishRequest{Room: "r", Payload: []byte(`1`), Sender: "ann"})
	if err != nil || res.GetSeq() != 1 || res.GetEpoch() != "e" {
		t.Fatalf("publish: %v, %v", res, err)
	}
	if len(f.published) != 1 || f.published[0].GetRoom() != "r" || f.published[0].GetSender() != "ann" {
		t.Fatalf("the core got %v", f.published)
	}
}

// TestOverloadRefusedByReason: past the bound, a publish is refused
// resource_exhausted with a CODE_OVERLOADED detail and a retry hint,
// counted under the larger of the two queues; nothing reaches the core.
func TestOverloadRefusedByReason(t *testing.T) {
	for name, tc := range map[string]struct {
		coreBytes, edgeBytes uint64
		want                 api.Reason
	}{
		"link": {coreBytes: 2000, edgeBytes: 10, want: api.OverloadLink},
		"edge": {coreBytes: 10, edgeBytes: 2000, want: api.OverloadEdge},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeCore{coreBytes: tc.coreBytes, edgeBytes: tc.edgeBytes}
			s, counted := newService(t, f, nil)
			_, err := s.Publish(context.Background(), &corralv1.PublishRequest{Room: "r", Payload: []byte(`1`)})
			var ce *connect.Error
			if !errors.As(err, &ce) || ce.Code() != connect.CodeResourceExhausted || len(ce.Details()) != 1 {
				t.Fatalf("publish while overloaded: %v", err)
			}
			if !slices.Equal(*counted, []api.Reason{tc.want}) || len(f.published) != 0 {
				t.Fatalf("counted %v, published %v", *counted, f.published)
			}
		})
	}
}

// TestMembersSortedAndBounded: Members lists users in order with their
// session ids sorted, and refuses a room past MaxMembers.
func TestMembersSortedAndBounded(t *testing.T) {
	f := &fakeCore{members: []*corralv1.Member{
		{UserId: "bob", SessionIds: []string{"s3"}, Connections: 1},
		{UserId: "ann", SessionIds: []string{"s2", "s1"}, Connections: 2},
	}}
	s, _ := newService(t, f, nil)
	res, err := s.Members(context.Background(), &corralv1.MembersRequest{Room: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if m := res.GetMembers(); len(m) != 2 || m[0].GetUserId() != "ann" || !slices.Equal(m[0].GetSessionIds(), []string{"s1", "s2"}) || res.GetConnections() != 3 {
		t.Fatalf("members: %v", res)
	}
	f.members = append(f.members, &corralv1.Member{UserId: "cid"})
	if _, err := s.Members(context.Background(), &corralv1.MembersRequest{Room: "r"}); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("members past the bound: %v", err)
	}
}

// TestMembersHidesTheStore: a presence store's failure reaches the caller
// as Unavailable with a fixed text, never the store's own (an address).
func TestMembersHidesTheStore(t *testing.T) {
	f := &fakeCore{presErr: errors.New("dial tcp 10.1.2.3:6380: connect: connection refused")}
	s, _ := newService(t, f, nil)
	_, err := s.Members(context.Background(), &corralv1.MembersRequest{Room: "r"})
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("members with the store down: %v, want unavailable", err)
	}
	if ce, _ := errors.AsType[*connect.Error](err); ce == nil || strings.Contains(ce.Message(), "10.1.2.3") || strings.Contains(ce.Message(), "refused") {
		t.Fatalf("the caller sees the store's error: %v", err)
	}
}

// TestRoomsPages: Rooms pages by name, its token naming the last room of
// the page, until a page without one.
func TestRoomsPages(t *testing.T) {
	f := &fakeCore{}
	for i := range 5 {
		f.rooms = append(f.rooms, &corralv1.RoomInfo{Name: fmt.Sprintf("r%d", i), Members: 1})
	}
	s, _ := newService(t, f, nil)
	var got []string
	tok := ""
	for range 5 {
		res, err := s.Rooms(context.Background(), &corralv1.RoomsRequest{Limit: 2, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.GetRooms() {
			got = append(got, r.GetName())
		}
		if tok = res.GetNextPageToken(); tok == "" {
			break
		}
	}
	if !slices.Equal(got, []string{"r0", "r1", "r2", "r3", "r4"}) || tok != "" {
		t.Fatalf("paged %v, last token %q", got, tok)
	}
}

// TestDisconnectStopEndsSessions: a STOP code deletes the kicked
// sessions from the session store, and the named session even when it
// is not connected here; a resume code deletes none.
func TestDisconnectStopEndsSessions(t *testing.T) {
	ctx := context.Background()
	store := sessions.NewMemory(sessions.Options{})
	t.Cleanup(func() { store.Close() })
	var ids []string
	for range 3 {
		st, err := store.Create(ctx, "ann")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, st.ID)
	}
	f := &fakeCore{kicked: ids[:1]}
	s, _ := newService(t, f, store)
	alive := func(id string) bool { return store.Touch(ctx, id) == nil }

	res, err := s.Disconnect(ctx, &corralv1.DisconnectRequest{Target: &corralv1.DisconnectRequest_UserId{UserId: "ann"}, Code: corralv1.Code_CODE_GOING_AWAY})
	if err != nil || !slices.Equal(res.GetSessionIds(), ids[:1]) || !alive(ids[0]) {
		t.Fatalf("resume code: %v, %v; session alive %v", res, err, alive(ids[0]))
	}
	if _, err := s.Disconnect(ctx, &corralv1.DisconnectRequest{Target: &corralv1.DisconnectRequest_UserId{UserId: "ann"}, Code: corralv1.Code_CODE_FORBIDDEN}); err != nil || alive(ids[0]) {
		t.Fatalf("stop code: %v; kicked session alive %v", err, alive(ids[0]))
	}
	f.kicked = nil
	if _, err := s.Disconnect(ctx, &corralv1.DisconnectRequest{Target: &corralv1.DisconnectRequest_SessionId{SessionId: ids[1]}, Code: corralv1.Code_CODE_FORBIDDEN}); err != nil || alive(ids[1]) || !alive(ids[2]) {
		t.Fatalf("stop code of a session not here: %v; alive %v %v", err, alive(ids[1]), alive(ids[2]))
	}
	if _, err := s.Disconnect(ctx, &corralv1.DisconnectRequest{Code: corralv1.Code_CODE_FORBIDDEN}); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("no target: %v", err)
	}
}

// TestUnsubscribeReason: the core is given the request's reason, or the
// fixed text when it has none.
func TestUnsubscribeReason(t *testing.T) {
	f := &fakeCore{}
	s, _ := newService(t, f, nil)
	for reason, want := range map[string]string{
		"":    "the application removed this connection from the room",
		"bye": "bye",
	} {
		if _, err := s.Unsubscribe(context.Background(), &corralv1.UnsubscribeRequest{UserId: "ann", Rooms: []string{"r"}, Reason: reason}); err != nil {
			t.Fatal(err)
		}
		if f.left != want {
			t.Errorf("reason %q: the core got %q, want %q", reason, f.left, want)
		}
	}
}

// TestAPIRequestBounds: the bounds on what one keyed-state or publish
// request may name are refused invalid_argument before the core is
// asked (the fake core would panic if it were).
func TestAPIRequestBounds(t *testing.T) {
	s, _ := newService(t, &fakeCore{}, nil)
	ctx := context.Background()
	keys := make([]string, 1001)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	if _, err := s.GetState(ctx, &corralv1.GetStateRequest{Room: "r", Keys: keys}); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("GetState of 1,001 keys: %v, want invalid_argument", err)
	}
	long := strings.Repeat("s", 257)
	if _, err := s.Publish(ctx, &corralv1.PublishRequest{Room: "r", Payload: []byte(`1`), IdempotencyKey: "k", Stream: long, Seq: 1}); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("a publish whose stream is 257 bytes: %v, want invalid_argument", err)
	}
	if _, err := s.Publish(ctx, &corralv1.PublishRequest{Room: "r", Payload: []byte(`1`), Stream: "bot", Seq: 1}); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("a publish with seq and no idempotency key: %v, want invalid_argument", err)
	}
}
