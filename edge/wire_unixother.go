//go:build unix && !linux

package edge

import "syscall"

// writeFd is write(2); on Linux it is a raw syscall (wire_linux.go).
func writeFd(fd int, p []byte) (int, error) { return syscall.Write(fd, p) }
