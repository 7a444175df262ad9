package peek

import (
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// WaitReadable blocks until nc has a byte to read, has ended, or its read
// deadline passes (or it is closed), without a buffer: it peeks
// (MSG_PEEK) one byte onto the stack, and Go's network poller waits while
// there is none. It consumes nothing; the caller's next read reports
// whatever ended the wait. A connection that is not a socket returns at
// once.
func WaitReadable(nc net.Conn) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Read(func(fd uintptr) bool {
		// recvfrom(2) without an address: x/sys's Recvfrom allocates one
		// per call (23,000 in the herd's reconnect phase).
		var b [1]byte
		_, _, errno := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
			unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
		return errno != unix.EAGAIN
	})
}
