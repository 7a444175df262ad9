package integration_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connecthttp"
	"connectrpc.com/connect/v2/connectinprocess"
	"github.com/corral-rt/corral/apiclient"
	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/client"
	"github.com/corral-rt/corral/config"
	linkv1 "github.com/corral-rt/corral/gen/corral/link/v1"
	"github.com/corral-rt/corral/gen/corral/link/v1/linkv1connect"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
	"github.com/corral-rt/corral/internal/buildinfo"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/server"
)

// transports are the ways a backend reaches the internal API: Connect,
// gRPC and gRPC-Web over h2c, and in-process through the node's auth.
var transports = []string{"connect", "grpc", "grpcweb", "inprocess"}

func apiOver(d *deployment, transport, key string) corralv1connect.RoomServiceClient {
	switch transport {
	case "grpc":
		return apiclient.New(d.apiURL, key, &apiclient.Options{Protocol: apiclient.GRPC})
	case "grpcweb":
		return apiclient.New(d.apiURL, key, &apiclient.Options{Protocol: apiclient.GRPCWeb})
	case "inprocess":
		return apiclient.New("", key, &apiclient.Options{Transport: connectinprocess.New(d.apiNode.APIServer())})
	}
	return apiclient.New(d.apiURL, key, nil)
}

// linkOver is an edge's Link client to d's core over transport, presenting
// key: the link is served beside the API, behind the same key check.
func linkOver(d *deployment, transport, key string) linkv1connect.LinkServiceClient {
	var t connect.Transport
	switch transport {
	case "grpc":
		t = connecthttp.NewTransport(apiclient.H2CClient(), d.apiURL, connecthttp.WithGRPC())
	case "grpcweb":
		t = connecthttp.NewTransport(apiclient.H2CClient(), d.apiURL, connecthttp.WithGRPCWeb())
	case "inprocess":
		t = connectinprocess.New(d.apiNode.APIServer())
	default:
		t = connecthttp.NewTransport(apiclient.H2CClient(), d.apiURL)
	}
	var ics []connect.ClientInterceptor
	if key != "" {
		ics = append(ics, apiclient.Bearer(key))
	}
	return linkv1connect.NewLinkServiceClient(connect.NewClient(t, ics...))
}

// eventPump receives an Events stream on a goroutine.
type eventPump struct {
	ch     chan *corralv1.EventsResponse
	err    error // set before ch closes
	cancel context.CancelFunc
}

func follow(t *testing.T, api corralv1connect.RoomServiceClient, req *corralv1.EventsRequest) *eventPump {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := api.Events(ctx, req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	p := &eventPump{ch: make(chan *corralv1.EventsResponse, 1024), cancel: cancel}
	go func() {
		defer close(p.ch)
		for {
			res, err := stream.Receive()
			if err != nil {
				p.err = err
				return
			}
			p.ch <- res
		}
	}()
	t.Cleanup(cancel)
	return p
}

// next returns the next response, failing the test on error or timeout.
func (p *eventPump) next(t *testing.T) *corralv1.EventsResponse {
	t.Helper()
	select {
	case res, ok := <-p.ch:
		if !ok {
			t.Fatalf("events stream ended: %v", p.err)
		}
		return res
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for events")
	}
	return nil
}

// until collects events until done says it has what it wants.
func (p *eventPump) until(t *testing.T, done func([]*corralv1.Event) bool) []*corralv1.Event {
	t.Helper()
	var evs []*corralv1.Event
	for !done(evs) {
		evs = append(evs, p.next(t).GetEvents()...)
	}
	return evs
}

// firstError waits for the stream to end and returns why.
func (p *eventPump) firstError(t *testing.T) error {
	t.Helper()
	for {
		select {
		case _, ok := <-p.ch:
			if !ok {
				return p.err
			}
		case <-time.After(10 * time.Second):
			t.Fatal("timed out waiting for the events stream to fail")
		}
	}
}

func codeOf(err error) connect.Code { return connect.CodeOf(err) }

// TestAPIEveryRPC calls every internal RPC over every transport, against
// every topology, with WebSocket clients in the rooms.
func TestAPIEveryRPC(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, nil)
			for _, tr := range transports {
				t.Run(tr, func(t *testing.T) { exerciseAPI(t, d, tr) })
			}
		})
	}
}

func exerciseAPI(t *testing.T, d *deployment, tr string) {
	ctx := testCtx(t)
	api := apiOver(d, tr, testAPIKey)
	room := tr + ":lobby"
	others := []string{tr + ":b", tr + ":c"}
	alice, bob := tr+"-alice", tr+"-bob"

	// A backend follows this transport's rooms from the live end.
	pump := follow(t, api, &corralv1.EventsRequest{Rooms: []string{tr + ":*"}})
	if first := pump.next(t); len(first.GetEvents()) != 0 || first.GetPosition() == "" {
		t.Fatalf("first response: %v", first)
	}

	ca := dial(t, d, alice, protocol.JSON)
	cb := dial(t, d, bob, protocol.Proto)
	for _, c := range []*client.Conn{ca, cb} {
		if _, err := c.Join(ctx, room, 0, ""); err != nil {
			t.Fatal(err)
		}
	}

	// Publish, and a retry with the same key.
	cctx, info := connect.NewClientContext(ctx)
	pub, err := api.Publish(cctx, &corralv1.PublishRequest{Room: room, Payload: []byte(`{"n":1}`), IdempotencyKey: "k1", Sender: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	if hi, ok := info.TransportInfo.(*connecthttp.ClientInfo); ok {
		if hi.ResponseProto() != "HTTP/2.0" {
			t.Fatalf("%s spoke %s", tr, hi.ResponseProto())
		}
		if want := map[string]string{"connect": "connect", "grpc": "grpc", "grpcweb": "grpcweb"}[tr]; info.Protocol != want {
			t.Fatalf("protocol %q, want %q", info.Protocol, want)
		}
	} else if tr != "inprocess" {
		t.Fatalf("%s call was not over HTTP", tr)
	}
	again, err := api.Publish(ctx, &corralv1.PublishRequest{Room: room, Payload: []byte(`{"n":1}`), IdempotencyKey: "k1", Sender: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	if pub.GetSeq() != 1 || pub.GetDuplicate() || again.GetSeq() != 1 || !again.GetDuplicate() || again.GetEpoch() != pub.GetEpoch() {
		t.Fatalf("publish %v, retry %v", pub, again)
	}
	for _, c := range []*client.Conn{ca, cb} {
		m := nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return f.GetMessage() != nil }).GetMessage()
		if m.GetSeq() != 1 || m.GetSender() != "ops" || string(m.GetPayload()) != `{"n":1}` {
			t.Fatalf("member got %v", m)
		}
	}

	// Broadcast, and its retry.
	rooms := append([]string{room}, others...)
	bres, err := api.Broadcast(ctx, &corralv1.BroadcastRequest{Rooms: rooms, Payload: []byte(`"all"`), IdempotencyKey: "b1", Sender: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	if bres.GetFailed() != 0 || len(bres.GetResults()) != 3 {
		t.Fatalf("broadcast: %v", bres)
	}
	for i, r := range bres.GetResults() {
		want := uint64(1)
		if i == 0 {
			want = 2
		}
		if r.GetRoom() != rooms[i] || r.GetSeq() != want || r.GetDuplicate() {
			t.Fatalf("broadcast result %d: %v", i, r)
		}
	}
	bres, err = api.Broadcast(ctx, &corralv1.BroadcastRequest{Rooms: rooms, Payload: []byte(`"all"`), IdempotencyKey: "b1"})
	if err != nil || bres.GetFailed() != 0 || !bres.GetResults()[2].GetDuplicate() {
		t.Fatalf("broadcast retry: %v, %v", bres, err)
	}
	if m := nextFrame(t, ca, func(f *corralv1.ServerFrame) bool { return f.GetMessage() != nil }).GetMessage(); m.GetSeq() != 2 {
		t.Fatalf("alice got %v", m)
	}

	// History, both ways.
	h, err := api.History(ctx, &corralv1.HistoryRequest{Room: room, Limit: 1})
	if err != nil || len(h.GetMessages()) != 1 || h.GetMessages()[0].GetSeq() != 1 || !h.GetMore() || h.GetLastSeq() != 2 {
		t.Fatalf("history forward: %v, %v", h, err)
	}
	h, err = api.History(ctx, &corralv1.HistoryRequest{Room: room, Reverse: true, Limit: 1})
	if err != nil || len(h.GetMessages()) != 1 || h.GetMessages()[0].GetSeq() != 2 || !h.GetMore() {
		t.Fatalf("history backward: %v, %v", h, err)
	}

	// Members.
	mem, err := api.Members(ctx, &corralv1.MembersRequest{Room: room})
	if err != nil {
		t.Fatal(err)
	}
	if mem.GetConnections() != 2 || len(mem.GetMembers()) != 2 ||
		mem.GetMembers()[0].GetUserId() != alice || mem.GetMembers()[1].GetUserId() != bob ||
		mem.GetMembers()[0].GetSessionIds()[0] != ca.Welcome().GetSessionId() || mem.GetMembers()[1].GetConnections() != 1 {
		t.Fatalf("members: %v", mem)
	}

	// Disconnect bob: he is told to resume after the (jittered) delay.
	dres, err := api.Disconnect(ctx, &corralv1.DisconnectRequest{
		Target: &corralv1.DisconnectRequest_UserId{UserId: bob},
		Code:   corralv1.Code_CODE_GOING_AWAY, Reason: "maintenance", DelayMs: 100,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dres.GetSessionIds(), []string{cb.Welcome().GetSessionId()}) {
		t.Fatalf("disconnected %v", dres.GetSessionIds())
	}
	ce := waitClosed(t, cb)
	if int(ce.Code) != int(corralv1.Code_CODE_GOING_AWAY) || ce.Hint.GetReason() != "maintenance" ||
		ce.Hint.GetDelayMs() < 100 || ce.Hint.GetDelayMs() > 150 {
		t.Fatalf("bob closed with %d, hint %v", ce.Code, ce.Hint)
	}

	// The backend saw all of it, each once, after it was committed.
	evs := pump.until(t, func(evs []*corralv1.Event) bool {
		for _, ev := range evs {
			if ev.GetDisconnected() != nil {
				return true
			}
		}
		return false
	})
	var got []string
	for _, ev := range evs {
		switch k := ev.GetKind().(type) {
		case *corralv1.Event_Message:
			got = append(got, fmt.Sprintf("message %s #%d", ev.GetRoom(), k.Message.GetSeq()))
		case *corralv1.Event_Joined:
			got = append(got, fmt.Sprintf("joined %s %s", ev.GetRoom(), k.Joined.GetUserId()))
		case *corralv1.Event_Disconnected:
			d := k.Disconnected
			got = append(got, fmt.Sprintf("disconnected %s %s %s %q", ev.GetRoom(), d.GetUserId(), d.GetCode(), d.GetReason()))
		default:
			got = append(got, fmt.Sprintf("%v", ev))
		}
	}
	want := []string{
		fmt.Sprintf("joined %s %s", room, alice),
		fmt.Sprintf("joined %s %s", room, bob),
		fmt.Sprintf("message %s #1", room),
		fmt.Sprintf("message %s #2", room),
		fmt.Sprintf("message %s #1", others[0]),
		fmt.Sprintf("message %s #1", others[1]),
		fmt.Sprintf("disconnected %s %s CODE_GOING_AWAY \"maintenance\"", room, bob),
	}
	// Joins and broadcasts run concurrently; compare as sets, then check
	// that nothing came twice.
	if !sameElements(got, want) {
		t.Fatalf("events:\n got %q\nwant %q", got, want)
	}

	// The control API (apicontrol_test.go tests it in depth).
	batch, err := api.Batch(ctx, &corralv1.BatchRequest{Publishes: []*corralv1.PublishRequest{
		{Room: others[0], Payload: []byte(`"x"`)}, {Room: room, Payload: []byte(`"y"`)},
	}})
	if err != nil || batch.GetFailed() != 0 || batch.GetResults()[0].GetSeq() != 2 || batch.GetResults()[1].GetSeq() != 3 {
		t.Fatalf("batch: %v, %v", batch, err)
	}
	if m := nextFrame(t, ca, func(f *corralv1.ServerFrame) bool { return f.GetMessage() != nil }).GetMessage(); m.GetSeq() != 3 {
		t.Fatalf("alice got %v", m)
	}
	sres, err := api.Subscribe(ctx, &corralv1.SubscribeRequest{UserId: alice, Rooms: []string{others[1]}})
	if err != nil || sres.GetResults()[0].GetJoined() != 1 {
		t.Fatalf("subscribe: %v, %v", sres, err)
	}
	if j := nextFrame(t, ca, func(f *corralv1.ServerFrame) bool { return f.GetJoined() != nil }).GetJoined(); j.GetRoom() != others[1] {
		t.Fatalf("alice joined %v", j)
	}
	rres, err := api.Rooms(ctx, &corralv1.RoomsRequest{Pattern: tr + ":*"})
	if err != nil || len(rres.GetRooms()) != 2 || rres.GetRooms()[0].GetName() != others[1] || rres.GetRooms()[1].GetName() != room {
		t.Fatalf("rooms: %v, %v", rres, err)
	}
	ures, err := api.Unsubscribe(ctx, &corralv1.UnsubscribeRequest{UserId: alice, Rooms: []string{others[1]}})
	if err != nil || ures.GetResults()[0].GetLeft() != 1 {
		t.Fatalf("unsubscribe: %v, %v", ures, err)
	}
	if l := nextFrame(t, ca, func(f *corralv1.ServerFrame) bool { return f.GetLeft() != nil }).GetLeft(); l.GetCode() != corralv1.Code_CODE_UNSUBSCRIBED {
		t.Fatalf("alice left %v", l)
	}
	ires, err := api.Info(ctx, &corralv1.InfoRequest{})
	if err != nil || ires.GetNodes()[0].GetRole() != "core" || ires.GetNodes()[0].GetVersion() != buildinfo.Version() {
		t.Fatalf("info: %v, %v; want the core first, version %q", ires, err, buildinfo.Version())
	}
}

func sameElements(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestAPIAuth: without the right key every method is refused, over every
// transport, Link included; keys are required unless disabled.
func TestAPIAuth(t *testing.T) {
	d := start(t, "split", nil, nil)
	ctx := testCtx(t)
	for _, tr := range transports {
		for name, key := range map[string]string{"no key": "", "wrong key": "not-the-key-0123456789"} {
			t.Run(tr+"/"+name, func(t *testing.T) {
				api := apiOver(d, tr, key)
				_, err := api.Publish(ctx, &corralv1.PublishRequest{Room: "r", Payload: []byte("1")})
				if codeOf(err) != connect.CodeUnauthenticated {
					t.Fatalf("publish: %v", err)
				}
				_, err = api.Members(ctx, &corralv1.MembersRequest{Room: "r"})
				if codeOf(err) != connect.CodeUnauthenticated {
					t.Fatalf("members: %v", err)
				}
				stream, err := api.Events(ctx, &corralv1.EventsRequest{})
				if err == nil {
					_, err = stream.Receive()
				}
				if codeOf(err) != connect.CodeUnauthenticated {
					t.Fatalf("events: %v", err)
				}
				link, err := linkOver(d, tr, key).Link(ctx)
				if err == nil {
					_ = link.Send(&linkv1.LinkRequest{})
					_, err = link.Receive()
					link.Close()
				}
				if codeOf(err) != connect.CodeUnauthenticated {
					t.Fatalf("link: %v", err)
				}
			})
		}
	}
	// The history is untouched by the refused publishes.
	h, err := d.api.History(ctx, &corralv1.HistoryRequest{Room: "r"})
	if err != nil || h.GetLastSeq() != 0 {
		t.Fatalf("history after refusals: %v, %v", h, err)
	}

	t.Run("config", func(t *testing.T) {
		for name, opts := range map[string]server.Options{
			"core without keys":     {Mode: server.CoreOnly, Node: config.Node{Addr: "127.0.0.1:0"}},
			"internal without keys": {Mode: server.Serve, Node: config.Node{Addr: "127.0.0.1:0", InternalAddr: "127.0.0.1:0"}, Auth: auth.Dev{}},
			"short key":             {Mode: server.CoreOnly, Node: config.Node{Addr: "127.0.0.1:0"}, APIKeys: []string{"short"}},
		} {
			opts.Logger = quietLogger()
			if n, err := server.Start(opts); err == nil {
				n.Close(ctx)
				t.Errorf("%s: started", name)
			}
		}
	})
	t.Run("insecure", func(t *testing.T) {
		di := start(t, "split", nil, func(o *server.Options) { o.APIKeys, o.APIInsecure, o.CoreAPIKey = nil, true, "" })
		api := apiOver(di, "grpc", "")
		if _, err := api.Publish(ctx, &corralv1.PublishRequest{Room: "r", Payload: []byte("1")}); err != nil {
			t.Fatal(err)
		}
		c := dial(t, di, "ann", protocol.JSON) // the edge links without a key
		if _, err := c.Join(ctx, "r", 0, ""); err != nil {
			t.Fatal(err)
		}
	})
}

// TestHistoryPaging pages a room's history forward and backward.
func TestHistoryPaging(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, nil)
			ctx := testCtx(t)
			for i := 1; i <= 25; i++ {
				if _, err := d.api.Publish(ctx, &corralv1.PublishRequest{Room: "pages", Payload: payload(i)}); err != nil {
					t.Fatal(err)
				}
			}
			page := func(req *corralv1.HistoryRequest) ([]uint64, bool) {
				req.Room, req.Limit = "pages", 10
				h, err := d.api.History(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if h.GetFirstSeq() != 1 || h.GetLastSeq() != 25 || h.GetEpoch() == "" {
					t.Fatalf("state: first %d last %d epoch %q", h.GetFirstSeq(), h.GetLastSeq(), h.GetEpoch())
				}
				var seqs []uint64
				for _, m := range h.GetMessages() {
					seqs = append(seqs, m.GetSeq())
					if string(m.GetPayload()) != string(payload(int(m.GetSeq()))) {
						t.Fatalf("seq %d has payload %s", m.GetSeq(), m.GetPayload())
					}
				}
				return seqs, h.GetMore()
			}
			var forward []uint64
			for after := uint64(0); ; {
				seqs, more := page(&corralv1.HistoryRequest{AfterSeq: after})
				forward = append(forward, seqs...)
				if !more {
					break
				}
				after = seqs[len(seqs)-1]
			}
			var backward []uint64
			for before := uint64(0); ; {
				seqs, more := page(&corralv1.HistoryRequest{BeforeSeq: before, Reverse: true})
				backward = append(backward, seqs...)
				if !more {
					break
				}
				before = seqs[len(seqs)-1]
			}
			if len(forward) != 25 || len(backward) != 25 {
				t.Fatalf("forward %v, backward %v", forward, backward)
			}
			for i := range 25 {
				if forward[i] != uint64(i+1) || backward[i] != uint64(25-i) {
					t.Fatalf("forward %v, backward %v", forward, backward)
				}
			}
			if seqs, more := page(&corralv1.HistoryRequest{AfterSeq: 25}); len(seqs) != 0 || more {
				t.Fatalf("after the end: %v %v", seqs, more)
			}
			if _, err := d.api.History(ctx, &corralv1.HistoryRequest{}); codeOf(err) != connect.CodeInvalidArgument {
				t.Fatalf("no room: %v", err)
			}
		})
	}
}

// TestDisconnect: by user and by session; a STOP code ends the session, a
// RESUME code keeps it; bad requests are refused.
func TestDisconnect(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, nil)
			ctx := testCtx(t)
			pump := follow(t, d.api, &corralv1.EventsRequest{Kinds: []corralv1.EventKind{corralv1.EventKind_EVENT_KIND_DISCONNECTED}})
			pump.next(t)

			c1, c2 := dial(t, d, "carol", protocol.JSON), dial(t, d, "carol", protocol.Proto)
			for _, c := range []*client.Conn{c1, c2} {
				if _, err := c.Join(ctx, "hall", 0, ""); err != nil {
					t.Fatal(err)
				}
			}
			res, err := d.api.Disconnect(ctx, &corralv1.DisconnectRequest{
				Target: &corralv1.DisconnectRequest_UserId{UserId: "carol"},
				Code:   corralv1.Code_CODE_FORBIDDEN, Reason: "banned",
			})
			if err != nil || len(res.GetSessionIds()) != 2 {
				t.Fatalf("disconnect: %v, %v", res, err)
			}
			for _, c := range []*client.Conn{c1, c2} {
				if ce := waitClosed(t, c); int(ce.Code) != int(corralv1.Code_CODE_FORBIDDEN) || ce.Refusal.GetMessage() != "banned" || ce.Hint != nil {
					t.Fatalf("closed with %d, error frame %v, hint %v", ce.Code, ce.Refusal, ce.Hint)
				}
			}
			// STOP: the session is gone.
			w := c1.Welcome()
			_, err = client.Dial(ctx, d.wsURL, client.Options{Token: "carol", Resume: &corralv1.Resume{SessionId: w.GetSessionId(), ResumeToken: w.GetResumeToken()}})
			if ce, ok := err.(*client.CloseError); !ok || int(ce.Code) != int(corralv1.Code_CODE_SESSION_EXPIRED) {
				t.Fatalf("resume after a ban: %v", err)
			}
			evs := pump.until(t, func(evs []*corralv1.Event) bool { return len(evs) >= 2 })
			for _, ev := range evs {
				dd := ev.GetDisconnected()
				if dd.GetUserId() != "carol" || dd.GetCode() != corralv1.Code_CODE_FORBIDDEN || dd.GetReason() != "banned" || ev.GetRoom() != "hall" {
					t.Fatalf("event %v", ev)
				}
			}

			// RESUME by session: the session stays resumable.
			c3 := dial(t, d, "dave", protocol.JSON)
			if _, err := c3.Join(ctx, "hall", 0, ""); err != nil {
				t.Fatal(err)
			}
			w = c3.Welcome()
			res, err = d.api.Disconnect(ctx, &corralv1.DisconnectRequest{
				Target: &corralv1.DisconnectRequest_SessionId{SessionId: w.GetSessionId()},
				Code:   corralv1.Code_CODE_GOING_AWAY,
			})
			if err != nil || !slices.Equal(res.GetSessionIds(), []string{w.GetSessionId()}) {
				t.Fatalf("disconnect: %v, %v", res, err)
			}
			if ce := waitClosed(t, c3); int(ce.Code) != int(corralv1.Code_CODE_GOING_AWAY) {
				t.Fatalf("closed with %d", ce.Code)
			}
			back, err := client.Dial(ctx, d.wsURL, client.Options{Token: "dave", Resume: &corralv1.Resume{SessionId: w.GetSessionId(), ResumeToken: w.GetResumeToken()}})
			if err != nil {
				t.Fatal(err)
			}
			defer back.CloseNow()
			if !back.Welcome().GetResumed() {
				t.Fatal("not resumed")
			}

			// Nobody to disconnect, and bad requests.
			res, err = d.api.Disconnect(ctx, &corralv1.DisconnectRequest{Target: &corralv1.DisconnectRequest_UserId{UserId: "nobody"}, Code: corralv1.Code_CODE_GOING_AWAY})
			if err != nil || len(res.GetSessionIds()) != 0 {
				t.Fatalf("nobody: %v, %v", res, err)
			}
			for name, req := range map[string]*corralv1.DisconnectRequest{
				"no target":    {Code: corralv1.Code_CODE_GOING_AWAY},
				"no code":      {Target: &corralv1.DisconnectRequest_UserId{UserId: "dave"}},
				"unknown code": {Target: &corralv1.DisconnectRequest_UserId{UserId: "dave"}, Code: 17},
			} {
				if _, err := d.api.Disconnect(ctx, req); codeOf(err) != connect.CodeInvalidArgument {
					t.Errorf("%s: %v", name, err)
				}
			}
		})
	}
}

// TestBroadcast1000: one call publishes to 1,000 rooms; members in several
// of them each receive their rooms' messages; a retry is applied once.
func TestBroadcast1000(t *testing.T) {
	for _, mode := range []string{"serve", "redis"} {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, nil)
			ctx := testCtx(t)
			rooms := make([]string, 1000)
			for i := range rooms {
				rooms[i] = fmt.Sprintf("room-%04d", i)
			}
			type member struct {
				c     *client.Conn
				rooms []string
			}
			var members []member
			for i := range 6 {
				m := member{c: dial(t, d, fmt.Sprintf("m%d", i), protocol.Encoding(i%2)), rooms: []string{rooms[i*150], rooms[i*150+77], rooms[999-i]}}
				for _, r := range m.rooms {
					if _, err := m.c.Join(ctx, r, 0, ""); err != nil {
						t.Fatal(err)
					}
				}
				members = append(members, m)
			}
			res, err := d.api.Broadcast(ctx, &corralv1.BroadcastRequest{Rooms: rooms, Payload: []byte(`{"alert":"goal"}`), IdempotencyKey: "goal-1"})
			if err != nil {
				t.Fatal(err)
			}
			if res.GetFailed() != 0 || len(res.GetResults()) != 1000 {
				t.Fatalf("failed %d of %d", res.GetFailed(), len(res.GetResults()))
			}
			for i, r := range res.GetResults() {
				if r.GetRoom() != rooms[i] || r.GetSeq() != 1 || r.GetDuplicate() || r.GetErrorCode() != "" {
					t.Fatalf("result %d: %v", i, r)
				}
			}
			for _, m := range members {
				var got []string
				for len(got) < len(m.rooms) {
					msg := nextFrame(t, m.c, func(f *corralv1.ServerFrame) bool { return f.GetMessage() != nil }).GetMessage()
					if msg.GetSeq() != 1 || string(msg.GetPayload()) != `{"alert":"goal"}` {
						t.Fatalf("got %v", msg)
					}
					got = append(got, msg.GetRoom())
				}
				if !sameElements(got, m.rooms) {
					t.Fatalf("member got %v, want %v", got, m.rooms)
				}
			}
			res, err = d.api.Broadcast(ctx, &corralv1.BroadcastRequest{Rooms: rooms, Payload: []byte(`{"alert":"goal"}`), IdempotencyKey: "goal-1"})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res.GetResults() {
				if !r.GetDuplicate() || r.GetSeq() != 1 {
					t.Fatalf("retry: %v", r)
				}
			}

			// Checked before anything is published.
			for name, rs := range map[string][]string{
				"too many":  make([]string, 10001),
				"twice":     {"fresh-a", "fresh-a"},
				"bad name":  {"fresh-b", ""},
				"no rooms":  nil,
				"ctrl char": {"fresh-c", "a\x01"},
			} {
				_, err := d.api.Broadcast(ctx, &corralv1.BroadcastRequest{Rooms: rs, Payload: []byte("1")})
				if codeOf(err) != connect.CodeInvalidArgument {
					t.Errorf("%s: %v", name, err)
				}
			}
			for _, r := range []string{"fresh-a", "fresh-b", "fresh-c"} {
				if h, err := d.api.History(ctx, &corralv1.HistoryRequest{Room: r}); err != nil || h.GetLastSeq() != 0 {
					t.Fatalf("%s after refused broadcasts: %v, %v", r, h, err)
				}
			}
		})
	}
}

// backend follows Events like an application backend: it processes
// events, stores its position, and may "crash" and resume from what it
// stored.
type backend struct {
	t    *testing.T
	api  corralv1connect.RoomServiceClient
	pos  string // the stored position
	seen []*corralv1.Event
}

// run follows from the stored position until it has processed n more
// events, "crashing" in the middle of a response when crash is set (it
// stores the position of the last event it processed, not the
// response's).
func (b *backend) run(n int, crash bool) {
	b.t.Helper()
	req := &corralv1.EventsRequest{After: b.pos}
	p := follow(b.t, b.api, req)
	defer p.cancel()
	for n > 0 {
		res := p.next(b.t)
		evs := res.GetEvents()
		if len(evs) > n && crash {
			evs = evs[:n]
			b.seen = append(b.seen, evs...)
			b.pos = evs[len(evs)-1].GetPosition()
			return
		}
		b.seen = append(b.seen, evs...)
		n -= len(evs)
		b.pos = res.GetPosition()
	}
}

// TestEventsResume: a backend restarted several times, at response
// boundaries and in the middle of a response, while traffic goes on,
// processes every committed event exactly once, in log order.
func TestEventsResume(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, nil)
			ctx := testCtx(t)
			origin := follow(t, d.api, &corralv1.EventsRequest{}).next(t).GetPosition()

			const rooms, perRoom = 3, 60
			var wg sync.WaitGroup
			wg.Go(func() { // traffic: API publishes, and members coming and going
				for i := range perRoom {
					for r := range rooms {
						if _, err := d.api.Publish(ctx, &corralv1.PublishRequest{Room: fmt.Sprint("r", r), Payload: payload(i)}); err != nil {
							t.Error(err)
							return
						}
					}
					if i%10 == 0 {
						c, err := client.Dial(ctx, d.wsURL, client.Options{Token: fmt.Sprint("u", i)})
						if err != nil {
							t.Error(err)
							return
						}
						if _, err := c.Join(ctx, "r0", 0, ""); err != nil {
							t.Error(err)
						}
						c.Close()
					}
					time.Sleep(time.Millisecond)
				}
			})
			b := &backend{t: t, api: d.api, pos: origin}
			b.run(20, false)
			b.run(15, true)
			b.run(30, true)
			b.run(10, false)
			wg.Wait()
			total := rooms*perRoom + 6*2 // messages, and a join and a disconnect per member
			b.run(total-len(b.seen), true)

			// Exactly the log, from the start: nothing lost, nothing twice.
			ref := &backend{t: t, api: d.api, pos: origin}
			ref.run(total, false)
			if len(b.seen) != len(ref.seen) {
				t.Fatalf("backend processed %d events, the log has %d", len(b.seen), len(ref.seen))
			}
			last := map[string]uint64{}
			for i := range ref.seen {
				if b.seen[i].GetPosition() != ref.seen[i].GetPosition() {
					t.Fatalf("event %d: backend %v, log %v", i, b.seen[i], ref.seen[i])
				}
				if m := ref.seen[i].GetMessage(); m != nil {
					if m.GetSeq() != last[m.GetRoom()]+1 {
						t.Fatalf("room %s: seq %d after %d", m.GetRoom(), m.GetSeq(), last[m.GetRoom()])
					}
					last[m.GetRoom()] = m.GetSeq()
				}
			}
			for r := range rooms {
				if last[fmt.Sprint("r", r)] != perRoom {
					t.Fatalf("room r%d: %d messages", r, last[fmt.Sprint("r", r)])
				}
			}
			// Nothing more is pending.
			select {
			case res := <-follow(t, d.api, &corralv1.EventsRequest{After: b.pos}).ch:
				if len(res.GetEvents()) != 0 {
					t.Fatalf("left over: %v", res.GetEvents())
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no first response")
			}
		})
	}
}

// TestEventsAcrossCoreRestart: with Redis the log outlives corral: a
// backend resumes on a new process exactly where it stopped. In memory
// the log dies with the process, and resuming says so (out_of_range).
func TestEventsAcrossCoreRestart(t *testing.T) {
	addr := redistest.Start(t)
	prefix := redistest.Prefix(t)
	for _, mode := range []string{"redis", "serve"} {
		t.Run(mode, func(t *testing.T) {
			tune := func(o *server.Options) {
				if mode == "redis" {
					o.RedisURL, o.RedisPrefix = "redis://"+addr, prefix
				}
			}
			ctx := testCtx(t)
			publish := func(d *deployment, from, to int) {
				for i := from; i <= to; i++ {
					if _, err := d.api.Publish(ctx, &corralv1.PublishRequest{Room: "restart-" + mode, Payload: payload(i)}); err != nil {
						t.Fatal(err)
					}
				}
			}
			d1 := start(t, "serve", nil, tune)
			b := &backend{t: t, api: d1.api}
			b.pos = follow(t, d1.api, &corralv1.EventsRequest{}).next(t).GetPosition()
			publish(d1, 1, 10)
			b.run(5, true)
			if err := d1.apiNode.Close(ctx); err != nil {
				t.Fatal(err)
			}

			d2 := start(t, "serve", nil, tune)
			publish(d2, 11, 20)
			b.api = d2.api
			if mode == "serve" {
				p := follow(t, d2.api, &corralv1.EventsRequest{After: b.pos})
				if err := p.firstError(t); codeOf(err) != connect.CodeOutOfRange {
					t.Fatalf("resume on a new in-memory log: %v", err)
				}
				return
			}
			b.run(15, false)
			for i, ev := range b.seen {
				if ev.GetMessage().GetSeq() != uint64(i+1) {
					t.Fatalf("event %d: %v", i, ev)
				}
			}
		})
	}
}

// TestEventsFilters: rooms and kinds select events; positions still move
// past what is filtered out; a bad position is refused.
func TestEventsFilters(t *testing.T) {
	d := start(t, "serve", nil, nil)
	ctx := testCtx(t)
	p := follow(t, d.api, &corralv1.EventsRequest{Rooms: []string{"game:*"}, Kinds: []corralv1.EventKind{corralv1.EventKind_EVENT_KIND_MESSAGE}})
	p.next(t)
	c := dial(t, d, "eve", protocol.JSON)
	for _, r := range []string{"game:1", "chat"} {
		if _, err := c.Join(ctx, r, 0, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Publish(ctx, r, "p-"+r, []byte(`1`)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Publish(ctx, "game:1", "p2", []byte(`2`)); err != nil {
		t.Fatal(err)
	}
	evs := p.until(t, func(evs []*corralv1.Event) bool { return len(evs) >= 2 })
	if len(evs) != 2 || evs[0].GetMessage().GetId() != "p-game:1" || evs[1].GetMessage().GetId() != "p2" {
		t.Fatalf("filtered events: %v", evs)
	}
	for name, req := range map[string]*corralv1.EventsRequest{
		"bad position": {After: "garbage"},
		"bad kind":     {Kinds: []corralv1.EventKind{9}},
		"empty room":   {Rooms: []string{""}},
	} {
		if err := follow(t, d.api, req).firstError(t); codeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := follow(t, d.api, &corralv1.EventsRequest{After: "0123456789abcdef.5"}).firstError(t); codeOf(err) != connect.CodeOutOfRange {
		t.Errorf("foreign position: %v", err)
	}

	// Without an event log (events -1), Events says so.
	off := start(t, "serve", nil, func(o *server.Options) { o.EventsMaxLen = -1 })
	if err := follow(t, off.api, &corralv1.EventsRequest{}).firstError(t); codeOf(err) != connect.CodeUnimplemented {
		t.Errorf("no event log: %v", err)
	}
	if _, err := off.api.Publish(ctx, &corralv1.PublishRequest{Room: "r", Payload: []byte("1")}); err != nil {
		t.Errorf("publish without an event log: %v", err)
	}
}
