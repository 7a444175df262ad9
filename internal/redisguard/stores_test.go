package redisguard_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corral-rt/corral/events"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/grants"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/internal/redisguard"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/presence"
	"github.com/corral-rt/corral/sessions"
)

// TestStoresTimeOut: with Redis partitioned (a timeout toxic both ways),
// every kind of store call made on behalf of a client or an API call
// fails within the store timeout with an error wrapping ErrTimeout. On a
// client without the guard the same calls wait until rueidis declares the
// connection dead (ConnWriteTimeout, 10s by default), or until the
// caller's context ends.
func TestStoresTimeOut(t *testing.T) {
	const timeout = 300 * time.Millisecond
	// bound is generous for a loaded machine, and far below rueidis's own
	// detection of a dead connection.
	const bound = 3 * time.Second
	g, c, tox, reg, _ := setup(t, timeout)
	prefix := redistest.Prefix(t)
	ctx := context.Background()

	hist := history.NewRedis(g.Wrap(c, "history"), history.RedisOptions{Prefix: prefix})
	t.Cleanup(func() { hist.Close() })
	sess := sessions.NewRedis(g.Wrap(c, "sessions"), sessions.Options{Prefix: prefix})
	t.Cleanup(func() { sess.Close() })
	pres, err := presence.NewRedis(ctx, g.Wrap(c, "presence"), presence.RedisOptions{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pres.Close() })
	gr := grants.NewRedis(g.Wrap(c, "grants"), grants.RedisOptions{Prefix: prefix})
	t.Cleanup(func() { gr.Close() })
	ev := events.NewRedis(g.Wrap(c, "events"), events.RedisOptions{Prefix: prefix})

	// Before the partition: a session to resume, a message, an event.
	s, err := sess.Create(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hist.Append(ctx, "r", &corralv1.Message{Room: "r", Payload: []byte("x")}, ""); err != nil {
		t.Fatal(err)
	}
	if err := ev.Append(ctx, []*corralv1.Event{{}}); err != nil {
		t.Fatal(err)
	}
	pos, err := ev.Tail(ctx)
	if err != nil {
		t.Fatal(err)
	}

	for _, st := range []string{"upstream", "downstream"} {
		if err := tox.Add("cut_"+st, "timeout", st, map[string]any{"timeout": 0}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		store, name string
		call        func(context.Context) error
		extra       time.Duration // a blocking read's own wait
	}{
		{"history", "append", func(ctx context.Context) error {
			_, err := hist.Append(ctx, "r", &corralv1.Message{Room: "r", Payload: []byte("y")}, "id1")
			return err
		}, 0},
		{"history", "read", func(ctx context.Context) error {
			_, err := hist.Read(ctx, history.Query{Room: "r"})
			return err
		}, 0},
		{"history", "state", func(ctx context.Context) error {
			_, err := hist.State(ctx, "r")
			return err
		}, 0},
		{"sessions", "create", func(ctx context.Context) error {
			_, err := sess.Create(ctx, "bob")
			return err
		}, 0},
		{"sessions", "resume", func(ctx context.Context) error {
			_, err := sess.Resume(ctx, s.ID, s.Token, "alice", sessions.Attempt{})
			return err
		}, 0},
		{"sessions", "set room", func(ctx context.Context) error {
			return sess.SetRoom(ctx, s.ID, "r", sessions.Position{Seq: 1})
		}, 0},
		{"presence", "add", func(ctx context.Context) error { return pres.Add(ctx, "r", "alice", nil, nil) }, 0},
		{"presence", "list", func(ctx context.Context) error {
			_, err := pres.List(ctx, "r")
			return err
		}, 0},
		{"grants", "get", func(ctx context.Context) error {
			_, err := gr.Get(ctx, "carol")
			return err
		}, 0},
		{"grants", "grant", func(ctx context.Context) error {
			return gr.Grant(ctx, "dave", []string{"r"}, nil)
		}, 0},
		{"events", "append", func(ctx context.Context) error { return ev.Append(ctx, []*corralv1.Event{{}}) }, 0},
		{"events", "tail", func(ctx context.Context) error {
			_, err := ev.Tail(ctx)
			return err
		}, 0},
		{"events", "read", func(ctx context.Context) error {
			_, err := ev.Read(ctx, pos, 10, 0)
			return err
		}, 0},
		{"events", "read waiting", func(ctx context.Context) error {
			_, err := ev.Read(ctx, pos, 10, 500*time.Millisecond)
			return err
		}, 500 * time.Millisecond},
	} {
		t.Run(tc.store+" "+tc.name, func(t *testing.T) {
			before := errs(t, reg, tc.store, "timeout")
			// The caller would wait a minute.
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			start := time.Now()
			err := tc.call(cctx)
			took := time.Since(start)
			if !errors.Is(err, redisguard.ErrTimeout) {
				t.Fatalf("got %v, want an error wrapping redisguard.ErrTimeout", err)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("%v looks like the caller's deadline", err)
			}
			if took > bound+tc.extra {
				t.Fatalf("failed after %v; the bound is %v", took, bound+tc.extra)
			}
			if after := errs(t, reg, tc.store, "timeout"); after <= before {
				t.Fatalf("corral_store_errors_total{store=%q,kind=timeout} stayed at %v", tc.store, after)
			}
		})
	}
}
