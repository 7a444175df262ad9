package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/corral-rt/corral/bench"
	"github.com/corral-rt/corral/config"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/hooks"
)

// TestHooksBackend calls the bench's hooks backend through corral's own
// hooks client (h2c) and checks that it allows everything and counts each
// call and pair.
func TestHooksBackend(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := &bench.HooksBackend{Latency: time.Millisecond}
	addr, err := b.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := hooks.New(hooks.Config{Hooks: config.Hooks{URL: "http://" + addr, JoinWindow: -1}, Policy: hooks.Policy{Join: []string{"*"}, Publish: []string{"*"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	before := b.Counts()
	pairs := []*corralv1.JoinPair{
		{UserId: "a", Room: "r1", Resumed: true},
		{UserId: "b", Room: "r1"},
		{UserId: "c", Room: "r2", Resumed: true},
	}
	res, err := c.Join(ctx, pairs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(pairs) {
		t.Fatalf("%d results for %d pairs", len(res), len(pairs))
	}
	for i, r := range res {
		if r.GetRefusal() != nil {
			t.Errorf("pair %d refused: %v", i, r.GetRefusal())
		}
	}
	for range 2 {
		pr, err := c.Publish(ctx, &corralv1.HooksServicePublishRequest{UserId: "a", Room: "r1", Payload: []byte(`{}`)})
		if err != nil || pr.GetRefusal() != nil || pr.GetReplace() {
			t.Fatalf("publish: %v, %v", pr, err)
		}
	}
	got := b.Counts().Sub(before)
	want := bench.HooksCounts{JoinCalls: 1, JoinPairs: 3, JoinResumed: 2, Publish: 2}
	if got != want {
		t.Errorf("counts %+v, want %+v", got, want)
	}
}
