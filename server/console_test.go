package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/config"
	"github.com/corral-rt/corral/server"
)

// TestConsoleOnlyOnInternalListener: the admin console is served where
// the internal API is (a serve node's internal listener, a core's
// listener), with headers that forbid framing and foreign scripts, and
// never on a public port; an edge's internal listener, which has no
// RoomService, does not serve it either.
func TestConsoleOnlyOnInternalListener(t *testing.T) {
	serve := start(t, server.Options{Mode: server.Serve, Node: config.Node{Addr: "127.0.0.1:0", InternalAddr: "127.0.0.1:0"}, APIKeys: []string{testKey}, Auth: auth.Dev{}})
	core := start(t, server.Options{Mode: server.CoreOnly, Node: config.Node{Addr: "127.0.0.1:0"}, APIKeys: []string{testKey}})
	edge := start(t, server.Options{
		Mode: server.EdgeOnly, Node: config.Node{Addr: "127.0.0.1:0", InternalAddr: "127.0.0.1:0", CoreURL: "http://" + core.Addr()},
		CoreAPIKey: testKey, APIKeys: []string{testKey}, Auth: auth.Dev{},
	})
	for _, base := range []string{"http://" + serve.InternalAddr(), "http://" + core.Addr()} {
		for _, p := range []string{"/console/", "/console/console.js", "/console/console.css"} {
			resp, err := http.Get(base + p)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s%s: %d", base, p, resp.StatusCode)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "script-src 'self'") {
				t.Fatalf("GET %s%s: CSP %q", base, p, csp)
			}
		}
	}
	for _, base := range []string{"http://" + serve.Addr(), "http://" + edge.Addr(), "http://" + edge.InternalAddr()} {
		for _, p := range []string{"/console/", "/console", "/console/console.js"} {
			if code, _ := do(t, http.MethodGet, base+p, testKey); code != http.StatusNotFound {
				t.Errorf("GET %s%s: %d, want 404", base, p, code)
			}
		}
	}
}
