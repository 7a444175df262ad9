// Package grpcurl_test runs grpcurl, pinned in this folder's go.mod, against
// a `corral core`: with the API key, `grpcurl list` names the API through
// gRPC server reflection (no --proto, no --protoset); without it the server
// answers Unauthenticated. `make grpcurl-check` runs it.
package grpcurl_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const key = "grpcurl-test-key-0123456789abc"

func TestGrpcurlListsAPI(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "corral")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/corral")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/corral: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	var logs bytes.Buffer
	core := exec.Command(bin, "core", "--addr", addr)
	core.Env = append(os.Environ(), "CORRAL_API_KEYS="+key)
	core.Stdout, core.Stderr = &logs, &logs
	if err := core.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		core.Process.Signal(syscall.SIGTERM)
		core.Wait()
	})
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("corral core did not answer /healthz: %v\n%s", err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}

	grpcurl := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "go", append([]string{"tool", "grpcurl"}, args...)...)
		cmd.Dir = "." // this module: go.mod pins grpcurl
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := grpcurl("-plaintext", "-H", "authorization: Bearer "+key, addr, "list")
	if err != nil {
		t.Fatalf("grpcurl list with the key: %v\n%s", err, out)
	}
	for _, want := range []string{"corral.v1.RoomService", "grpc.reflection.v1.ServerReflection"} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("grpcurl list: %q, want %s", out, want)
		}
	}
	out, err = grpcurl("-plaintext", "-H", "authorization: Bearer "+key, addr, "describe", "corral.v1.RoomService")
	if err != nil || !strings.Contains(out, "rpc Publish") {
		t.Errorf("grpcurl describe corral.v1.RoomService: %v\n%s", err, out)
	}
	out, err = grpcurl("-plaintext", "-H", "authorization: Bearer "+key, "-d", `{"pattern":"*"}`, addr, "corral.v1.RoomService/Rooms")
	if err != nil {
		t.Errorf("grpcurl call of Rooms: %v\n%s", err, out)
	}
	out, err = grpcurl("-plaintext", addr, "list")
	if err == nil || !strings.Contains(out, "Unauthenticated") {
		t.Errorf("grpcurl list without a key: %v, %q; want Unauthenticated", err, out)
	}
}
