package server_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connectinprocess"
	"github.com/corral-rt/corral/core"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
	"github.com/corral-rt/corral/server"
)

func TestRequireAPIKey(t *testing.T) {
	const k1, k2 = "first-key-0123456789", "second-key-0123456789"
	ic, err := server.RequireAPIKey([]string{k1, k2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := core.New(core.Config{})
	t.Cleanup(func() { c.Close() })
	rpc := connect.NewServer(ic)
	corralv1connect.RegisterRoomServiceHandler(rpc, c.API())
	call := func(header string) error {
		setHeader := func(next connect.ClientFunc) connect.ClientFunc {
			return func(ctx context.Context, spec connect.Spec) (connect.ClientStream, error) {
				if info, ok := connect.CallInfoForClientContext(ctx); ok && header != "" {
					info.RequestHeader().Set("Authorization", header)
				}
				return next(ctx, spec)
			}
		}
		api := corralv1connect.NewRoomServiceClient(connect.NewClient(connectinprocess.New(rpc), setHeader))
		_, err := api.Members(context.Background(), &corralv1.MembersRequest{Room: "r"})
		return err
	}
	tests := map[string]struct {
		header string
		ok     bool
	}{
		"first key":          {"Bearer " + k1, true},
		"second key":         {"Bearer " + k2, true},
		"scheme in any case": {"bearer " + k1, true},
		"no header":          {"", false},
		"wrong key":          {"Bearer not-the-key-0123456789", false},
		"prefix of a key":    {"Bearer " + k1[:len(k1)-1], false},
		"key with a suffix":  {"Bearer " + k1 + "x", false},
		"other scheme":       {"Basic " + k1, false},
		"no scheme":          {k1, false},
		"empty token":        {"Bearer ", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := call(tc.header)
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Fatalf("got %v, want unauthenticated", err)
			}
		})
	}
}

func TestRequireAPIKeyConfig(t *testing.T) {
	for name, keys := range map[string][]string{"none": nil, "short": {"0123456789abcde"}} {
		if _, err := server.RequireAPIKey(keys, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestAPIKeySources(t *testing.T) {
	if got := server.ParseAPIKeys(" a, ,b,"); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("ParseAPIKeys: %q", got)
	}
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte("# rotated 2026-01\nold-key-0123456789\n\n  new-key-0123456789  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := server.ReadAPIKeyFile(path)
	if err != nil || !slices.Equal(got, []string{"old-key-0123456789", "new-key-0123456789"}) {
		t.Fatalf("ReadAPIKeyFile: %q, %v", got, err)
	}
	if _, err := server.ReadAPIKeyFile(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("missing file accepted")
	}
}
