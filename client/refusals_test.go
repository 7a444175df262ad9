package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// refusal is an Error frame refusing a frame of kind frame ("" as an
// older server sends it: no kind named).
func refusal(code corralv1.Code, frame, room, ref string) *corralv1.ServerFrame {
	return &corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Error{Error: &corralv1.Error{
		Code: code, Message: "no", Room: room, Ref: ref, Frame: frame,
	}}}
}

// outcome is what a request of a Conn or a Session returned.
type outcome struct {
	v   any
	err error
}

// await returns what ch delivers, failing the test after 10s.
func await(t *testing.T, what string, ch <-chan outcome) outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no answer", what)
		return outcome{}
	}
}

func refusedWith(err error, code corralv1.Code) bool {
	var se *client.ServerError
	return errors.As(err, &se) && se.Err.GetCode() == code
}

// TestConnRefusalsMatchedByFrame: a Conn settles a request on an Error
// only when the Error names the kind of frame the request sent
// (Error.frame): in one room a join, a presence query and a state write
// are in flight; the presence query's refusal settles the query alone,
// a signal's settles nothing, the state write's the write, and the join
// still gets its Joined. An Error naming no frame (an older server) is
// matched by room and ref, as before.
func TestConnRefusalsMatchedByFrame(t *testing.T) {
	s := newScripted(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, sc := s.conn(t, ctx)

	join, query, set := make(chan outcome, 1), make(chan outcome, 1), make(chan outcome, 1)
	go func() {
		j, err := c.Join(ctx, "r", 0, "")
		join <- outcome{j, err}
	}()
	if j := sc.read().GetJoin(); j.GetRoom() != "r" {
		t.Fatalf("sent %v, want a join of r", j)
	}
	go func() {
		p, err := c.QueryPresence(ctx, "r", "", 0)
		query <- outcome{p, err}
	}()
	if q := sc.read().GetPresenceQuery(); q.GetRoom() != "r" {
		t.Fatalf("sent %v, want a presence query of r", q)
	}
	go func() {
		u, err := c.SetState(ctx, "r", "title", []byte(`"x"`), client.StateOptions{})
		set <- outcome{u, err}
	}()
	st := sc.read().GetSetState()
	if st.GetRoom() != "r" || st.GetRef() == "" {
		t.Fatalf("sent %v, want a setState of r with a ref", st)
	}

	sc.send(refusal(corralv1.Code_CODE_NOT_JOINED, "presenceQuery", "r", ""))
	if o := await(t, "presence query", query); !refusedWith(o.err, corralv1.Code_CODE_NOT_JOINED) {
		t.Fatalf("presence query: %v %v, want its refusal", o.v, o.err)
	}
	// A signal's refusal in the room answers no request.
	sc.send(refusal(corralv1.Code_CODE_RATE_LIMITED, "signal", "r", ""))
	sc.send(refusal(corralv1.Code_CODE_VERSION_CONFLICT, "setState", "r", st.GetRef()))
	if o := await(t, "setState", set); !refusedWith(o.err, corralv1.Code_CODE_VERSION_CONFLICT) {
		t.Fatalf("setState: %v %v, want its refusal", o.v, o.err)
	}
	select {
	case o := <-join:
		t.Fatalf("join settled by another frame's refusal: %v %v", o.v, o.err)
	default:
	}
	sc.send(joinedF("r", 4, "e1", false))
	if o := await(t, "join", join); o.err != nil || o.v.(*corralv1.Joined).GetSeq() != 4 {
		t.Fatalf("join: %v %v, want Joined at 4", o.v, o.err)
	}

	// An older server names no frame: the room decides.
	old := make(chan outcome, 1)
	go func() {
		j, err := c.Join(ctx, "old", 0, "")
		old <- outcome{j, err}
	}()
	sc.read()
	sc.send(refusal(corralv1.Code_CODE_FORBIDDEN, "", "old", ""))
	if o := await(t, "join of old", old); !refusedWith(o.err, corralv1.Code_CODE_FORBIDDEN) {
		t.Fatalf("join of old: %v %v, want the frameless refusal", o.v, o.err)
	}

	// Every Error still reaches Frames, matched or not, in order.
	var codes []corralv1.Code
	for len(codes) < 4 {
		select {
		case f := <-c.Frames():
			if e := f.GetError(); e != nil {
				codes = append(codes, e.GetCode())
			}
		case <-ctx.Done():
			t.Fatalf("frames: %v, then nothing", codes)
		}
	}
	want := []corralv1.Code{corralv1.Code_CODE_NOT_JOINED, corralv1.Code_CODE_RATE_LIMITED, corralv1.Code_CODE_VERSION_CONFLICT, corralv1.Code_CODE_FORBIDDEN}
	for i := range want {
		if codes[i] != want[i] {
			t.Fatalf("errors on Frames %v, want %v", codes, want)
		}
	}
	sc.discard()
}

// TestSessionRefusalsMatchedByFrame: a Session's pending Join fails only
// on the join's own refusal: a signal's refusal in the room (a code a join
// could be refused with too) leaves it waiting for its Joined, and a
// join refused with a code a signal's refusal has (CODE_TOO_LARGE: its
// presence state) fails at once rather than waiting for ever. An Error
// naming no frame keeps the old rule.
func TestSessionRefusalsMatchedByFrame(t *testing.T) {
	fake := newScripted(t)
	ctx := testCtx(t)
	s, c1 := fake.session(t, ctx)
	go func() {
		for range s.Events() {
		}
	}()

	joinOf := func(room string) chan outcome {
		ch := make(chan outcome, 1)
		go func() {
			j, err := s.Join(ctx, room)
			ch <- outcome{j, err}
		}()
		if j := c1.read().GetJoin(); j.GetRoom() != room {
			t.Fatalf("sent %v, want a join of %s", j, room)
		}
		return ch
	}

	r := joinOf("r")
	c1.send(refusal(corralv1.Code_CODE_RATE_LIMITED, "signal", "r", ""), joinedF("r", 2, "e1", false))
	if o := await(t, "join of r", r); o.err != nil || o.v.(*corralv1.Joined).GetSeq() != 2 {
		t.Fatalf("join of r: %v %v, want Joined at 2 (a signal's refusal is not the join's)", o.v, o.err)
	}

	big := joinOf("big")
	c1.send(refusal(corralv1.Code_CODE_TOO_LARGE, "join", "big", ""))
	if o := await(t, "join of big", big); !refusedWith(o.err, corralv1.Code_CODE_TOO_LARGE) {
		t.Fatalf("join of big: %v %v, want its refusal", o.v, o.err)
	}

	old := joinOf("old")
	c1.send(refusal(corralv1.Code_CODE_NOT_JOINED, "", "old", ""), refusal(corralv1.Code_CODE_FORBIDDEN, "", "old", ""))
	if o := await(t, "join of old", old); !refusedWith(o.err, corralv1.Code_CODE_FORBIDDEN) {
		t.Fatalf("join of old: %v %v, want the frameless FORBIDDEN (NOT_JOINED is a signal's)", o.v, o.err)
	}
	c1.discard()
}
