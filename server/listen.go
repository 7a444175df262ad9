package server

import (
	"context"
	"fmt"
	"net"
)

// listenTCP listens on addr. With backlog > 0 the accept queue is set to
// backlog; the kernel caps it at net.core.somaxconn (Go's default is that
// cap). A reconnect storm arrives faster than any server accepts: raise
// net.core.somaxconn (sysctl -w net.core.somaxconn=65535) and
// net.ipv4.tcp_max_syn_backlog so the herd queues instead of being refused
// (seed W1 lost 10% of 10,000 clients to a backlog of 511). Admission
// control then paces what the server takes from the queue.
//
// Without keepAlive the accepted connections get no TCP keep-alive: Go
// turns it on by default with four setsockopt(2) calls per accept
// (SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT), about 2.5% of the
// server's CPU in the reconnect phase of the herd of 10,000 clients
// (docs/benchmarks/2026-12-06-2130-issue34-herd-writes.md). The public
// listener of a node with an edge listens so: a WebSocket has the edge's
// own liveness (its heartbeat: a connection nothing was read from for two
// is cut), and the connections it hands to net/http get keep-alive back
// (wsListener.handOff).
func listenTCP(addr string, backlog int, keepAlive bool) (net.Listener, error) {
	var lc net.ListenConfig
	if !keepAlive {
		lc.KeepAlive = -1 // with KeepAliveConfig.Enable false: none
	}
	ln, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil || backlog <= 0 {
		return ln, err
	}
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return ln, nil
	}
	rc, err := tl.SyscallConn()
	if err != nil {
		ln.Close()
		return nil, err
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) { lerr = setBacklog(fd, backlog) }); err != nil {
		lerr = err
	}
	if lerr != nil {
		ln.Close()
		return nil, fmt.Errorf("server: set backlog %d: %w", backlog, lerr)
	}
	return ln, nil
}
