//go:build linux

package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// keepAliveOn reads SO_KEEPALIVE of nc, a TCP connection (maybe wrapped
// in a prefixConn).
func keepAliveOn(t *testing.T, nc net.Conn) bool {
	t.Helper()
	if p, ok := nc.(*prefixConn); ok {
		nc = p.Conn
	}
	rc, err := nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var serr error
	if err := rc.Control(func(fd uintptr) { v, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE) }); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
	return v != 0
}

// TestPublicListenerKeepAlive: the public listener of a node with an edge
// (listenTCP as Node.listen calls it) accepts without TCP keep-alive, so a
// WebSocket upgrade costs no setsockopt(2) for it (the edge's heartbeat
// keeps its liveness); a connection handed to net/http gets it back.
func TestPublicListenerKeepAlive(t *testing.T) {
	ln, err := listenTCP("127.0.0.1:0", 0, false)
	if err != nil {
		t.Fatal(err)
	}
	ws := make(chan bool, 1)
	page := make(chan bool, 1)
	wsH := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nc, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		ws <- keepAliveOn(t, nc)
		nc.Close()
	})
	l := newWSListener(ln, wsH, "/ws", 5*time.Second, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "page") }),
		ConnContext: func(ctx context.Context, nc net.Conn) context.Context {
			page <- keepAliveOn(t, nc)
			return ctx
		},
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, _, err := websocket.Dial(ctx, "ws://"+addr+"/ws", nil); err == nil {
		c.CloseNow()
	}
	if <-ws {
		t.Error("an upgraded WebSocket's socket has TCP keep-alive: Go's four setsockopt(2) at accept were made")
	}
	resp, err := (&http.Client{Transport: &http.Transport{}}).Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !<-page {
		t.Error("a connection handed to net/http has no TCP keep-alive")
	}
}
