package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/config"
	"github.com/corral-rt/corral/internal/buildinfo"
	"github.com/corral-rt/corral/server"
)

// TestBuildInfoMetric: /metrics names the running build in
// corral_build_info.
func TestBuildInfoMetric(t *testing.T) {
	n := start(t, server.Options{Mode: server.Serve, Node: config.Node{Addr: "127.0.0.1:0"}, Auth: auth.Dev{}})
	code, body := do(t, http.MethodGet, "http://"+n.Addr()+"/metrics", "")
	b := buildinfo.Get()
	want := fmt.Sprintf("corral_build_info{commit=%q,goversion=%q,version=%q} 1", b.Commit, b.GoVersion, b.Version)
	if code != http.StatusOK || !strings.Contains(body, want) {
		t.Fatalf("/metrics: %d, no line %s in:\n%s", code, want, body)
	}
}
