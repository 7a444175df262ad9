package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/protocol"
	"github.com/golang-jwt/jwt/v5"
)

// roomOf is the room a frame concerns ("" for none).
func roomOf(f *corralv1.ServerFrame) string {
	switch k := f.GetKind().(type) {
	case *corralv1.ServerFrame_Message:
		return k.Message.GetRoom()
	case *corralv1.ServerFrame_Signal:
		return k.Signal.GetRoom()
	case *corralv1.ServerFrame_Joined:
		return k.Joined.GetRoom()
	case *corralv1.ServerFrame_Left:
		return k.Left.GetRoom()
	case *corralv1.ServerFrame_Reset_:
		return k.Reset_.GetRoom()
	case *corralv1.ServerFrame_Published:
		return k.Published.GetRoom()
	case *corralv1.ServerFrame_Error:
		return k.Error.GetRoom()
	}
	return ""
}

// drain returns the frames that arrive within d.
func drain(c *client.Conn, d time.Duration) []*corralv1.ServerFrame {
	var out []*corralv1.ServerFrame
	timeout := time.After(d)
	for {
		select {
		case f, ok := <-c.Frames():
			if !ok {
				return out
			}
			out = append(out, f)
		case <-timeout:
			return out
		}
	}
}

// TestIsolation: a client never receives a frame of a room it is not in:
// live, after a leave, and in the replay of a resume; a publish without
// permission is refused and nothing of it reaches the room.
func TestIsolation(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, grantsAuth(t), nil)
			ctx := testCtx(t)
			alice := dialAs(t, d.wsURL, "alice", []string{"a", "b"}, []string{"a"})
			bob := dialAs(t, d.wsURL, "bob", []string{"*"}, []string{"b"})
			for _, j := range []struct {
				c    *client.Conn
				room string
			}{{alice, "a"}, {bob, "a"}, {bob, "b"}} {
				if _, err := j.c.Join(ctx, j.room, 0, ""); err != nil {
					t.Fatal(err)
				}
			}
			sig := func(c *client.Conn, room string) {
				if err := c.Send(ctx, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Signal{Signal: &corralv1.Signal{Room: room, Key: "cursor", Payload: []byte(`1`)}}}); err != nil {
					t.Fatal(err)
				}
			}
			// Live: traffic in b (bob, the API) and a.
			for i := range 3 {
				if _, err := bob.Publish(ctx, "b", fmt.Sprint("b", i), payload(i)); err != nil {
					t.Fatal(err)
				}
				if _, err := d.api.Publish(ctx, &corralv1.PublishRequest{Room: "b", Payload: payload(i)}); err != nil {
					t.Fatal(err)
				}
				sig(bob, "b")
			}
			// Publish without permission: refused, nothing reaches a.
			_, err := bob.Publish(ctx, "a", "forbidden", payload(9))
			wantCode(t, err, corralv1.Code_CODE_FORBIDDEN)
			sig(bob, "a")
			nextFrame(t, bob, func(f *corralv1.ServerFrame) bool {
				return f.GetError().GetCode() == corralv1.Code_CODE_FORBIDDEN && f.GetError().GetRoom() == "a" && f.GetError().GetRef() == ""
			})
			if _, err := alice.Publish(ctx, "a", "a0", payload(0)); err != nil {
				t.Fatal(err)
			}
			h, err := d.api.History(ctx, &corralv1.HistoryRequest{Room: "a"})
			if err != nil {
				t.Fatal(err)
			}
			if h.GetLastSeq() != 1 || len(h.GetMessages()) != 1 || h.GetMessages()[0].GetId() != "a0" {
				t.Fatalf("room a holds %v", h.GetMessages())
			}
			for _, f := range drain(alice, 500*time.Millisecond) {
				if r := roomOf(f); r != "" && r != "a" {
					t.Fatalf("alice got a frame of %q: %v", r, f)
				}
				if f.GetSignal() != nil || f.GetMessage().GetId() == "forbidden" {
					t.Fatalf("a refused publish or signal reached alice: %v", f)
				}
			}

			wantCounted(t, scrape(t, coreBase(d)), "corral_core_refused_total", "forbidden_publish")

			// After a leave: nothing more of a.
			if err := alice.Send(ctx, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Leave{Leave: &corralv1.Leave{Room: "a"}}}); err != nil {
				t.Fatal(err)
			}
			nextFrame(t, alice, func(f *corralv1.ServerFrame) bool { return f.GetLeft().GetRoom() == "a" })
			for i := range 3 {
				if _, err := d.api.Publish(ctx, &corralv1.PublishRequest{Room: "a", Payload: payload(i)}); err != nil {
					t.Fatal(err)
				}
			}
			sig(bob, "b")
			if _, err := alice.Join(ctx, "b", 0, ""); err != nil {
				t.Fatal(err)
			}
			for _, f := range drain(alice, 500*time.Millisecond) {
				if r := roomOf(f); r == "a" {
					t.Fatalf("alice got a frame of a after leaving: %v", f)
				}
			}

			// Resume replay: alice drops while a and b get traffic; her
			// resume replays b alone, even when she names a.
			joined, err := alice.Join(ctx, "b", 0, "")
			if err != nil {
				t.Fatal(err)
			}
			w := alice.Welcome()
			alice.CloseNow()
			for i := range 3 {
				for _, room := range []string{"a", "b"} {
					if _, err := d.api.Publish(ctx, &corralv1.PublishRequest{Room: room, Payload: payload(i)}); err != nil {
						t.Fatal(err)
					}
				}
			}
			tok := token(t, grantsSecret, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix(), "rooms": []string{"b"}, "publish": []string{}})
			resumed, err := client.Dial(ctx, d.wsURL, client.Options{Token: tok, Resume: &corralv1.Resume{
				SessionId: w.GetSessionId(), ResumeToken: w.GetResumeToken(),
				Rooms: []*corralv1.RoomPosition{
					{Room: "b", Seq: joined.GetSeq(), Epoch: joined.GetEpoch()},
					{Room: "a", Seq: 0},
				},
			}})
			if err != nil {
				t.Fatal(err)
			}
			defer resumed.CloseNow()
			got := 0
			check := func(f *corralv1.ServerFrame) {
				switch r := roomOf(f); {
				case r == "a" && f.GetLeft() != nil && f.GetLeft().GetCode() == corralv1.Code_CODE_FORBIDDEN:
					// The token no longer grants a: refused, not replayed.
				case r != "" && r != "b":
					t.Fatalf("the resumed connection got a frame of %q: %v", r, f)
				case f.GetMessage() != nil:
					got++
				}
			}
			// The replay, however long it takes (the test's context bounds
			// it); then a moment for anything that must not come.
			for got < 3 {
				check(nextFrame(t, resumed, func(*corralv1.ServerFrame) bool { return true }))
			}
			for _, f := range drain(resumed, 300*time.Millisecond) {
				check(f)
			}
			if got != 3 {
				t.Fatalf("replayed %d messages of b, want 3", got)
			}
		})
	}
}

// TestTokenAudience: a token for another audience or issuer, or for
// none when one is required, is refused with CODE_UNAUTHENTICATED.
func TestTokenAudience(t *testing.T) {
	a, err := auth.NewJWT(auth.JWTConfig{HMACSecret: []byte(grantsSecret), Audience: "corral", Issuer: "https://id.example"})
	if err != nil {
		t.Fatal(err)
	}
	d := start(t, "serve", a, nil)
	ctx := testCtx(t)
	exp := time.Now().Add(time.Hour).Unix()
	for name, claims := range map[string]jwt.MapClaims{
		"other audience": {"sub": "eve", "exp": exp, "aud": "billing", "iss": "https://id.example"},
		"no audience":    {"sub": "eve", "exp": exp, "iss": "https://id.example"},
		"other issuer":   {"sub": "eve", "exp": exp, "aud": "corral", "iss": "https://evil.example"},
		"not yet valid":  {"sub": "eve", "exp": exp, "aud": "corral", "iss": "https://id.example", "nbf": time.Now().Add(time.Hour).Unix()},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := client.Dial(ctx, d.wsURL, client.Options{Token: token(t, grantsSecret, claims)})
			ce, ok := err.(*client.CloseError)
			if !ok || int(ce.Code) != int(corralv1.Code_CODE_UNAUTHENTICATED) {
				t.Fatalf("got %v, want close %d", err, corralv1.Code_CODE_UNAUTHENTICATED)
			}
		})
	}
	ok := token(t, grantsSecret, jwt.MapClaims{"sub": "ok", "exp": exp, "aud": "corral", "iss": "https://id.example"})
	c, err := client.Dial(ctx, d.wsURL, client.Options{Token: ok})
	if err != nil {
		t.Fatal(err)
	}
	c.CloseNow()
}

// TestResumeBoundToUser: another user's token with a stolen session id and
// resume token is refused with CODE_RESUME_REFUSED; the owner resumes.
func TestResumeBoundToUser(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, nil, nil)
			ctx := testCtx(t)
			owner := dial(t, d, "owner", protocol.JSON)
			if _, err := owner.Join(ctx, "private", 0, ""); err != nil {
				t.Fatal(err)
			}
			w := owner.Welcome()
			owner.CloseNow()
			stolen := &corralv1.Resume{SessionId: w.GetSessionId(), ResumeToken: w.GetResumeToken()}
			_, err := client.Dial(ctx, d.wsURL, client.Options{Token: "thief", Resume: stolen})
			ce, ok := err.(*client.CloseError)
			if !ok || int(ce.Code) != int(corralv1.Code_CODE_RESUME_REFUSED) {
				t.Fatalf("resume with another user's token: %v", err)
			}
			wrong := &corralv1.Resume{SessionId: w.GetSessionId(), ResumeToken: "guess"}
			_, err = client.Dial(ctx, d.wsURL, client.Options{Token: "owner", Resume: wrong})
			if ce, ok := err.(*client.CloseError); !ok || int(ce.Code) != int(corralv1.Code_CODE_RESUME_REFUSED) {
				t.Fatalf("resume with a wrong token: %v", err)
			}
			c, err := client.Dial(ctx, d.wsURL, client.Options{Token: "owner", Resume: stolen})
			if err != nil {
				t.Fatalf("the owner's resume: %v", err)
			}
			defer c.CloseNow()
			if !c.Welcome().GetResumed() {
				t.Fatal("not resumed")
			}
			_ = context.Background
		})
	}
}
