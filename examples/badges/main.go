// Command badges is an example backend for corral: it follows the room
// event log (RoomService.Events) and, when a user posts their first
// message, awards them a "first message" badge by publishing a message
// into that room through the internal API.
//
// This is seed W4's side effect done right: the chat path never waits for
// the award (the badge is a reaction to a committed event, not part of the
// publish), and a restart of this backend loses and duplicates nothing:
//
//   - it stores its position in the log together with the users it has
//     awarded, in one file written atomically, after each batch of events;
//   - after a restart it resumes from the stored position, so every event
//     after it is processed, and no event before it is processed again;
//   - events processed again (after a crash between an award and the next
//     save) award again with the same idempotency key, which corral applies
//     once (within its dedupe window, 2 minutes by default).
//
// Run corral with its internal API, then this:
//
//	corral serve --insecure-dev --internal-addr 127.0.0.1:8091
//	go run ./examples/badges --api http://127.0.0.1:8091 --state badges.json
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/corral-rt/corral/apiclient"
)

func main() {
	api := flag.String("api", "http://127.0.0.1:8091", "base `URL` of corral's internal API")
	key := flag.String("key", os.Getenv("CORRAL_API_KEY"), "API `key` (default $CORRAL_API_KEY)")
	statePath := flag.String("state", "badges.json", "`file` keeping the position and the awarded users")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a := &awarder{
		api:       apiclient.New(*api, *key, nil),
		statePath: *statePath,
		log:       slog.Default(),
	}
	if err := a.run(ctx); err != nil && ctx.Err() == nil {
		slog.Error("badges stopped", "err", err)
		os.Exit(1)
	}
}
