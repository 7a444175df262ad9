// Command assistant is an example backend for corral's growing messages
// (docs/MESSAGES.md): it streams a made-up AI answer into a room token by
// token through the internal API's RoomService.Append (a client stream,
// one AppendRequest per token, each with the version it makes so that a
// retried stream appends each token once), then prints the whole answer
// on stdout. The demo page's assistant panel shows it growing; a page
// that joins or reloads in the middle shows the answer so far, then the
// rest.
//
//	corral serve --insecure-dev --internal-addr 127.0.0.1:8091
//	go run ./examples/assistant --api http://127.0.0.1:8091 --room lobby
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/corral-rt/corral/apiclient"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
)

func main() {
	api := flag.String("api", "http://127.0.0.1:8091", "base `URL` of corral's internal API")
	key := flag.String("key", os.Getenv("CORRAL_API_KEY"), "API `key` (default $CORRAL_API_KEY)")
	room := flag.String("room", "lobby", "the `room` to answer in")
	id := flag.String("id", fmt.Sprintf("answer-%d", time.Now().UnixMilli()), "the answer's message `id`")
	tokens := flag.Int("tokens", 60, "how many tokens the answer has")
	every := flag.Duration("every", 50*time.Millisecond, "the pause between two tokens, as a model's")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	answer, err := stream(ctx, apiclient.New(*api, *key, nil), *room, *id, Tokens(*tokens), *every)
	if err != nil {
		slog.Error("assistant stopped", "err", err)
		os.Exit(1)
	}
	fmt.Println(answer)
}

// Tokens is the made-up answer, n tokens long: the same for the same n.
func Tokens(n int) []string {
	words := strings.Fields("Growing messages arrive token by token, in the room's order, " +
		"and a member who joins in the middle first gets the answer so far, then every later token once.")
	out := make([]string, n)
	for i := range out {
		out[i] = words[i%len(words)] + " "
	}
	return out
}

// stream appends each token to the message id in room, the last one
// final, and returns the answer as appended.
func stream(ctx context.Context, api corralv1connect.RoomServiceClient, room, id string, tokens []string, every time.Duration) (string, error) {
	s, err := api.Append(ctx)
	if err != nil {
		return "", err
	}
	var answer strings.Builder
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i, tok := range tokens {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		req := &corralv1.AppendRequest{Room: room, Id: id, Data: []byte(tok), Final: i == len(tokens)-1,
			Sender: "assistant", Version: uint64(i + 1)}
		if err := s.Send(req); err != nil && !errors.Is(err, io.EOF) {
			return "", err
		}
		answer.WriteString(tok)
	}
	res, err := s.CloseAndReceive()
	if err != nil {
		return "", err
	}
	if int(res.GetChunks()) != len(tokens) || !res.GetFinal() {
		return "", fmt.Errorf("assistant: %d of %d tokens appended", res.GetChunks(), len(tokens))
	}
	return answer.String(), nil
}
