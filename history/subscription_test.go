package history_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/redis/rueidis"
)

// commandCalls reads how often Redis ran a command (INFO commandstats).
func commandCalls(t *testing.T, client rueidis.Client, cmd string) int {
	t.Helper()
	info, err := client.Do(context.Background(), client.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls=")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return 0
}

// TestSubscriptionBatches: a thousand rooms added at once, one Add each,
// share a few SUBSCRIBE commands; RemoveIf drops the chosen ones with one
// UNSUBSCRIBE and Redis ends with exactly the rest subscribed.
func TestSubscriptionBatches(t *testing.T) {
	s, client, addr := newRedis(t, history.RedisOptions{})
	if !redistest.Private(addr) {
		t.Skip("counts commands: needs a private redis-server")
	}
	ctx := context.Background()
	sub, err := s.Subscribe(ctx, func(string, *corralv1.Message) {})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	const rooms = 1000
	before := commandCalls(t, client, "subscribe")
	var wg sync.WaitGroup
	for i := range rooms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := sub.Add(ctx, fmt.Sprintf("r%d", i)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	n := commandCalls(t, client, "subscribe") - before
	if n > rooms/10 {
		t.Errorf("%d SUBSCRIBE commands for %d rooms added at once", n, rooms)
	}
	t.Logf("%d rooms added at once: %d SUBSCRIBE commands", rooms, n)
	numsub := func() int {
		chs, err := client.Do(ctx, client.B().PubsubChannels().Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		return len(chs)
	}
	if got := numsub(); got != rooms {
		t.Fatalf("%d channels subscribed, want %d", got, rooms)
	}
	if n := sub.RemoveIf(func(room string) bool { return room >= "r5" }); n == 0 {
		t.Fatal("RemoveIf removed nothing")
	}
	want := 0
	for i := range rooms {
		if fmt.Sprintf("r%d", i) < "r5" {
			want++
		}
	}
	waitFor(t, "unsubscribed", func() bool { return numsub() == want })
}

// TestSubscriptionTagged: a publication on a room's channel whose first
// byte is 0 goes to OnTagged, in order with the room's messages, and
// never to the message handler (keyed state's changes share the channel).
func TestSubscriptionTagged(t *testing.T) {
	s, client, _ := newRedis(t, history.RedisOptions{})
	ctx := context.Background()
	got := make(chan string, 10)
	sub, err := s.Subscribe(ctx, func(_ string, m *corralv1.Message) {
		if m != nil {
			got <- "message " + m.GetId()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	sub.OnTagged(func(room string, data []byte) { got <- "tagged " + room + " " + string(data[1:]) })
	if err := sub.Add(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	publish := func(data string) {
		if err := client.Do(ctx, client.B().Publish().Channel(s.Channel("r")).Message(data).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	publish("\x00one")
	if _, err := s.Append(ctx, "r", &corralv1.Message{Room: "r", Id: "m"}, ""); err != nil {
		t.Fatal(err)
	}
	publish("\x00two")
	for _, want := range []string{"tagged r one", "message m", "tagged r two"} {
		if g := <-got; g != want {
			t.Fatalf("got %q, want %q", g, want)
		}
	}
}
