package door_test

import (
	"context"
	"testing"
	"time"

	"github.com/corral-rt/corral/core/door"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/roomclass"
)

// fakeClient records what the door answers a session.
type fakeClient struct {
	codes []corralv1.Code
}

func (f *fakeClient) UserID() string    { return "u" }
func (f *fakeClient) SessionID() string { return "s1" }
func (f *fakeClient) Identity() *corralv1.Identity {
	return &corralv1.Identity{Join: []string{"*"}, Publish: []string{"open"}}
}
func (f *fakeClient) SendErr(code corralv1.Code, _, _, _ string) { f.codes = append(f.codes, code) }
func (f *fakeClient) SendRetry(code corralv1.Code, _, _, _ string, _ time.Duration) {
	f.codes = append(f.codes, code)
}

func TestRefusalsAnsweredAndCounted(t *testing.T) {
	var counted []door.Reason
	d := door.New(door.Options{
		Class:   func(string) *roomclass.Class { return &roomclass.Class{} },
		Refused: func(r door.Reason) { counted = append(counted, r) },
	})
	ctx := context.Background()
	c := &fakeClient{}
	readOnly := &roomclass.Class{Publish: roomclass.None, Signal: roomclass.None}
	if !d.RefuseReadOnly(c, readOnly, "r", "id", false) || !d.RefuseReadOnly(c, readOnly, "r", "", true) {
		t.Fatal("RefuseReadOnly let a client write to a read-only room")
	}
	if d.RefusePublish(ctx, c, "open", "id") {
		t.Fatal("RefusePublish refused a granted room")
	}
	if !d.RefusePublish(ctx, c, "closed", "id") {
		t.Fatal("RefusePublish let an ungranted publish through")
	}
	if p, ok := d.HookPublish(ctx, c, &roomclass.Class{}, &corralv1.Publish{Room: "open", Payload: []byte("x")}); !ok || string(p) != "x" {
		t.Fatalf("HookPublish with no hooks = %q, %v; want the payload", p, ok)
	}
	want := []door.Reason{door.ReadOnly, door.ReadOnly, door.ForbiddenPublish}
	if len(counted) != len(want) {
		t.Fatalf("counted %v, want %v", counted, want)
	}
	for i := range want {
		if counted[i] != want[i] {
			t.Fatalf("counted %v, want %v", counted, want)
		}
	}
	for _, code := range c.codes {
		if code != corralv1.Code_CODE_FORBIDDEN {
			t.Fatalf("answers %v, want CODE_FORBIDDEN each", c.codes)
		}
	}
	if len(c.codes) != 3 {
		t.Fatalf("answers %v, want 3", c.codes)
	}
}
