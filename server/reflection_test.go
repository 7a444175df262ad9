package server_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connecthttp"
	"connectrpc.com/grpcreflect/v2"
	"github.com/corral-rt/corral/apiclient"
	"github.com/corral-rt/corral/config"
	"github.com/corral-rt/corral/server"
)

// TestReflectionListsAPI: a core answers gRPC server reflection over gRPC
// on h2c, as `grpcurl -H "authorization: Bearer $KEY" host:8090 list`
// asks it, naming RoomService; without the key it answers unauthenticated
// and names nothing.
func TestReflectionListsAPI(t *testing.T) {
	n, err := server.Start(server.Options{
		Mode: server.CoreOnly, Node: config.Node{Addr: "127.0.0.1:0"}, APIKeys: []string{testKey},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	list := func(key string) ([]string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var ics []connect.ClientInterceptor
		if key != "" {
			ics = append(ics, func(next connect.ClientFunc) connect.ClientFunc {
				return func(ctx context.Context, spec connect.Spec) (connect.ClientStream, error) {
					if info, ok := connect.CallInfoForClientContext(ctx); ok {
						info.RequestHeader().Set("Authorization", "Bearer "+key)
					}
					return next(ctx, spec)
				}
			})
		}
		c := grpcreflect.NewClient(connect.NewClient(connecthttp.NewTransport(
			apiclient.H2CClient(), "http://"+n.Addr(), connecthttp.WithGRPC()), ics...))
		s := c.NewStream(ctx)
		defer s.Close()
		names, err := s.ListServices()
		out := make([]string, len(names))
		for i, nm := range names {
			out[i] = string(nm)
		}
		return out, err
	}
	names, err := list(testKey)
	if err != nil {
		t.Fatalf("list with the key: %v", err)
	}
	for _, want := range []string{"corral.v1.RoomService", "grpc.reflection.v1.ServerReflection"} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v, want %s among them", names, want)
		}
	}
	names, err = list("")
	if connect.CodeOf(err) != connect.CodeUnauthenticated || len(names) != 0 {
		t.Errorf("without a key: %v, %v; want unauthenticated and nothing listed", names, err)
	}
}
