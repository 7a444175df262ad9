package history_test

import (
	"context"
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
