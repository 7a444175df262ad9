package integration_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
	"github.com/corral-rt/corral/internal/eventually"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/server"
)

// wantConnectCode fails unless err is a Connect error with code.
func wantConnectCode(t *testing.T, what string, err error, code connect.Code) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != code {
		t.Fatalf("%s: got %v, want %s", what, err, code)
	}
}

// TestAPILimits: every bound of the internal API (docs/SECURITY.md,
// "Internal API limits") refuses past it with its documented Connect code
// and a clear message, and the call at the bound passes. The bounds are
// lowered so that the test stays small.
func TestAPILimits(t *testing.T) {
	d := start(t, "serve", nil, func(o *server.Options) {
		o.APIMaxRequestBytes = 32 << 10
		o.APIMaxEventStreams = 2
		o.Core.API.MaxMembers = 2
		o.Core.API.MaxBroadcastRooms = 3
		o.Core.MaxPayload = 16 << 10
		o.HistoryMaxLen = 2000
	})
	ctx := testCtx(t)
	api := d.api

	t.Run("request size", func(t *testing.T) {
		// Under the payload limit's check, over the request's.
		_, err := api.Broadcast(ctx, &corralv1.BroadcastRequest{Rooms: []string{"a", strings.Repeat("r", 40<<10)}, Payload: []byte(`1`)})
		wantConnectCode(t, "a 40 KiB request", err, connect.CodeResourceExhausted)
		if _, err := api.Publish(ctx, &corralv1.PublishRequest{Room: "a", Payload: []byte(`1`)}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("payload size", func(t *testing.T) {
		_, err := api.Publish(ctx, &corralv1.PublishRequest{Room: "a", Payload: []byte(`"` + strings.Repeat("x", 16<<10) + `"`)})
		wantConnectCode(t, "a payload over --max-payload", err, connect.CodeInvalidArgument)
	})
	t.Run("publish fields", func(t *testing.T) {
		long := strings.Repeat("x", 257)
		for name, req := range map[string]*corralv1.PublishRequest{
			"a 201-byte room":            {Room: long[:201], Payload: []byte(`1`)},
			"a 257-byte idempotency key": {Room: "a", Payload: []byte(`1`), IdempotencyKey: long},
			"a 257-byte sender":          {Room: "a", Payload: []byte(`1`), Sender: long},
			"a room with a control char": {Room: "a\x01", Payload: []byte(`1`)},
		} {
			_, err := api.Publish(ctx, req)
			wantConnectCode(t, name, err, connect.CodeInvalidArgument)
		}
	})
	t.Run("broadcast rooms", func(t *testing.T) {
		_, err := api.Broadcast(ctx, &corralv1.BroadcastRequest{Rooms: []string{"b1", "b2", "b3", "b4"}, Payload: []byte(`1`)})
		wantConnectCode(t, "4 rooms", err, connect.CodeInvalidArgument)
		if _, err := api.Broadcast(ctx, &corralv1.BroadcastRequest{Rooms: []string{"b1", "b2", "b3"}, Payload: []byte(`1`)}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("history limit", func(t *testing.T) {
		for i := range 1001 {
			if _, err := api.Publish(ctx, &corralv1.PublishRequest{Room: "h", Payload: fmt.Appendf(nil, "%d", i)}); err != nil {
				t.Fatal(err)
			}
		}
		h, err := api.History(ctx, &corralv1.HistoryRequest{Room: "h", Limit: 5000})
		if err != nil {
			t.Fatal(err)
		}
		if len(h.GetMessages()) != 1000 || !h.GetMore() {
			t.Fatalf("history with limit 5000: %d messages, more %v; want 1000 and more", len(h.GetMessages()), h.GetMore())
		}
	})
	t.Run("members", func(t *testing.T) {
		for i := range 3 {
			c := dial(t, d, fmt.Sprintf("m%d", i), protocol.JSON)
			if _, err := c.Join(ctx, "crowd", 0, ""); err != nil {
				t.Fatal(err)
			}
			_, err := api.Members(ctx, &corralv1.MembersRequest{Room: "crowd"})
			if i < 2 && err != nil {
				t.Fatalf("%d members: %v", i+1, err)
			}
			if i == 2 {
				wantConnectCode(t, "3 members", err, connect.CodeResourceExhausted)
			}
		}
	})
	t.Run("events streams per key", func(t *testing.T) {
		a := follow(t, api, &corralv1.EventsRequest{})
		a.next(t)
		b := follow(t, api, &corralv1.EventsRequest{})
		b.next(t)
		c := follow(t, api, &corralv1.EventsRequest{})
		select {
		case res, ok := <-c.ch:
			if ok {
				t.Fatalf("a third stream opened: %v", res)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the third stream neither opened nor failed")
		}
		wantConnectCode(t, "a third stream", c.err, connect.CodeResourceExhausted)
		// Closing one makes room.
		a.cancel()
		var err error
		if !eventually.WithinEvery(10*time.Second, 20*time.Millisecond, func() bool {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			var s corralv1connect.RoomServiceEventsClientStream
			if s, err = api.Events(ctx, &corralv1.EventsRequest{}); err == nil {
				_, err = s.Receive()
			}
			return err == nil
		}) {
			t.Fatalf("no stream after one closed: %v", err)
		}
	})
	t.Run("events room patterns", func(t *testing.T) {
		many := make([]string, 257)
		for i := range many {
			many[i] = fmt.Sprintf("p%d:*", i)
		}
		for name, rooms := range map[string][]string{
			"257 patterns":       many,
			"a 257-byte pattern": {strings.Repeat("p", 257)},
		} {
			// The streams of the subtest before end on the server after
			// their clients cancel them: while they still count, the
			// per-key bound answers first (resource_exhausted).
			var err error
			eventually.WithinEvery(10*time.Second, 20*time.Millisecond, func() bool {
				var s corralv1connect.RoomServiceEventsClientStream
				if s, err = api.Events(ctx, &corralv1.EventsRequest{Rooms: rooms}); err == nil {
					_, err = s.Receive()
				}
				return connect.CodeOf(err) != connect.CodeResourceExhausted
			})
			wantConnectCode(t, name, err, connect.CodeInvalidArgument)
		}
	})
	t.Run("disconnect ids", func(t *testing.T) {
		_, err := api.Disconnect(ctx, &corralv1.DisconnectRequest{
			Target: &corralv1.DisconnectRequest_UserId{UserId: strings.Repeat("u", 257)},
			Code:   corralv1.Code_CODE_FORBIDDEN,
		})
		wantConnectCode(t, "a 257-byte user id", err, connect.CodeInvalidArgument)
	})
	t.Run("grants", func(t *testing.T) {
		many := make([]string, 257)
		for i := range many {
			many[i] = fmt.Sprintf("g%d", i)
		}
		_, err := api.Grant(ctx, &corralv1.GrantRequest{UserId: "u", Join: many})
		wantConnectCode(t, "257 patterns", err, connect.CodeInvalidArgument)
	})
}
