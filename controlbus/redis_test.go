package controlbus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corral-rt/corral/controlbus"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/redistest"
)

// TestRedis: a command published by one bus reaches every other bus of the
// same prefix once, not the publisher itself nor another prefix's buses,
// and Publish counts the other buses that got it.
func TestRedis(t *testing.T) {
	addr := redistest.Start(t)
	prefix := redistest.Prefix(t)
	got := func(b *controlbus.Redis) chan string {
		ch := make(chan string, 16)
		b.Listen(func(cmd []byte) { ch <- string(cmd) })
		return ch
	}
	newBus := func(prefix string) *controlbus.Redis {
		b := controlbus.NewRedis(redistest.Client(t, addr), controlbus.RedisOptions{Prefix: prefix})
		t.Cleanup(func() { b.Close() })
		return b
	}
	a, b, c, other := newBus(prefix), newBus(prefix), newBus(prefix), newBus(prefix+"x")
	ga, gb, gc, gother := got(a), got(b), got(c), got(other)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Subscriptions start in the background: publish until both others
	// are counted.
	var n int
	if !eventually.Within(20*time.Second, func() bool {
		var err error
		if n, err = a.Publish(ctx, []byte("warmup")); err != nil {
			t.Fatal(err)
		}
		return n >= 2
	}) {
		t.Fatalf("other buses counted: %d, want 2", n)
	}
	drain := func(ch chan string) {
		for {
			select {
			case <-ch:
			case <-time.After(200 * time.Millisecond):
				return
			}
		}
	}
	drain(gb)
	drain(gc)
	if n, err := a.Publish(ctx, []byte("s\x00\ncmd")); err != nil || n != 2 {
		t.Fatalf("publish: %d, %v; want 2 receivers", n, err)
	}
	for _, ch := range []chan string{gb, gc} {
		select {
		case cmd := <-ch:
			if cmd != "s\x00\ncmd" {
				t.Fatalf("received %q", cmd)
			}
		case <-ctx.Done():
			t.Fatal("command not received")
		}
	}
	select {
	case cmd := <-ga:
		t.Fatalf("the publisher received its own command %q", cmd)
	case cmd := <-gother:
		t.Fatalf("another prefix received %q", cmd)
	case <-time.After(300 * time.Millisecond):
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
}

func TestDecode(t *testing.T) {
	for name, tc := range map[string]struct {
		msg  string
		want string
		err  error
	}{
		"other":        {msg: "b\ncmd\nwith\nlines", want: "cmd\nwith\nlines"},
		"own":          {msg: "a\ncmd", err: controlbus.ErrOwn},
		"no origin":    {msg: "\ncmd", err: errAny},
		"no separator": {msg: "cmd", err: errAny},
	} {
		cmd, err := controlbus.Decode("a", tc.msg)
		switch {
		case tc.err == nil && (err != nil || string(cmd) != tc.want):
			t.Errorf("%s: %q, %v; want %q", name, cmd, err, tc.want)
		case tc.err == errAny && err == nil, tc.err != nil && tc.err != errAny && !errors.Is(err, tc.err):
			t.Errorf("%s: err %v, want %v", name, err, tc.err)
		}
	}
}

var errAny = errors.New("any error")

// FuzzDecode: a message from the channel never panics the decoder, and
// what it returns is the message after its origin.
func FuzzDecode(f *testing.F) {
	f.Add("a\ncmd")
	f.Add("")
	f.Add("\n\n")
	f.Fuzz(func(t *testing.T, msg string) {
		cmd, err := controlbus.Decode("self", msg)
		if err == nil && len(cmd) >= len(msg) {
			t.Fatalf("decoded %q from %q", cmd, msg)
		}
	})
}
