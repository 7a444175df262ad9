package redisurl_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/corral-rt/corral/internal/redisurl"
)

func TestOptions(t *testing.T) {
	tests := map[string]struct {
		url       string
		addrs     []string
		master    string
		password  string
		sentPass  string
		db        int
		wantError string
	}{
		"plain":              {url: "redis://127.0.0.1:7000/2", addrs: []string{"127.0.0.1:7000"}, db: 2},
		"plain password":     {url: "redis://:pw@h:1/0", addrs: []string{"h:1"}, password: "pw"},
		"rueidis sentinel":   {url: "redis://:pw@s1:26379/0?master_set=mm&addr=s2:26379", addrs: []string{"s1:26379", "s2:26379"}, master: "mm", password: "pw"},
		"sentinel":           {url: "redis+sentinel://s1:26379,s2:26380/mymaster", addrs: []string{"s1:26379", "s2:26380"}, master: "mymaster"},
		"sentinel no port":   {url: "redis+sentinel://s1,[::1]/m", addrs: []string{"s1:26379", "[::1]:26379"}, master: "m"},
		"sentinel password":  {url: "redis+sentinel://:p%40ss@s1:1/m?db=3&sentinel_password=sp", addrs: []string{"s1:1"}, master: "m", password: "p@ss", sentPass: "sp", db: 3},
		"sentinel no master": {url: "redis+sentinel://s1:1", wantError: "master set"},
		"sentinel no host":   {url: "redis+sentinel:///m", wantError: "names no sentinel"},
		"sentinel bad port":  {url: "redis+sentinel://s1:x/m", wantError: "bad port"},
		"sentinel unknown":   {url: "redis+sentinel://s1/m?foo=1", wantError: "unknown parameter"},
		"no scheme":          {url: "s1:26379", wantError: "not a URL"},
		"bad scheme":         {url: "http://:secretpw@h/0", wantError: "invalid URL scheme"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			o, err := redisurl.Options(tt.url)
			if tt.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantError) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantError)
				}
				if strings.Contains(err.Error(), "secretpw") {
					t.Fatalf("error %q reveals the password", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(o.InitAddress, tt.addrs) || o.Sentinel.MasterSet != tt.master ||
				o.Password != tt.password || o.Sentinel.Password != tt.sentPass || o.SelectDB != tt.db {
				t.Fatalf("got addrs %v master %q password %q sentinel password %q db %d",
					o.InitAddress, o.Sentinel.MasterSet, o.Password, o.Sentinel.Password, o.SelectDB)
			}
			if tt.master != "" && o.Sentinel.TopologyRefreshInterval <= 0 {
				t.Fatal("a Sentinel client must reconcile its master periodically")
			}
		})
	}
}
