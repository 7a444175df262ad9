package edge

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// writeFd is write(2) without telling the scheduler it may block
// (RawSyscall, not Syscall): the socket is non-blocking, so the call
// returns as soon as the kernel has queued the bytes or found no room.
// Told, the runtime counts the writer's P as in a syscall; on loopback a
// write also runs the peer's receive path (softirq), and sysmon, polling
// for Ps stuck in syscalls, kept busy: 12% of the busy room's perf
// samples, 6.7% with this (docs/BENCHMARKS.md, "where the busy room's CPU
// goes"). The race detector does not see the read of p; p is the
// writer's own buffer.
func writeFd(fd int, p []byte) (int, error) {
	var ptr unsafe.Pointer
	if len(p) > 0 {
		ptr = unsafe.Pointer(&p[0])
	}
	n, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(ptr), uintptr(len(p)))
	if errno != 0 {
		return 0, errno // unix.Errno is syscall.Errno: EAGAIN and EINTR compare equal
	}
	return int(n), nil
}
