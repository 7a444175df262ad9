package client_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"time"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/client"
	"github.com/corral-rt/corral/config"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/server"
)

// runCorral starts corral in this process, as `corral serve --insecure-dev`
// would, and returns its WebSocket URL and a stop function.
func runCorral() (string, func()) {
	node, err := server.Start(server.Options{
		Mode:   server.Serve,
		Node:   config.Node{Addr: "127.0.0.1:0"},
		Auth:   auth.Dev{},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := waitReady(node.Addr(), 10*time.Second); err != nil {
		log.Fatal(err)
	}
	return "ws://" + node.Addr() + "/ws", func() { node.Close(context.Background()) }
}

func ExampleDial() {
	url, stop := runCorral()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// With --insecure-dev the token is the user id.
	c, err := client.Dial(ctx, url, client.Options{Token: "alice"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Println("welcome", c.Welcome().GetUserId())

	j, err := c.Join(ctx, "lobby", 0, "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("joined", j.GetRoom(), "at seq", j.GetSeq())

	p, err := c.Publish(ctx, "lobby", "m1", []byte(`{"text":"hello, room"}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("published at seq", p.GetSeq())

	// Every frame arrives on Frames, our own message included.
	for f := range c.Frames() {
		if m := f.GetMessage(); m != nil {
			fmt.Printf("%d %s: %s\n", m.GetSeq(), m.GetSender(), m.GetPayload())
			break
		}
	}
	// Output:
	// welcome alice
	// joined lobby at seq 0
	// published at seq 1
	// 1 alice: {"text":"hello, room"}
}

func ExampleConnect() {
	url, stop := runCorral()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// A Session reconnects and resumes by itself; the zero Backoff is the
	// default one (300ms, doubling, capped at 10s, full jitter).
	s, err := client.Connect(ctx, url, client.SessionOptions{
		Options: client.Options{Token: "bob"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Join(ctx, "lobby"); err != nil {
		log.Fatal(err)
	}
	// A publish waits for its seq; across a drop it is sent again with
	// the same id and applied once.
	if _, err := s.Publish(ctx, "lobby", "m1", []byte(`"hi"`)); err != nil {
		log.Fatal(err)
	}

	for ev := range s.Events() {
		switch ev.Kind {
		case client.EventConnected:
			fmt.Println("connected, resumed:", ev.Resumed)
		case client.EventDisconnected:
			fmt.Println("disconnected:", ev.Err) // the Session reconnects
		case client.EventReset:
			fmt.Println("refetch the state of", ev.Room)
		case client.EventFrame:
			if m := ev.Frame.GetMessage(); m != nil {
				fmt.Printf("%d %s: %s\n", m.GetSeq(), m.GetSender(), m.GetPayload())
				return
			}
		}
	}
	// Output:
	// connected, resumed: false
	// 1 bob: "hi"
}

func ExampleConn_JoinPresence() {
	url, stop := runCorral()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	c, err := client.Dial(ctx, url, client.Options{Token: "alice"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.JoinPresence(ctx, "lobby", []byte(`{"name":"Alice"}`)); err != nil {
		log.Fatal(err)
	}
	// A snapshot comes first (at the room's next presence tick), then
	// diffs; a Roster applies them.
	var who client.Roster
	for f := range c.Frames() {
		if p := f.GetPresence(); p != nil {
			who.Apply(p)
			if who.Get("alice") != nil {
				break
			}
		}
	}
	for _, m := range who.List() {
		fmt.Println(m.GetUserId(), string(m.GetState()), m.GetConnections())
	}
	// Output: alice {"name":"Alice"} 1
}

func ExampleOptions_resume() {
	url, stop := runCorral()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	alice, err := client.Dial(ctx, url, client.Options{Token: "alice"})
	if err != nil {
		log.Fatal(err)
	}
	j, err := alice.Join(ctx, "lobby", 0, "")
	if err != nil {
		log.Fatal(err)
	}
	// Keep what a resume needs: the welcome's session id and resume
	// token, and per room the last seq processed and its epoch.
	w := alice.Welcome()
	pos := &corralv1.RoomPosition{Room: "lobby", Seq: j.GetSeq(), Epoch: j.GetEpoch()}
	alice.CloseNow() // the network drops

	// Meanwhile bob publishes.
	bob, err := client.Dial(ctx, url, client.Options{Token: "bob"})
	if err != nil {
		log.Fatal(err)
	}
	defer bob.Close()
	if _, err := bob.Join(ctx, "lobby", 0, ""); err != nil {
		log.Fatal(err)
	}
	if _, err := bob.Publish(ctx, "lobby", "b1", []byte(`"while you were away"`)); err != nil {
		log.Fatal(err)
	}

	// alice comes back: the session continues, she is in lobby again,
	// and the server replays what she missed.
	alice, err = client.Dial(ctx, url, client.Options{Token: "alice", Resume: &corralv1.Resume{
		SessionId:   w.GetSessionId(),
		ResumeToken: w.GetResumeToken(),
		Rooms:       []*corralv1.RoomPosition{pos},
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer alice.Close()
	fmt.Println("resumed", alice.Welcome().GetResumed())
	for f := range alice.Frames() {
		if m := f.GetMessage(); m != nil {
			fmt.Printf("%d %s: %s\n", m.GetSeq(), m.GetSender(), m.GetPayload())
			break
		}
	}
	// Output:
	// resumed true
	// 1 bob: "while you were away"
}

// A TokenProvider fetches a fresh token from the application's backend for
// every connection, and lets a Session refresh the token on the live
// connection before it expires (Welcome.ExpiresUnix).
func ExampleOptions_tokenProvider() {
	url, stop := runCorral()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	fetchToken := func(ctx context.Context) (string, error) {
		// Ask the backend here; with --insecure-dev the token is the
		// user id, and it never expires.
		return "alice", nil
	}
	s, err := client.Connect(ctx, url, client.SessionOptions{
		Options: client.Options{TokenProvider: fetchToken},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Join(ctx, "lobby"); err != nil {
		log.Fatal(err)
	}
	w := s.Welcome()
	fmt.Println(w.GetUserId(), w.GetExpiresUnix())
	// Output: alice 0
}
