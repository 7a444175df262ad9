//go:build unix

package server

import "syscall"

// setBacklog calls listen(2) again on a listening socket, which only
// changes its backlog.
func setBacklog(fd uintptr, backlog int) error { return syscall.Listen(int(fd), backlog) }
