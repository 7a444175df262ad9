package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/corral-rt/corral/apiclient"
	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/server"
)

const key = "badges-test-key-0123456789"

// TestBadgesAcrossRestarts: users chat while the backend crashes (between
// an award and its checkpoint) and restarts several times; every user gets
// exactly one badge, and no chat publish ever waited for it.
func TestBadgesAcrossRestarts(t *testing.T) {
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) {
			opts := server.Options{
				Mode: server.Serve, Addr: "127.0.0.1:0", InternalAddr: "127.0.0.1:0",
				Auth: auth.Dev{}, APIKeys: []string{key},
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			}
			if store == "redis" {
				opts.RedisURL = "redis://" + redistest.Start(t)
				opts.RedisPrefix = redistest.Prefix(t)
			}
			node, err := server.Start(opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { node.Close(context.Background()) })
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			api := apiclient.New("http://"+node.InternalAddr(), key, nil)
			statePath := filepath.Join(t.TempDir(), "badges.json")
			newAwarder := func(crashAfter int) *awarder {
				return &awarder{api: api, statePath: statePath, crashAfter: crashAfter,
					log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			}

			// The first run only fixes the start position, then stops.
			first := newAwarder(0)
			fctx, fcancel := context.WithCancel(ctx)
			go func() {
				for !eventually.Within(time.Minute, func() bool {
					st, err := first.load()
					return err == nil && st.Position != ""
				}) {
				}
				fcancel()
			}()
			if err := first.run(fctx); !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}

			// Users chat: each posts a few messages, in two rooms.
			const users = 12
			var chat sync.WaitGroup
			for u := range users {
				chat.Go(func() {
					name := fmt.Sprintf("user%d", u)
					room := fmt.Sprint("room", u%2)
					c, err := client.Dial(ctx, "ws://"+node.Addr()+"/ws", client.Options{Token: name})
					if err != nil {
						t.Error(err)
						return
					}
					defer c.CloseNow()
					if _, err := c.Join(ctx, room, 0, ""); err != nil {
						t.Error(err)
						return
					}
					for i := range 3 {
						if _, err := c.Publish(ctx, room, fmt.Sprint(i), []byte(`"hi"`)); err != nil {
							t.Error(err)
							return
						}
						time.Sleep(time.Duration(u) * time.Millisecond)
					}
				})
			}

			// The backend crashes after 2, then 3, then 1 awards, each time
			// before it saved; then runs until every user has a badge.
			for _, n := range []int{2, 3, 1} {
				if err := newAwarder(n).run(ctx); !errors.Is(err, errCrash) {
					t.Fatalf("run: %v", err)
				}
			}
			chat.Wait()
			last := newAwarder(0)
			lctx, lcancel := context.WithCancel(ctx)
			go func() {
				defer lcancel()
				for {
					if st, err := last.load(); err == nil && len(st.Awarded) == users {
						return
					}
					select {
					case <-lctx.Done():
						return
					case <-time.After(10 * time.Millisecond):
					}
				}
			}()
			if err := last.run(lctx); !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}

			// Exactly one badge per user, in the room of their first message.
			badges := map[string]int{}
			for _, room := range []string{"room0", "room1"} {
				h, err := api.History(ctx, &corralv1.HistoryRequest{Room: room})
				if err != nil {
					t.Fatal(err)
				}
				firstRoom := map[string]bool{}
				for _, m := range h.GetMessages() {
					if m.GetSender() != bot {
						if _, seen := firstRoom[m.GetSender()]; !seen {
							firstRoom[m.GetSender()] = true
						}
						continue
					}
					var b struct{ User string }
					if err := json.Unmarshal(m.GetPayload(), &b); err != nil {
						t.Fatal(err)
					}
					if !firstRoom[b.User] {
						t.Fatalf("%s's badge came before their message in %s", b.User, room)
					}
					badges[b.User]++
				}
			}
			if len(badges) != users {
				t.Fatalf("%d users have badges, want %d: %v", len(badges), users, badges)
			}
			for u, n := range badges {
				if n != 1 {
					t.Fatalf("%s has %d badges", u, n)
				}
			}
		})
	}
}
