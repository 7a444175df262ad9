package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/client"
	"github.com/corral-rt/corral/config"
	"github.com/corral-rt/corral/server"
)

// TestServeReadyWhenStarted: a Serve node is ready as soon as Start
// returns — its edge's links to the in-process core are up — so a client
// that connects at once is welcomed, never told to retry with 4002 (an
// apiclient example failed CI that way).
func TestServeReadyWhenStarted(t *testing.T) {
	for i := range 5 {
		n := start(t, server.Options{Mode: server.Serve, Node: config.Node{Addr: "127.0.0.1:0"}, Auth: auth.Dev{}})
		if code, body := do(t, http.MethodGet, "http://"+n.Addr()+"/readyz", ""); code != http.StatusOK {
			t.Fatalf("start %d: /readyz right after Start: %d %q, want 200", i, code, body)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := client.Dial(ctx, "ws://"+n.Addr()+"/ws", client.Options{Token: "u"})
		cancel()
		if err != nil {
			t.Fatalf("start %d: a client right after Start: %v", i, err)
		}
		c.CloseNow()
	}
}
