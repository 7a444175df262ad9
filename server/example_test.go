package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/corral-rt/corral/auth"
	"github.com/corral-rt/corral/config"
	"github.com/corral-rt/corral/server"
)

// Start corral as one process (edge and core linked in-process, in
// memory), as `corral serve --insecure-dev` does, on a free port.
func ExampleStart() {
	n, err := server.Start(server.Options{
		Mode:   server.Serve,
		Node:   config.Node{Addr: "127.0.0.1:0"},
		Auth:   auth.Dev{}, // --insecure-dev: the token is the user id
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer n.Close(context.Background())
	resp, err := http.Get("http://" + n.Addr() + "/healthz")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println("healthz:", resp.StatusCode, "- clients connect to ws://"+"<addr>/ws")
	// Output: healthz: 200 - clients connect to ws://<addr>/ws
}
