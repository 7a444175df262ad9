//go:build linux

package server

import (
	"syscall"
	"time"
)

// setDeferAccept sets TCP_DEFER_ACCEPT on a TCP socket before it listens:
// accept(2) returns a connection once data has arrived on it, or once d
// has passed (the kernel takes whole seconds).
func setDeferAccept(fd uintptr, d time.Duration) error {
	return syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_DEFER_ACCEPT, int(max(d/time.Second, 1)))
}
