//go:build unix

package server

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// waitReadable blocks until nc has a byte to read, has ended, or its read
// deadline passes, without a buffer: it peeks (MSG_PEEK) one byte into
// the stack, and Go's network poller waits while there is none. A
// connection that is not a socket returns at once.
func waitReadable(nc net.Conn) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		return !errors.Is(err, unix.EAGAIN)
	})
}
