package redistest_test

import (
	"context"
	"testing"

	"github.com/corral-rt/corral/internal/redistest"
)

func TestStartProcess(t *testing.T) {
	srv := redistest.StartProcess(t, 0)
	if srv.Addr() == "127.0.0.1:6379" {
		t.Fatal("started on the shared port")
	}
	if !redistest.Private(srv.Addr()) {
		t.Fatal("a started server is not private")
	}
	c := redistest.Client(t, srv.Addr())
	ctx := context.Background()
	if err := c.Do(ctx, c.B().Set().Key("k").Value("v").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	// The restarted server is empty: nothing is persisted.
	if n, err := c.Do(ctx, c.B().Exists().Key("k").Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("after restart EXISTS k = %d, %v", n, err)
	}
}

func TestStart(t *testing.T) {
	addr := redistest.Start(t)
	c := redistest.Client(t, addr)
	if err := c.Do(context.Background(), c.B().Ping().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if a, b := redistest.Prefix(t), redistest.Prefix(t); a == b {
		t.Fatalf("Prefix repeated %q", a)
	}
}
