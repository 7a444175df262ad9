package peek

import (
	"io"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// CanRead reports whether ReadNow reads here (Linux); elsewhere the
// caller reads the connection as usual.
const CanRead = true

// ReadNow makes one non-blocking read(2) of the socket fd into p, for a
// callback of syscall.RawConn.Read: again reports that there was nothing
// to read (EAGAIN), so that the caller gives back the buffer it borrowed
// for p and returns false, letting Go's network poller wait without it.
// With data there, borrowing the buffer, waiting and reading cost one
// syscall (a peek first, then a read, cost two, and three when the peek
// waits). A read of nothing at the end of the stream is io.EOF, as
// net.Conn.Read reports it. p must not be empty.
func ReadNow(fd uintptr, p []byte) (n int, again bool, err error) {
	for {
		r, _, errno := unix.Syscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		switch errno {
		case 0:
			if r == 0 {
				return 0, false, io.EOF
			}
			return int(r), false, nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return 0, true, nil
		}
		return 0, false, os.NewSyscallError("read", errno)
	}
}
