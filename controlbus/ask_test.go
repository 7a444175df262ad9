package controlbus_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/corral-rt/corral/controlbus"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/redistest"
)

// TestRedisAsk: a query reaches every other bus of the prefix once (not
// the asker, not another prefix) and their answers come back to the
// asker, bytes as sent; a bus that does not answer is counted, and Ask
// returns when its ctx ends instead of waiting for it.
func TestRedisAsk(t *testing.T) {
	addr := redistest.Start(t)
	prefix := redistest.Prefix(t)
	newBus := func(prefix string) *controlbus.Redis {
		b := controlbus.NewRedis(redistest.Client(t, addr), controlbus.RedisOptions{Prefix: prefix})
		t.Cleanup(func() { b.Close() })
		return b
	}
	a, b, c, other := newBus(prefix), newBus(prefix), newBus(prefix), newBus(prefix+"x")
	for name, bus := range map[string]*controlbus.Redis{"a": a, "b": b, "c": c, "other": other} {
		bus.Answer(func(_ context.Context, q []byte) []byte { return append([]byte(name+":"), q...) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Subscriptions start in the background: ask until both others answer.
	var answers [][]byte
	var asked int
	if !eventually.Within(20*time.Second, func() bool {
		actx, acancel := context.WithTimeout(ctx, time.Second)
		got, n, err := a.Ask(actx, []byte("q\x00\n1"))
		acancel()
		if err != nil && !errors.Is(err, controlbus.ErrNotListening) {
			t.Fatal(err)
		}
		answers, asked = got, n
		return asked == 2 && len(got) == 2
	}) {
		t.Fatalf("asked %d, answers %q", asked, answers)
	}
	var s []string
	for _, x := range answers {
		s = append(s, string(x))
	}
	slices.Sort(s)
	if want := []string{"b:q\x00\n1", "c:q\x00\n1"}; !slices.Equal(s, want) {
		t.Fatalf("answers %q, want %q", s, want)
	}

	// c stops answering: it is counted, and Ask ends with its ctx.
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	c.Answer(func(ctx context.Context, q []byte) []byte {
		select {
		case <-block:
		case <-ctx.Done():
		}
		return nil
	})
	actx, acancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer acancel()
	got, asked, err := a.Ask(actx, []byte("again"))
	if err != nil || asked != 2 || len(got) != 1 || string(got[0]) != "b:again" {
		t.Fatalf("with c silent: %q, asked %d, %v", got, asked, err)
	}
}
