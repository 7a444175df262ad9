package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/corral-rt/corral/config"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/hooks"
)

// TestExample calls the example through corral's own hooks client.
func TestExample(t *testing.T) {
	srv := httptest.NewUnstartedServer(handler(newApp()))
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = p
	srv.Start()
	defer srv.Close()
	c, err := hooks.New(hooks.Config{Hooks: config.Hooks{URL: srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	res, err := c.Connect(ctx, &corralv1.ConnectRequest{Token: "nobody"})
	if err != nil || res.GetRefusal().GetCode() != corralv1.Code_CODE_UNAUTHENTICATED {
		t.Fatalf("unknown token: %v %v", res, err)
	}
	res, err = c.Connect(ctx, &corralv1.ConnectRequest{Token: "alice"})
	if err != nil || res.GetUserId() != "alice" {
		t.Fatalf("alice: %v %v", res, err)
	}
	joins, err := c.Join(ctx, []*corralv1.JoinPair{{UserId: "alice", Room: "team:blue"}, {UserId: "alice", Room: "team:red"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if joins[0].GetRefusal() != nil || joins[1].GetRefusal().GetCode() != corralv1.Code_CODE_FORBIDDEN {
		t.Fatalf("joins %v", joins)
	}
}
