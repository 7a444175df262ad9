package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// TestAnswersByRoomAndID: a Conn matches a Published to its publish by
// room and id, as the server names it, and refuses, unsent, a request
// whose answer could not be told from one still waiting. Keyed by id
// alone, the same id in two rooms took the first publish's waiter: the
// first call waited until its context ended, and a second publish of an
// id already in flight did the same to the first.
func TestAnswersByRoomAndID(t *testing.T) {
	s := newScripted(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, sc := s.conn(t, ctx)

	type answer struct {
		p   *corralv1.Published
		err error
	}
	publish := func(room, id string) chan answer {
		ch := make(chan answer, 1)
		go func() {
			p, err := c.Publish(ctx, room, id, []byte(`{}`))
			ch <- answer{p, err}
		}()
		return ch
	}
	a := publish("a", "x")
	if f := sc.read().GetPublish(); f.GetRoom() != "a" {
		t.Fatalf("first frame %v, want the publish to a", f)
	}
	b := publish("b", "x")
	if f := sc.read().GetPublish(); f.GetRoom() != "b" {
		t.Fatalf("second frame %v, want the publish to b", f)
	}
	// The same room and id again while a's is in flight: refused here.
	if _, err := c.Publish(ctx, "a", "x", []byte(`{}`)); !errors.Is(err, client.ErrInFlight) {
		t.Fatalf("a second publish of a/x in flight: %v, want ErrInFlight", err)
	}
	// b's answer first, then a's.
	sc.send(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Published{Published: &corralv1.Published{Room: "b", Id: "x", Seq: 7}}},
		&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Published{Published: &corralv1.Published{Room: "a", Id: "x", Seq: 3}}})
	for room, tc := range map[string]struct {
		ch   chan answer
		want uint64
	}{"a": {a, 3}, "b": {b, 7}} {
		select {
		case got := <-tc.ch:
			if got.err != nil || got.p.GetSeq() != tc.want {
				t.Errorf("publish to %s: %v, %v; want seq %d", room, got.p, got.err, tc.want)
			}
		case <-ctx.Done():
			t.Fatalf("publish to %s: no answer", room)
		}
	}
	sc.discard()
}
