package integration_test

import (
	"context"
	"fmt"
	"github.com/corral-rt/corral/config"
	"github.com/corral-rt/corral/internal/readytest"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/corral-rt/corral/apiclient"
	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
	"github.com/corral-rt/corral/internal/redistest"
	"github.com/corral-rt/corral/protocol"
	"github.com/corral-rt/corral/server"
)

// deployment is a running corral: one process, or an edge and a core.
type deployment struct {
	wsURL string
	api   corralv1connect.RoomServiceClient
	// apiURL and apiNode serve the internal API (the core's node).
	apiURL  string
	apiNode *server.Node
}

// testAPIKey is the internal API key of every test deployment.
const testAPIKey = "integration-api-key-0123456789"

// modes are the topologies every end-to-end test runs against: one
// process in memory, edge and core over h2c, and one process on Redis.
var modes = []string{"serve", "split", "redis"}

// quietLogger is the deployments' logger: silent, or with
// CORRAL_TEST_LOGS set, every record to stderr (debugging a test).
func quietLogger() *slog.Logger {
	if os.Getenv("CORRAL_TEST_LOGS") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// start runs corral in the given mode with auth a (nil: dev auth), stopped
// when the test ends.
func start(t *testing.T, mode string, a auth.Authenticator, tune func(*server.Options)) *deployment {
	t.Helper()
	if a == nil {
		a = auth.Dev{}
	}
	stop := func(n *server.Node) {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			n.Close(ctx)
		})
	}
	// Behaviour tests push traffic faster than a browser would; the
	// abuse limits have their own tests (limits_test.go), which set them.
	tune = withoutRateLimits(tune)
	var edgeNode, apiNode *server.Node
	var apiURL string
	switch mode {
	case "serve", "redis":
		opts := server.Options{Mode: server.Serve, Node: config.Node{Addr: "127.0.0.1:0", InternalAddr: "127.0.0.1:0"}, Auth: a, Logger: quietLogger(),
			APIKeys: []string{testAPIKey}}
		if mode == "redis" {
			opts.RedisURL = "redis://" + redistest.Start(t)
			opts.RedisPrefix = redistest.Prefix(t)
		}
		if tune != nil {
			tune(&opts)
		}
		n, err := server.Start(opts)
		if err != nil {
			t.Fatal(err)
		}
		stop(n)
		edgeNode, apiNode, apiURL = n, n, "http://"+n.InternalAddr()
	case "split":
		copts := server.Options{Mode: server.CoreOnly, Node: config.Node{Addr: "127.0.0.1:0"}, Logger: quietLogger(), APIKeys: []string{testAPIKey}}
		if tune != nil {
			tune(&copts)
		}
		coreNode, err := server.Start(copts)
		if err != nil {
			t.Fatal(err)
		}
		apiNode, apiURL = coreNode, "http://"+coreNode.Addr()
		eopts := server.Options{Mode: server.EdgeOnly, Node: config.Node{Addr: "127.0.0.1:0", CoreURL: apiURL}, Auth: a, Logger: quietLogger(),
			CoreAPIKey: testAPIKey}
		if tune != nil {
			tune(&eopts)
		}
		edgeNode, err = server.Start(eopts)
		if err != nil {
			coreNode.Close(context.Background())
			t.Fatal(err)
		}
		stop(coreNode)
		stop(edgeNode)
	default:
		t.Fatalf("unknown mode %q", mode)
	}
	readytest.Wait(t, "http://"+edgeNode.Addr()+"/readyz")
	return &deployment{
		wsURL:   "ws://" + edgeNode.Addr() + "/ws",
		api:     apiclient.New(apiURL, testAPIKey, nil),
		apiURL:  apiURL,
		apiNode: apiNode,
	}
}

// dial connects a client, failing the test on error.
func dial(t *testing.T, d *deployment, user string, enc protocol.Encoding) *client.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, d.wsURL, client.Options{Token: user, Encoding: enc})
	if err != nil {
		t.Fatalf("dial as %s: %v", user, err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// nextFrame waits for the next frame matching keep, failing on close or
// timeout.
func nextFrame(t *testing.T, c *client.Conn, keep func(*corralv1.ServerFrame) bool) *corralv1.ServerFrame {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case f, ok := <-c.Frames():
			if !ok {
				t.Fatalf("connection ended while waiting: %v", c.Err())
			}
			if keep(f) {
				return f
			}
		case <-timeout:
			t.Fatal("timed out waiting for a frame")
		}
	}
}

// waitClosed waits for the connection to end and returns why.
func waitClosed(t *testing.T, c *client.Conn) *client.CloseError {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-c.Frames():
			if !ok {
				return c.Err()
			}
		case <-timeout:
			t.Fatal("timed out waiting for the connection to close")
		}
	}
}

func payload(i int) []byte { return []byte(fmt.Sprintf(`{"n":%d}`, i)) }

// withoutRateLimits lifts the per-connection rate limits, then applies
// tune.
func withoutRateLimits(tune func(*server.Options)) func(*server.Options) {
	return func(o *server.Options) {
		o.Edge.MessageRate, o.Edge.SignalRate, o.Edge.ControlRate = -1, -1, -1
		o.Edge.PresenceRate, o.Edge.QueryRate, o.Edge.AckRate, o.Edge.MiscRate = -1, -1, -1, -1
		o.Edge.CallRate = -1
		if tune != nil {
			tune(o)
		}
	}
}
