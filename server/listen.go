package server

import (
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
func listenTCP(addr string, backlog int) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
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
