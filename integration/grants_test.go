package integration_test

import (
	"context"
	"errors"
	"github.com/corral-rt/corral/roomclass"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/server"
	"github.com/golang-jwt/jwt/v5"
)

const grantsSecret = "grants-secret-0123456789abcdef0123"

func grantsAuth(t *testing.T) auth.Authenticator {
	a, err := auth.NewJWT(auth.JWTConfig{HMACSecret: []byte(grantsSecret)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// dialAs connects with a token granting join and publish.
func dialAs(t *testing.T, wsURL, user string, join, publish []string) *client.Conn {
	t.Helper()
	tok := token(t, grantsSecret, jwt.MapClaims{"sub": user, "exp": time.Now().Add(time.Hour).Unix(), "rooms": join, "publish": publish})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, wsURL, client.Options{Token: tok})
	if err != nil {
		t.Fatalf("dial as %s: %v", user, err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

func wantCode(t *testing.T, err error, code corralv1.Code) {
	t.Helper()
	if e := serverErr(t, err); e.GetCode() != code {
		t.Fatalf("got %v, want code %v", e, code)
	}
}

// TestReadOnlyRoom: clients may join a read-only room and receive, but
// neither publish nor signal there, whatever their token says; internal
// services publish.
func TestReadOnlyRoom(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, grantsAuth(t), func(o *server.Options) {
				// What --read-only-rooms 'news:*' stands for.
				o.Core.Classes = roomclass.NewLive(roomclass.NewTable(roomclass.Default(), roomclass.FromFlags(roomclass.Default(), []string{"news:*"}, nil)))
			})
			ctx := testCtx(t)
			c := dialAs(t, d.wsURL, "reader", []string{"*"}, []string{"*"})
			if _, err := c.Join(ctx, "news:today", 0, ""); err != nil {
				t.Fatal(err)
			}
			_, err := c.Publish(ctx, "news:today", "p1", payload(1))
			wantCode(t, err, corralv1.Code_CODE_FORBIDDEN)
			if err := c.Send(ctx, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Signal{Signal: &corralv1.Signal{Room: "news:today", Key: "k"}}}); err != nil {
				t.Fatal(err)
			}
			f := nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return f.GetError() != nil || f.GetSignal() != nil })
			if f.GetError().GetCode() != corralv1.Code_CODE_FORBIDDEN {
				t.Fatalf("signal in a read-only room: %v", f)
			}
			if _, err := d.api.Publish(ctx, &corralv1.PublishRequest{Room: "news:today", Payload: payload(2)}); err != nil {
				t.Fatal(err)
			}
			m := nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return f.GetMessage() != nil })
			if m.GetMessage().GetSeq() != 1 {
				t.Fatalf("the refused publish took a seq: %v", m)
			}
			// Other rooms are unaffected.
			if _, err := c.Join(ctx, "chat", 0, ""); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Publish(ctx, "chat", "p2", payload(3)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestGrantRevoke: run-time grants open rooms the token does not grant;
// a revoke takes them (and the token's) away, and removes the user's
// connections from the rooms with Left and CODE_FORBIDDEN; nothing of the
// room reaches them after it.
func TestGrantRevoke(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			d := start(t, mode, grantsAuth(t), nil)
			ctx := testCtx(t)
			c := dialAs(t, d.wsURL, "ann", []string{"lobby"}, []string{})
			other := dialAs(t, d.wsURL, "ben", []string{"*"}, []string{"*"})
			_, err := c.Join(ctx, "vip", 0, "")
			wantCode(t, err, corralv1.Code_CODE_FORBIDDEN)

			if _, err := d.api.Grant(ctx, &corralv1.GrantRequest{UserId: "ann", Join: []string{"vip*"}, Publish: []string{"vip"}}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Join(ctx, "vip", 0, ""); err != nil {
				t.Fatalf("join after grant: %v", err)
			}
			if _, err := c.Publish(ctx, "vip", "p1", payload(1)); err != nil {
				t.Fatalf("publish after grant: %v", err)
			}
			if _, err := c.Join(ctx, "lobby", 0, ""); err != nil {
				t.Fatal(err)
			}
			if _, err := other.Join(ctx, "vip", 0, ""); err != nil {
				t.Fatal(err)
			}

			res, err := d.api.Revoke(ctx, &corralv1.RevokeRequest{UserId: "ann", Join: []string{"vip"}})
			if err != nil {
				t.Fatal(err)
			}
			if res.GetRoomsLeft() != 1 || len(res.GetSessionIds()) != 1 || res.GetSessionIds()[0] != c.Welcome().GetSessionId() {
				t.Fatalf("revoke removed %v", res)
			}
			left := nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return f.GetLeft() != nil })
			if left.GetLeft().GetRoom() != "vip" || left.GetLeft().GetCode() != corralv1.Code_CODE_FORBIDDEN {
				t.Fatalf("left: %v", left)
			}
			// Nothing of vip reaches ann any more; ben still gets it.
			if _, err := d.api.Publish(ctx, &corralv1.PublishRequest{Room: "vip", Payload: payload(2)}); err != nil {
				t.Fatal(err)
			}
			nextFrame(t, other, func(f *corralv1.ServerFrame) bool { return f.GetMessage().GetSeq() == 2 })
			if _, err := d.api.Publish(ctx, &corralv1.PublishRequest{Room: "lobby", Payload: payload(3)}); err != nil {
				t.Fatal(err)
			}
			f := nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return f.GetMessage() != nil })
			if f.GetMessage().GetRoom() != "lobby" {
				t.Fatalf("after the revoke ann got %v", f)
			}
			_, err = c.Join(ctx, "vip", 0, "")
			wantCode(t, err, corralv1.Code_CODE_FORBIDDEN)
			// The publish grant is untouched, but publishing needs the room.
			// A narrower grant lifts the revocation.
			if _, err := d.api.Grant(ctx, &corralv1.GrantRequest{UserId: "ann", Join: []string{"vip"}}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Join(ctx, "vip", 0, ""); err != nil {
				t.Fatal(err)
			}
			// Revoking the token's own grant works too.
			if _, err := d.api.Revoke(ctx, &corralv1.RevokeRequest{UserId: "ann", Join: []string{"lobby"}, Publish: []string{"vip"}}); err != nil {
				t.Fatal(err)
			}
			left = nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return f.GetLeft() != nil })
			if left.GetLeft().GetRoom() != "lobby" {
				t.Fatalf("left: %v", left)
			}
			_, err = c.Publish(ctx, "vip", "p2", payload(4))
			wantCode(t, err, corralv1.Code_CODE_FORBIDDEN)
		})
	}
}

// TestGrantInvalid: bad Grant and Revoke calls get invalid_argument.
func TestGrantInvalid(t *testing.T) {
	d := start(t, "serve", grantsAuth(t), nil)
	ctx := testCtx(t)
	long := make([]byte, 300)
	for i := range long {
		long[i] = 'a'
	}
	for name, req := range map[string]*corralv1.GrantRequest{
		"no user":      {Join: []string{"a"}},
		"no pattern":   {UserId: "u"},
		"empty":        {UserId: "u", Join: []string{""}},
		"long pattern": {UserId: "u", Publish: []string{string(long)}},
	} {
		_, err := d.api.Grant(ctx, req)
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("%s: grant: %v", name, err)
		}
		_, err = d.api.Revoke(ctx, &corralv1.RevokeRequest{UserId: req.GetUserId(), Join: req.GetJoin(), Publish: req.GetPublish()})
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("%s: revoke: %v", name, err)
		}
	}
}

// TestGrantAcrossCores: with Redis, a grant or revoke made through one
// core takes effect on a client of another core.
func TestGrantAcrossCores(t *testing.T) {
	var redisURL, prefix string
	a := start(t, "redis", grantsAuth(t), func(o *server.Options) { redisURL, prefix = o.RedisURL, o.RedisPrefix })
	b := start(t, "serve", grantsAuth(t), func(o *server.Options) { o.RedisURL, o.RedisPrefix = redisURL, prefix })
	ctx := testCtx(t)
	c := dialAs(t, b.wsURL, "cam", []string{"home"}, []string{"*"})
	_, err := c.Join(ctx, "stage", 0, "")
	wantCode(t, err, corralv1.Code_CODE_FORBIDDEN)
	if _, err := a.api.Grant(ctx, &corralv1.GrantRequest{UserId: "cam", Join: []string{"stage"}}); err != nil {
		t.Fatal(err)
	}
	// The other core hears of it at once, or at the latest after its
	// cache TTL: poll.
	eventually.NoError(t, 15*time.Second, func() error {
		_, err := c.Join(ctx, "stage", 0, "")
		if se := (*client.ServerError)(nil); err != nil && !errors.As(err, &se) {
			t.Fatalf("join after a grant on another core: %v", err)
		}
		return err
	})
	res, err := a.api.Revoke(ctx, &corralv1.RevokeRequest{UserId: "cam", Join: []string{"stage"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.GetSessionIds()) != 0 {
		t.Fatalf("core a has no session of cam, yet removed %v", res)
	}
	left := nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return f.GetLeft() != nil })
	if left.GetLeft().GetRoom() != "stage" || left.GetLeft().GetCode() != corralv1.Code_CODE_FORBIDDEN {
		t.Fatalf("left: %v", left)
	}
}

// TestRevokeMissedWhilePubSubDown: a change of grants whose announcement a
// core never heard (here: written to Redis without one) is still applied
// once the core's subscription breaks and comes back, because the core then
// checks every live member again.
func TestRevokeMissedWhilePubSubDown(t *testing.T) {
	addr := redistest.Start(t)
	prefix := redistest.Prefix(t)
	d := start(t, "serve", grantsAuth(t), func(o *server.Options) { o.RedisURL, o.RedisPrefix = "redis://"+addr, prefix })
	ctx := testCtx(t)
	c := dialAs(t, d.wsURL, "cam", []string{"home"}, []string{"*"})
	if _, err := d.api.Grant(ctx, &corralv1.GrantRequest{UserId: "cam", Join: []string{"stage"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Join(ctx, "stage", 0, ""); err != nil {
		t.Fatal(err)
	}
	rc := redistest.Client(t, addr)
	// The grant disappears without an announcement...
	if err := rc.Do(ctx, rc.B().Del().Key(prefix+":grants:{cam}").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	// ...and the core's pub/sub connections break and come back.
	if err := rc.Do(ctx, rc.B().ClientKill().TypePubsub().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	left := nextFrame(t, c, func(f *corralv1.ServerFrame) bool { return f.GetLeft() != nil })
	if left.GetLeft().GetRoom() != "stage" || left.GetLeft().GetCode() != corralv1.Code_CODE_FORBIDDEN {
		t.Fatalf("left: %v", left)
	}
}
