package apiclient_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"time"

	"connectrpc.com/connect/v2/connectinprocess"
	"github.com/corral-rt/corral/apiclient"
	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/client"
	"github.com/corral-rt/corral/config"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/server"
)

const apiKey = "example-key-0123456789abcdef"

// runCorral starts corral in this process, as `CORRAL_API_KEYS=<key>
// corral serve --insecure-dev --internal-addr 127.0.0.1:0` would.
func runCorral() *server.Node {
	node, err := server.Start(server.Options{
		Mode: server.Serve,
		Node: config.Node{Addr: "127.0.0.1:0", InternalAddr: "127.0.0.1:0"},

		APIKeys: []string{apiKey},
		Auth:    auth.Dev{},
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		log.Fatal(err)
	}
	return node
}

func ExampleNew() {
	node := runCorral()
	defer node.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// gRPC over h2c; apiclient.Connect (the default) and apiclient.GRPCWeb
	// work the same way.
	api := apiclient.New("http://"+node.InternalAddr(), apiKey, &apiclient.Options{Protocol: apiclient.GRPC})

	// A retried publish with the same idempotency key is applied once.
	for range 2 {
		res, err := api.Publish(ctx, &corralv1.PublishRequest{
			Room: "lobby", Payload: []byte(`{"text":"maintenance at 5"}`),
			Sender: "ops", IdempotencyKey: "notice-17",
		})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("seq", res.GetSeq(), "duplicate", res.GetDuplicate())
	}

	b, err := api.Broadcast(ctx, &corralv1.BroadcastRequest{
		Rooms: []string{"lobby", "stage", "backstage"}, Payload: []byte(`"doors open"`),
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range b.GetResults() {
		fmt.Println(r.GetRoom(), "seq", r.GetSeq())
	}

	// The newest message first.
	h, err := api.History(ctx, &corralv1.HistoryRequest{Room: "lobby", Reverse: true, Limit: 1})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("newest: %s (more: %v)\n", h.GetMessages()[0].GetPayload(), h.GetMore())
	// Output:
	// seq 1 duplicate false
	// seq 1 duplicate true
	// lobby seq 2
	// stage seq 1
	// backstage seq 1
	// newest: "doors open" (more: true)
}

// A backend follows the event log, stores the position of each response
// it has processed, and resumes from it after a restart: it misses nothing
// and sees nothing twice.
func ExampleNew_events() {
	node := runCorral()
	defer node.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	api := apiclient.New("http://"+node.InternalAddr(), apiKey, nil)

	publish := func(text string) {
		_, err := api.Publish(ctx, &corralv1.PublishRequest{Room: "lobby", Payload: []byte(text)})
		if err != nil {
			log.Fatal(err)
		}
	}
	// follow processes events after pos until it has seen n, and returns
	// the position to store.
	follow := func(pos string, n int) string {
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		s, err := api.Events(sctx, &corralv1.EventsRequest{
			After: pos, Kinds: []corralv1.EventKind{corralv1.EventKind_EVENT_KIND_MESSAGE},
		})
		if err != nil {
			log.Fatal(err)
		}
		for {
			res, err := s.Receive()
			if err != nil {
				log.Fatal(err)
			}
			for _, ev := range res.GetEvents() {
				fmt.Printf("%s #%d %s\n", ev.GetRoom(), ev.GetMessage().GetSeq(), ev.GetMessage().GetPayload())
				n--
			}
			if n <= 0 {
				return res.GetPosition()
			}
		}
	}

	pos := follow("", 0) // the live end, stored before anything happens
	publish(`"one"`)
	publish(`"two"`)
	pos = follow(pos, 2)
	// The backend is down; the room goes on.
	publish(`"three"`)
	follow(pos, 1)
	// Output:
	// lobby #1 "one"
	// lobby #2 "two"
	// lobby #3 "three"
}

// The internal API in the same process, through the node's API key check:
// for tests, or a backend embedded in the server's binary.
func ExampleOptions_inProcess() {
	node := runCorral()
	defer node.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	api := apiclient.New("", apiKey, &apiclient.Options{Transport: connectinprocess.New(node.APIServer())})
	m, err := api.Members(ctx, &corralv1.MembersRequest{Room: "lobby"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("members:", len(m.GetMembers()))
	// Output:
	// members: 0
}

// Many publishes, each with its own room and payload, in one call; an
// invalid item fails alone.
func Example_batch() {
	node := runCorral()
	defer node.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	api := apiclient.New("http://"+node.InternalAddr(), apiKey, nil)

	res, err := api.Batch(ctx, &corralv1.BatchRequest{Parallel: true, Publishes: []*corralv1.PublishRequest{
		{Room: "game:1", Payload: []byte(`{"turn":1}`), IdempotencyKey: "g1-t1"},
		{Room: "game:2", Payload: []byte(`{"turn":4}`), IdempotencyKey: "g2-t4"},
		{Room: "game:1", Payload: []byte(`{"turn":2}`), IdempotencyKey: "g1-t2"},
		{Room: "", Payload: []byte(`{}`)},
	}})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range res.GetResults() {
		if r.GetErrorCode() != "" {
			fmt.Printf("%q failed: %s\n", r.GetRoom(), r.GetErrorCode())
			continue
		}
		fmt.Println(r.GetRoom(), "seq", r.GetSeq())
	}
	// Output:
	// game:1 seq 1
	// game:2 seq 1
	// game:1 seq 2
	// "" failed: invalid_argument
}

// The backend puts a user's live connections into a room, and takes them
// out: the client gets Joined, then Left with CODE_UNSUBSCRIBED.
func Example_subscribe() {
	node := runCorral()
	defer node.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	api := apiclient.New("http://"+node.InternalAddr(), apiKey, nil)

	alice, err := client.Dial(ctx, "ws://"+node.Addr()+"/ws", client.Options{Token: "alice"})
	if err != nil {
		log.Fatal(err)
	}
	defer alice.CloseNow()

	res, err := api.Subscribe(ctx, &corralv1.SubscribeRequest{UserId: "alice", Rooms: []string{"team:7"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("connections", res.GetConnections(), "joined", res.GetResults()[0].GetJoined())
	fmt.Println("alice:", (<-alice.Frames()).GetJoined().GetRoom())

	if _, err := api.Unsubscribe(ctx, &corralv1.UnsubscribeRequest{UserId: "alice", Rooms: []string{"team:7"}, Reason: "left the team"}); err != nil {
		log.Fatal(err)
	}
	left := (<-alice.Frames()).GetLeft()
	fmt.Println("alice left", left.GetRoom(), left.GetCode(), left.GetReason())
	// Output:
	// connections 1 joined 1
	// alice: team:7
	// alice left team:7 CODE_UNSUBSCRIBED left the team
}
