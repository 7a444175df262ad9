package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/config"
	"github.com/corral-rt/corral/server"
)

func isSecret(name string) bool {
	return name == "jwt-secret" || name == "api-keys" || name == "redis"
}

func TestRedactArgs(t *testing.T) {
	for name, tc := range map[string]struct{ in, want []string }{
		"equals": {
			[]string{"corral", "serve", "--jwt-secret=s3cret-s3cret", "--addr=:8080"},
			[]string{"corral", "serve", "--jwt-secret=REDACTED", "--addr=:8080"},
		},
		"separate": {
			[]string{"corral", "core", "-api-keys", "k1,k2", "--history", "5"},
			[]string{"corral", "core", "-api-keys", "REDACTED", "--history", "5"},
		},
		"redis password": {
			[]string{"corral", "core", "--redis", "redis://:hunter2hunter2@10.0.0.5:6379/0"},
			[]string{"corral", "core", "--redis", "redis://REDACTED@10.0.0.5:6379/0"},
		},
		"redis user and password": {
			[]string{"corral", "core", "--redis=redis://app:hunter2hunter2@r:6379"},
			[]string{"corral", "core", "--redis=redis://REDACTED@r:6379"},
		},
		"redis without password": {
			[]string{"corral", "core", "--redis", "redis://r:6379/0"},
			[]string{"corral", "core", "--redis", "redis://r:6379/0"},
		},
		"redis password in query": {
			[]string{"corral", "core", "--redis", "redis://r:6379?addr=r2:6379&password=hunter2"},
			[]string{"corral", "core", "--redis", "redis://r:6379?addr=r2%3A6379&password=REDACTED"},
		},
		"flag last without value": {
			[]string{"corral", "serve", "--jwt-secret"},
			[]string{"corral", "serve", "--jwt-secret"},
		},
		"after --": {
			[]string{"corral", "serve", "--", "--jwt-secret=x"},
			[]string{"corral", "serve", "--", "--jwt-secret=x"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			in := slices.Clone(tc.in)
			got := server.RedactArgs(in, isSecret)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("RedactArgs(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if !slices.Equal(in, tc.in) {
				t.Fatal("RedactArgs changed its argument")
			}
		})
	}
}

func TestReadSecretFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	got, err := server.ReadSecretFile(write("ok", "a secret of 32 bytes or more....\n"))
	if err != nil || got != "a secret of 32 bytes or more...." {
		t.Fatalf("ReadSecretFile = %q, %v", got, err)
	}
	for name, path := range map[string]string{
		"empty":   write("empty", "\n"),
		"missing": filepath.Join(dir, "missing"),
		"large":   write("large", strings.Repeat("x", 65<<10)),
	} {
		if _, err := server.ReadSecretFile(path); err == nil || !strings.HasPrefix(err.Error(), "server: ") {
			t.Errorf("%s: err %v, want a server: error", name, err)
		}
	}
}

// TestDebugCmdlineRedacted: /debug/pprof/cmdline shows Options.DebugCmdline,
// and without one only the program name: never a secret of os.Args.
func TestDebugCmdlineRedacted(t *testing.T) {
	const secret = "jwt-secret-jwt-secret-jwt-secret-42"
	const debugKey = "debug-api-key-0123456789abcdef"
	args := os.Args
	os.Args = append(slices.Clone(args), "--jwt-secret="+secret)
	t.Cleanup(func() { os.Args = args })
	for name, cmdline := range map[string][]string{
		"given":   server.RedactArgs(os.Args, isSecret),
		"not set": nil,
	} {
		t.Run(name, func(t *testing.T) {
			n, err := server.Start(server.Options{
				Mode: server.Serve, Node: config.Node{Addr: "127.0.0.1:0", DebugAddr: "127.0.0.1:0"},
				DebugCmdline: cmdline, Auth: auth.Dev{}, APIKeys: []string{debugKey},
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			})
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close(context.Background())
			// The debug listener is behind the API key like every admin
			// endpoint (admin.go).
			req, _ := http.NewRequest(http.MethodGet, "http://"+n.DebugAddr()+"/debug/pprof/cmdline", nil)
			req.Header.Set("Authorization", "Bearer "+debugKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), os.Args[0]) {
				t.Fatalf("cmdline: %d %q", resp.StatusCode, body)
			}
			if strings.Contains(string(body), secret) {
				t.Fatalf("cmdline shows the secret: %q", body)
			}
			if cmdline != nil && !strings.Contains(string(body), "--jwt-secret="+server.Redacted) {
				t.Fatalf("cmdline %q does not show the redacted flag", body)
			}
		})
	}
}
