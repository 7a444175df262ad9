// Command hooks-go is an example backend for corral's hooks
// (docs/HOOKS.md): a corral.v1.HooksService over Connect against a toy
// user table. It decides who connects (Connect: the hello's token names a
// user of the table), who joins which "team:*" room (Join: members only,
// answered per pair of the batch), and answers the "whoami" call (Call).
//
// Run it, then corral against it:
//
//	go run ./examples/hooks-go -addr 127.0.0.1:9000
//	go run ./cmd/corral serve \
//	  --hooks-url http://127.0.0.1:9000 --config examples/hooks-go/corral.yaml
//
// (corral.yaml turns on the Connect and Call hooks and sends the joins
// of the team:* rooms to the Join hook.)
//
// A hello with token "alice" connects as alice, who may join team:blue and
// is refused team:red (error 4403, "members only"); an unknown token is
// closed with 4401.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connecthttp"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
)

// user is a row of the toy user table.
type user struct {
	id    string
	teams []string
}

// app implements the hooks corral calls; the others answer unimplemented
// (corral calls only those its flags enable).
type app struct {
	corralv1connect.UnimplementedHooksServiceHandler
	users map[string]user // by token
}

func newApp() *app {
	return &app{users: map[string]user{
		"alice": {id: "alice", teams: []string{"blue"}},
		"bob":   {id: "bob", teams: []string{"red"}},
		"carol": {id: "carol", teams: []string{"blue", "red"}},
	}}
}

// Connect admits the users of the table for an hour.
func (a *app) Connect(ctx context.Context, req *corralv1.ConnectRequest) (*corralv1.ConnectResponse, error) {
	u, ok := a.users[req.GetToken()]
	if !ok {
		return &corralv1.ConnectResponse{Refusal: &corralv1.Refusal{
			Code: corralv1.Code_CODE_UNAUTHENTICATED, Reason: "unknown token",
		}}, nil
	}
	return &corralv1.ConnectResponse{
		UserId:      u.id,
		Join:        []string{"*"},
		Publish:     []string{"*"},
		ExpiresUnix: time.Now().Add(time.Hour).Unix(),
	}, nil
}

// Join answers each pair of the batch, in order: team rooms are for
// their members.
func (a *app) Join(ctx context.Context, req *corralv1.JoinRequest) (*corralv1.JoinResponse, error) {
	res := &corralv1.JoinResponse{Results: make([]*corralv1.JoinResult, 0, len(req.GetPairs()))}
	for _, p := range req.GetPairs() {
		r := &corralv1.JoinResult{}
		if !a.member(p.GetUserId(), p.GetRoom()) {
			r.Refusal = &corralv1.Refusal{Code: corralv1.Code_CODE_FORBIDDEN, Reason: "members only"}
		}
		res.Results = append(res.Results, r)
	}
	return res, nil
}

func (a *app) member(userID, room string) bool {
	team, ok := strings.CutPrefix(room, "team:")
	if !ok {
		return true
	}
	for _, u := range a.users {
		if u.id == userID {
			for _, t := range u.teams {
				if t == team {
					return true
				}
			}
		}
	}
	return false
}

// Call answers "whoami" with the caller's id.
func (a *app) Call(ctx context.Context, req *corralv1.CallRequest) (*corralv1.CallResponse, error) {
	if req.GetMethod() != "whoami" {
		return &corralv1.CallResponse{Refusal: &corralv1.Refusal{
			Code: corralv1.Code_CODE_INVALID_ARGUMENT, Reason: "unknown method",
		}}, nil
	}
	return &corralv1.CallResponse{Payload: fmt.Appendf(nil, `{"user":%q}`, req.GetUserId())}, nil
}

// handler serves a over Connect, gRPC and gRPC-Web.
func handler(a *app) http.Handler {
	rpc := connect.NewServer()
	corralv1connect.RegisterHooksServiceHandler(rpc, a)
	mux := http.NewServeMux()
	connecthttp.Mount(mux, rpc)
	return mux
}

func main() {
	addr := flag.String("addr", "127.0.0.1:9000", "listen address `host:port`")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true) // corral calls http:// backends over h2c
	srv := &http.Server{Addr: *addr, Handler: handler(newApp()), Protocols: p, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	slog.Info("hooks backend listening", "addr", *addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		slog.Error("serve", "err", err)
		os.Exit(1)
	}
}
