package server_test

import (
	"context"
	"github.com/corral-rt/corral/config"
	"github.com/corral-rt/corral/internal/readytest"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/testlog"
	"github.com/corral-rt/corral/server"
)

const testKey = "server-test-api-key-0123456789"

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func start(t *testing.T, o server.Options) *server.Node {
	t.Helper()
	if o.Logger == nil {
		o.Logger = quiet()
	}
	n, err := server.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	return n
}

// do sends a request with key (if any) and returns its status and body.
func do(t *testing.T, method, url, key string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAdminNeverOnPublicPort: /admin/* and /debug/* on the public
// WebSocket port answer 404 in every configuration, insecure ones
// included, and the node keeps serving (it used to drain for anyone with
// api-insecure).
func TestAdminNeverOnPublicPort(t *testing.T) {
	for name, o := range map[string]server.Options{
		"serve insecure":             {Mode: server.Serve, APIInsecure: true},
		"serve with keys":            {Mode: server.Serve, APIKeys: []string{testKey}},
		"serve insecure internal":    {Mode: server.Serve, APIInsecure: true, Node: config.Node{InternalAddr: "127.0.0.1:0", DebugAddr: "127.0.0.1:0"}},
		"serve with keys + internal": {Mode: server.Serve, APIKeys: []string{testKey}, Node: config.Node{InternalAddr: "127.0.0.1:0", DebugAddr: "127.0.0.1:0"}},
	} {
		t.Run(name, func(t *testing.T) {
			o.Addr, o.Auth = "127.0.0.1:0", auth.Dev{}
			n := start(t, o)
			base := "http://" + n.Addr()
			for _, p := range []string{"/admin/drain", "/admin/drain?window=1ms", "/debug/pprof/", "/debug/pprof/cmdline"} {
				for _, m := range []string{http.MethodPost, http.MethodGet} {
					code, body := do(t, m, base+p, testKey)
					if code != http.StatusNotFound || !strings.Contains(body, "internal listener") {
						t.Errorf("%s %s on the public port: %d %q, want 404", m, p, code, body)
					}
				}
			}
			select {
			case <-n.Drained():
				t.Fatal("the node drained through its public port")
			default:
			}
			if code, _ := do(t, http.MethodGet, base+"/readyz", ""); code != http.StatusOK {
				t.Fatalf("readyz after the refused drains: %d", code)
			}
		})
	}
}

// TestEdgeDrainOnInternalListener: a production `corral edge` (API keys,
// an internal listener, linked to a core that needs a key) drains through
// POST /admin/drain on its internal listener with a key; without a key it
// is 401, and on its public port 404.
func TestEdgeDrainOnInternalListener(t *testing.T) {
	core := start(t, server.Options{Mode: server.CoreOnly, Node: config.Node{Addr: "127.0.0.1:0"}, APIKeys: []string{testKey}})
	edge := start(t, server.Options{
		Mode: server.EdgeOnly, Node: config.Node{Addr: "127.0.0.1:0", InternalAddr: "127.0.0.1:0", CoreURL: "http://" + core.Addr()},
		CoreAPIKey: testKey, APIKeys: []string{testKey},
		Auth: auth.Dev{},
	})
	if edge.InternalAddr() == "" || edge.InternalAddr() == edge.Addr() {
		t.Fatalf("edge internal listener %q (public %q)", edge.InternalAddr(), edge.Addr())
	}
	readytest.Wait(t, "http://"+edge.Addr()+"/readyz")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, "ws://"+edge.Addr()+"/ws", client.Options{Token: "watcher"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()

	if code, _ := do(t, http.MethodPost, "http://"+edge.Addr()+"/admin/drain", testKey); code != http.StatusNotFound {
		t.Fatalf("drain on the public port: %d, want 404", code)
	}
	internal := "http://" + edge.InternalAddr() + "/admin/drain?window=100ms"
	if code, _ := do(t, http.MethodPost, internal, ""); code != http.StatusUnauthorized {
		t.Fatalf("drain without a key: %d, want 401", code)
	}
	if code, _ := do(t, http.MethodPost, internal, "wrong-key-wrong-key-wrong-key"); code != http.StatusUnauthorized {
		t.Fatalf("drain with a wrong key: %d, want 401", code)
	}
	code, body := do(t, http.MethodPost, internal, testKey)
	if code != http.StatusOK || !strings.Contains(body, `"drained":true`) {
		t.Fatalf("drain with the key: %d %s", code, body)
	}
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("the client was not told to go")
	}
	if ce := c.Err(); ce == nil || int(ce.Code) != int(corralv1.Code_CODE_GOING_AWAY) {
		t.Fatalf("client closed with %v, want %d", ce, corralv1.Code_CODE_GOING_AWAY)
	}
	select {
	case <-edge.Drained():
	case <-ctx.Done():
		t.Fatal("edge not marked drained")
	}
}

// TestInternalListenersNeedKeys: an internal or debug listener without
// keys is refused at start unless the node is insecure; with keys the
// debug listener wants one.
func TestInternalListenersNeedKeys(t *testing.T) {
	for name, o := range map[string]server.Options{
		"edge internal": {Mode: server.EdgeOnly, Node: config.Node{InternalAddr: "127.0.0.1:0", CoreURL: "http://127.0.0.1:1"}},
		"serve debug":   {Mode: server.Serve, Node: config.Node{DebugAddr: "127.0.0.1:0"}},
		"core debug":    {Mode: server.CoreOnly, Node: config.Node{DebugAddr: "127.0.0.1:0"}},
	} {
		t.Run(name, func(t *testing.T) {
			o.Addr, o.Logger = "127.0.0.1:0", quiet()
			if o.Mode != server.CoreOnly {
				o.Auth = auth.Dev{}
			}
			n, err := server.Start(o)
			if err == nil {
				n.Close(context.Background())
				t.Fatal("started without API keys")
			}
			if !strings.Contains(err.Error(), "--api-keys") {
				t.Fatalf("error does not say what to do: %v", err)
			}
		})
	}
	n := start(t, server.Options{Mode: server.Serve, Node: config.Node{Addr: "127.0.0.1:0", DebugAddr: "127.0.0.1:0"}, Auth: auth.Dev{}, APIKeys: []string{testKey}})
	url := "http://" + n.DebugAddr() + "/debug/pprof/cmdline"
	if code, _ := do(t, http.MethodGet, url, ""); code != http.StatusUnauthorized {
		t.Fatalf("pprof without a key: %d, want 401", code)
	}
	if code, _ := do(t, http.MethodGet, url, testKey); code != http.StatusOK {
		t.Fatalf("pprof with the key: %d, want 200", code)
	}
}

// TestInsecureWarning: an insecure node logs one warning at start that
// names every open endpoint with its listener's address; a node with keys
// and verified tokens logs none.
func TestInsecureWarning(t *testing.T) {
	var logs testlog.Buffer
	n := start(t, server.Options{
		Mode: server.Serve, Node: config.Node{Addr: "127.0.0.1:0", InternalAddr: "127.0.0.1:0", DebugAddr: "127.0.0.1:0"},
		Auth: auth.Dev{}, APIInsecure: true, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	var warns []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=WARN") {
			warns = append(warns, l)
		}
	}
	if len(warns) != 1 || !strings.Contains(warns[0], "INSECURE") {
		t.Fatalf("want one INSECURE warning, got %q", warns)
	}
	for _, want := range []string{
		n.Addr() + " /ws",
		n.InternalAddr() + " RoomService",
		n.InternalAddr() + " POST /admin/drain",
		n.DebugAddr() + " /debug/pprof/",
	} {
		if !strings.Contains(warns[0], want) {
			t.Errorf("the warning does not name %q: %s", want, warns[0])
		}
	}

	var quietLogs testlog.Buffer
	jwt, err := auth.NewJWT(auth.JWTConfig{HMACSecret: []byte("a-secret-of-at-least-32-bytes-long!!")})
	if err != nil {
		t.Fatal(err)
	}
	start(t, server.Options{
		Mode: server.Serve, Node: config.Node{Addr: "127.0.0.1:0", InternalAddr: "127.0.0.1:0", DebugAddr: "127.0.0.1:0"},
		Auth: jwt, APIKeys: []string{testKey}, Logger: slog.New(slog.NewTextHandler(&quietLogs, nil)),
	})
	if strings.Contains(quietLogs.String(), "INSECURE") {
		t.Fatalf("a node with keys and JWTs warned: %s", quietLogs.String())
	}
}

// TestMetricsListener: /metrics is served on the internal listener when
// there is one, and then not on the public port; without one it stays on
// the public port.
func TestMetricsListener(t *testing.T) {
	n := start(t, server.Options{Mode: server.Serve, Node: config.Node{Addr: "127.0.0.1:0", InternalAddr: "127.0.0.1:0"}, Auth: auth.Dev{}, APIKeys: []string{testKey}})
	if code, body := do(t, http.MethodGet, "http://"+n.InternalAddr()+"/metrics", ""); code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("/metrics on the internal listener: %d", code)
	}
	if code, body := do(t, http.MethodGet, "http://"+n.Addr()+"/metrics", ""); code != http.StatusNotFound || strings.Contains(body, "go_goroutines") {
		t.Fatalf("/metrics on the public port with an internal listener: %d, want 404", code)
	}
	e := start(t, server.Options{Mode: server.Serve, Node: config.Node{Addr: "127.0.0.1:0"}, Auth: auth.Dev{}})
	if code, _ := do(t, http.MethodGet, "http://"+e.Addr()+"/metrics", ""); code != http.StatusOK {
		t.Fatalf("/metrics on the public port without an internal listener: %d, want 200", code)
	}
}
