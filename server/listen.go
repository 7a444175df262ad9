package server

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"time"
)

// deferAcceptTimeout is how long the kernel holds a connection that sent
// nothing before accept(2) returns it anyway (see listenTCP): one SYN-ACK
// retransmission. A client connects and writes its request head at once;
// one that does not is then read under the head deadline.
const deferAcceptTimeout = time.Second

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
//
// With deferAccept (the same public listener) the kernel hands a
// connection to accept(2) only once its first bytes have arrived
// (TCP_DEFER_ACCEPT on Linux; nothing elsewhere): the request head is
// then there to be read at once, so the listener's first read of it finds
// it, instead of waiting on the network poller (a failed read, a park, a
// read again per connection of a reconnect herd). A client that connects
// and sends nothing is accepted anyway once deferAcceptTimeout has passed
// (rounded up by the kernel to its SYN-ACK retransmissions), and its head
// read deadline (ReadHeaderTimeout) then runs as before.
func listenTCP(addr string, backlog int, keepAlive, deferAccept bool) (net.Listener, error) {
	var lc net.ListenConfig
	if !keepAlive {
		lc.KeepAlive = -1 // with KeepAliveConfig.Enable false: none
	}
	if deferAccept {
		lc.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) { serr = setDeferAccept(fd, deferAcceptTimeout) }); err != nil {
				return err
			}
			if serr != nil {
				return fmt.Errorf("set TCP_DEFER_ACCEPT: %w", serr)
			}
			return nil
		}
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
