package history_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redis/rueidis"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
)

// Two processes sharing one Redis: each appends, and each relays to its own
// clients what its subscription delivers, in seq order.
func ExampleNewRedis() {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	store := history.NewRedis(client, history.RedisOptions{MaxLen: 10000})
	defer store.Close()

	ctx := context.Background()
	sub, err := store.Subscribe(ctx, func(room string, msg *corralv1.Message) {
		if msg == nil {
			// Reconnected: messages may have been missed; read history.
			return
		}
		log.Printf("%s #%d: %s", room, msg.GetSeq(), msg.GetPayload())
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	if err := sub.Add(ctx, "lobby"); err != nil {
		log.Fatal(err)
	}
	msg := &corralv1.Message{Room: "lobby", Sender: "ann", Payload: []byte(`"hi"`), Id: "c1"}
	res, err := store.Append(ctx, "lobby", msg, "session-1:c1")
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("seq %d in epoch %s (duplicate: %v)", res.Seq, res.Epoch, res.Duplicate)
}

// A growing message: a token stream appended chunk by chunk, and a member
// that joins in the middle reading the prefix and where it ends.
func ExampleMemory_Grow() {
	ctx := context.Background()
	s := history.NewMemory(history.MemoryOptions{})
	for _, tok := range []string{"Hel", "lo", ", wor"} {
		s.Grow(ctx, "chat", &corralv1.Message{Room: "chat", Id: "answer-1",
			Chunk: &corralv1.MessageChunk{Data: []byte(tok)}}, history.GrowLimits{})
	}
	prefix, _, _ := s.Assembled(ctx, "chat", "answer-1")
	fmt.Printf("%q up to seq %d, version %d\n", prefix.GetChunk().GetData(), prefix.GetSeq(), prefix.GetChunk().GetVersion())

	s.Grow(ctx, "chat", &corralv1.Message{Room: "chat", Id: "answer-1",
		Chunk: &corralv1.MessageChunk{Data: []byte("ld"), Final: true}}, history.GrowLimits{})
	// The joiner continues with the chunks after the prefix's seq.
	page, _ := s.Read(ctx, history.Query{Room: "chat", After: prefix.GetSeq()})
	for _, m := range page.Messages {
		fmt.Printf("seq %d: %q final %v\n", m.GetSeq(), m.GetChunk().GetData(), m.GetChunk().GetFinal())
	}
	_, err := s.Grow(ctx, "chat", &corralv1.Message{Room: "chat", Id: "answer-1",
		Chunk: &corralv1.MessageChunk{Data: []byte("!")}}, history.GrowLimits{})
	fmt.Println(err)
	// Output:
	// "Hello, wor" up to seq 3, version 3
	// seq 4: "ld" final true
	// history: grow "answer-1" in "chat": history: message is final
}
