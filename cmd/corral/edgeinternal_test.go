package main

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/corral-rt/corral/server"
)

// TestEdgeInternalListener: `corral edge --internal-addr` serves /metrics
// and POST /admin/drain there, not on the public port, and the admin
// endpoint takes the key the edge presents to its cores.
func TestEdgeInternalListener(t *testing.T) {
	const key = "edge-key-0123456789abcdef"
	opts := mustConfigure(t, server.EdgeOnly, "edge", "--jwt-secret", secret, "--api-key", key,
		"--addr", "127.0.0.1:0", "--internal-addr", "127.0.0.1:0", "--core", "http://127.0.0.1:1")
	n, err := server.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	if n.InternalAddr() == "" || n.InternalAddr() == n.Addr() {
		t.Fatalf("internal listener %q, public %q", n.InternalAddr(), n.Addr())
	}
	status := func(method, url, bearer string) int {
		t.Helper()
		req, _ := http.NewRequest(method, url, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	pub, internal := "http://"+n.Addr(), "http://"+n.InternalAddr()
	for _, c := range []struct {
		name, method, url, bearer string
		want                      int
	}{
		{"metrics on the internal listener", "GET", internal + "/metrics", "", 200},
		{"no metrics on the public port", "GET", pub + "/metrics", "", 404},
		{"no admin on the public port", "POST", pub + "/admin/drain", key, 404},
		{"drain without a key", "POST", internal + "/admin/drain", "", 401},
		{"drain with another key", "POST", internal + "/admin/drain", "not-the-edge-key-0123456", 401},
		{"drain with the edge's key", "POST", internal + "/admin/drain?window=100ms", key, 200},
	} {
		if got := status(c.method, c.url, c.bearer); got != c.want {
			t.Errorf("%s: %s %s answered %d, want %d", c.name, c.method, c.url, got, c.want)
		}
	}
}

// TestEdgeAPIKeys: an edge's internal listener accepts its --api-keys when
// given, and its own --api-key only when not; an edge without an internal
// or debug listener needs no keys (its --api-key is checked by its core).
func TestEdgeAPIKeys(t *testing.T) {
	const own, other = "edge-key-0123456789abcdef", "operator-key-0123456789ab"
	base := []string{"edge", "--jwt-secret", secret, "--api-key", own}
	for name, c := range map[string]struct {
		args []string
		want []string
	}{
		"no internal listener": {nil, nil},
		"own key":              {[]string{"--internal-addr", "127.0.0.1:0"}, []string{own}},
		"own key, debug":       {[]string{"--debug-addr", "127.0.0.1:0"}, []string{own}},
		"api-keys":             {[]string{"--internal-addr", "127.0.0.1:0", "--api-keys", other}, []string{other}},
	} {
		opts := mustConfigure(t, server.EdgeOnly, append(append([]string{}, base...), c.args...)...)
		if !slices.Equal(opts.APIKeys, c.want) {
			t.Errorf("%s: keys %q, want %q", name, opts.APIKeys, c.want)
		}
	}
}
