//go:build unix

package edge

import "syscall"

// writeNonblock makes one write(2) of p on raw's socket (non-blocking, as
// Go keeps every network socket) and returns how much it took; 0 and no
// error when the socket has no room.
func writeNonblock(raw syscall.RawConn, p []byte) (int, error) {
	var n int
	var werr error
	err := raw.Write(func(fd uintptr) bool {
		for {
			n, werr = syscall.Write(int(fd), p)
			if werr != syscall.EINTR {
				return true // never wait for room: the caller queues instead
			}
		}
	})
	if err != nil {
		return 0, err
	}
	if werr == syscall.EAGAIN {
		return 0, nil
	}
	if werr != nil {
		return 0, werr
	}
	return max(n, 0), nil
}
