package session_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/corral-rt/corral/core/session"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/sessions"
)

// TestResumeJoins: the client's rooms first, in its order and once each,
// at its positions; then the store's other rooms by name, from their
// last ack.
func TestResumeJoins(t *testing.T) {
	r := &corralv1.Resume{Rooms: []*corralv1.RoomPosition{
		{Room: "b", Seq: 7, Epoch: "e1", Presence: true},
		{Room: "z", Seq: 1, Epoch: "e2"},
		{Room: "b", Seq: 99, Epoch: "dup"},
	}}
	stored := map[string]sessions.Position{
		"b": {Seq: 5, Epoch: "e1"},
		"y": {Seq: 3, Epoch: "e3"},
		"a": {Seq: 2, Epoch: "e4"},
	}
	var got []string
	for _, q := range session.ResumeJoins(nil, r, stored) {
		if !q.Position || !q.Resumed {
			t.Errorf("%s: position %v, resumed %v: want both", q.Name, q.Position, q.Resumed)
		}
		got = append(got, fmt.Sprintf("%s@%d/%s stored=%v presence=%v", q.Name, q.Since, q.Epoch, q.Stored, q.Presence))
	}
	want := fmt.Sprint([]string{
		"b@7/e1 stored=true presence=true",
		"z@1/e2 stored=false presence=false",
		"a@2/e4 stored=true presence=false",
		"y@3/e3 stored=true presence=false",
	})
	if fmt.Sprint(got) != want {
		t.Fatalf("joins\n%v\nwant\n%v", got, want)
	}
}

// TestResumeRefusal: each refusal of the session store closes with its
// own code; any other error is the store's failure, a retry later, and
// names nothing of it.
func TestResumeRefusal(t *testing.T) {
	for name, tc := range map[string]struct {
		err   error
		code  corralv1.Code
		known bool
	}{
		"stale":          {fmt.Errorf("resume: %w", sessions.ErrStale), corralv1.Code_CODE_SESSION_TAKEN_OVER, true},
		"not found":      {sessions.ErrNotFound, corralv1.Code_CODE_SESSION_EXPIRED, true},
		"token mismatch": {sessions.ErrTokenMismatch, corralv1.Code_CODE_RESUME_REFUSED, true},
		"user mismatch":  {sessions.ErrUserMismatch, corralv1.Code_CODE_RESUME_REFUSED, true},
		"store down":     {errors.New("dial tcp 10.0.0.1:6380: connection refused"), corralv1.Code_CODE_UNAVAILABLE, false},
	} {
		t.Run(name, func(t *testing.T) {
			code, reason, delay, known := session.ResumeRefusal(tc.err)
			if code != tc.code || known != tc.known || reason == "" {
				t.Fatalf("got %v %q known=%v, want %v known=%v", code, reason, known, tc.code, tc.known)
			}
			if !known && (delay == 0 || reason != "session store unavailable") {
				t.Fatalf("a store failure: delay %d, reason %q", delay, reason)
			}
		})
	}
}
