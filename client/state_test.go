package client_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/corral-rt/corral/checker"
	"github.com/corral-rt/corral/client"
	"github.com/corral-rt/corral/delta"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

func snapF(pos uint64, epoch string, kv ...string) *corralv1.StateSnapshot {
	s := &corralv1.StateSnapshot{Room: "doc", Position: pos, Epoch: epoch}
	for i := 0; i < len(kv); i += 2 {
		s.Entries = append(s.Entries, &corralv1.StateEntry{Key: kv[i], Value: []byte(kv[i+1]), Version: 1})
	}
	return s
}

func changeF(pos uint64, epoch, key, value string, version uint64) *corralv1.StateChange {
	return &corralv1.StateChange{Room: "doc", Key: key, Value: []byte(value), Version: version, Position: pos, Epoch: epoch}
}

// TestState feeds a member's state frames: a snapshot then changes, a
// resume's replay, deltas, a TTL expiry, and the refusals that call for a
// new snapshot; checker.Values checks the values of "title" it held.
func TestState(t *testing.T) {
	written := map[uint64][]byte{1: []byte(`"Draft"`), 2: []byte(`"Draft two"`), 3: []byte(`"Final draft two"`)}
	st := client.NewState("doc")
	if _, err := st.Change(changeF(2, "e1", "title", `"x"`, 1)); !errors.Is(err, client.ErrStateStale) {
		t.Fatalf("a change before the snapshot: %v", err)
	}
	// A room never written sends no snapshot: its first change begins it.
	if first := client.NewState("doc"); func() bool { ok, err := first.Change(changeF(1, "e0", "title", `"x"`, 1)); return !ok || err != nil }() || !first.Ready {
		t.Fatalf("the first change of an empty room: not applied")
	}
	st.Snapshot(snapF(4, "e1", "title", `"Draft"`, "color", `"red"`))
	var updates []checker.Update
	record := func(c *corralv1.StateChange) {
		t.Helper()
		ok, err := st.Change(c)
		if err != nil || !ok {
			t.Fatalf("change at %d: applied %v, %v", c.GetPosition(), ok, err)
		}
		if c.GetKey() == "title" {
			updates = append(updates, checker.Update{Version: c.GetVersion(), Value: c.GetValue(), Delta: c.GetDelta(), IsDelta: len(c.GetDelta()) > 0})
		}
	}
	e, _ := st.Get("title")
	updates = append(updates, checker.Update{Version: e.Version, Value: e.Value})

	record(changeF(5, "e1", "title", `"Draft two"`, 2))
	// A resume replays a change the view holds: ignored.
	if ok, err := st.Change(changeF(5, "e1", "title", `"Draft two"`, 2)); ok || err != nil {
		t.Fatalf("a replayed change: applied %v, %v", ok, err)
	}
	d := changeF(6, "e1", "title", "", 3)
	d.Delta = delta.Encode(written[2], written[3])
	record(d)
	// The key set with a TTL, then its expiry.
	ttl := changeF(7, "e1", "cursor", `{"x":1}`, 1)
	ttl.ExpiresMs = 1_800_000_000_000
	record(ttl)
	if e, ok := st.Get("cursor"); !ok || e.ExpiresMs != ttl.ExpiresMs {
		t.Fatalf("cursor: %+v %v", e, ok)
	}
	record(&corralv1.StateChange{Room: "doc", Key: "cursor", Version: 1, Deleted: true, Expired: true, Position: 8, Epoch: "e1"})
	if _, ok := st.Get("cursor"); ok {
		t.Fatal("cursor still held after its expiry")
	}
	if err := checker.Values(updates, written); err != nil {
		t.Fatal(err)
	}
	if got := st.Keys(); !slices.Equal(got, []string{"color", "title"}) || st.Position != 8 {
		t.Fatalf("keys %v at %d", got, st.Position)
	}

	// A gap, another epoch (the state was lost: the resume was too old),
	// a delta against a version not held: a new snapshot is needed.
	for name, c := range map[string]*corralv1.StateChange{
		"gap":   changeF(10, "e1", "title", `"x"`, 4),
		"epoch": changeF(9, "e2", "title", `"x"`, 1),
		"delta": {Room: "doc", Key: "color", Version: 3, Delta: delta.Encode([]byte(`"red"`), []byte(`"blue"`)), Position: 9, Epoch: "e1"},
	} {
		if ok, err := st.Change(c); ok || !errors.Is(err, client.ErrStateStale) {
			t.Fatalf("%s: applied %v, %v", name, ok, err)
		}
	}
	// Too old: the fresh snapshot replaces everything, and changes follow it.
	st.Snapshot(snapF(2, "e2", "title", `"Reset"`))
	record(changeF(3, "e2", "title", `"Reset 2"`, 2))
	if e, _ := st.Get("title"); string(e.Value) != `"Reset 2"` || st.Epoch != "e2" || len(st.Keys()) != 1 {
		t.Fatalf("after the fresh snapshot: %+v %v %s", e, st.Keys(), st.Epoch)
	}
}

// TestStateEmptyEpoch: the empty state (position 0, no epoch) continues
// into the epoch its first write opens.
func TestStateEmptyEpoch(t *testing.T) {
	st := client.NewState("doc")
	st.Snapshot(&corralv1.StateSnapshot{Room: "doc"})
	if ok, err := st.Change(changeF(1, "e9", "k", "1", 1)); !ok || err != nil {
		t.Fatalf("first write: %v %v", ok, err)
	}
	if st.Epoch != "e9" {
		t.Fatalf("epoch %q", st.Epoch)
	}
}

// TestWritesScripted: the frames Append, SetState and DeleteState send,
// and the answers they wait for (a scripted server: core answers 4410
// until it serves them).
func TestWritesScripted(t *testing.T) {
	s := newScripted(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type res struct {
		v   any
		err error
	}
	done := make(chan res, 1)
	go func() {
		c, err := client.Dial(ctx, s.url(), client.Options{Token: "u"})
		if err != nil {
			done <- res{err: err}
			return
		}
		defer c.CloseNow()
		var out []any
		p, err := c.Append(ctx, "chat", "a7", []byte("Hel"), client.AppendOptions{Version: 1})
		out = append(out, p, err)
		p, err = c.Append(ctx, "chat", "a7", []byte("lo"), client.AppendOptions{Version: 2, Final: true})
		out = append(out, p, err)
		u, err := c.SetState(ctx, "doc", "title", []byte(`"Final"`), client.StateOptions{CAS: true, Version: 1, TTL: 2 * time.Second})
		out = append(out, u, err)
		u, err = c.DeleteState(ctx, "doc", "title", client.StateOptions{CAS: true, Version: 1})
		out = append(out, u, err)
		done <- res{v: out}
	}()
	sc := s.accept(t)
	sc.read() // hello
	sc.send(welcomeF(false))

	a := sc.read().GetAppend()
	if a.GetId() != "a7" || string(a.GetData()) != "Hel" || a.GetVersion() != 1 || a.GetFinal() {
		t.Fatalf("append: %v", a)
	}
	sc.send(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Published{Published: &corralv1.Published{Room: "chat", Id: "a7", Seq: 17}}})
	a = sc.read().GetAppend()
	if !a.GetFinal() || a.GetVersion() != 2 {
		t.Fatalf("final append: %v", a)
	}
	sc.send(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Error{Error: &corralv1.Error{Code: corralv1.Code_CODE_UNIMPLEMENTED, Room: "chat", Ref: "a7"}}})
	set := sc.read().GetSetState()
	if set.GetKey() != "title" || !set.GetCas() || set.GetVersion() != 1 || set.GetTtlMs() != 2000 || set.GetRef() == "" {
		t.Fatalf("setState: %v", set)
	}
	sc.send(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_StateUpdated{StateUpdated: &corralv1.StateUpdated{Room: "doc", Key: "title", Ref: set.GetRef(), Version: 2, Position: 5}}})
	del := sc.read().GetDeleteState()
	if del.GetKey() != "title" || del.GetRef() == set.GetRef() {
		t.Fatalf("deleteState: %v", del)
	}
	sc.send(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Error{Error: &corralv1.Error{Code: corralv1.Code_CODE_VERSION_CONFLICT, Room: "doc", Ref: del.GetRef()}}})
	sc.discard()

	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	out := r.v.([]any)
	if p := out[0].(*corralv1.Published); p.GetSeq() != 17 || out[1] != nil && out[1].(error) != nil {
		t.Fatalf("append: %v %v", out[0], out[1])
	}
	var se *client.ServerError
	if err, _ := out[3].(error); !errors.As(err, &se) || se.Err.GetCode() != corralv1.Code_CODE_UNIMPLEMENTED {
		t.Fatalf("final append: %v", out[3])
	}
	if u := out[4].(*corralv1.StateUpdated); u.GetVersion() != 2 || u.GetPosition() != 5 {
		t.Fatalf("setState: %v %v", out[4], out[5])
	}
	if err, _ := out[7].(error); !errors.As(err, &se) || se.Err.GetCode() != corralv1.Code_CODE_VERSION_CONFLICT {
		t.Fatalf("deleteState: %v", out[7])
	}
}
