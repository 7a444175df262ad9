// Package peek reads a connection's bytes once there are some, into a
// buffer borrowed only then, so that a goroutine waiting on a silent
// client (a reconnect herd has thousands) holds no read buffer: ReadNow,
// called from a syscall.RawConn.Read callback, makes one non-blocking
// read(2), and reports when there was nothing so the caller gives its
// buffer back and lets Go's network poller wait. A read of bytes already
// there costs one syscall, the wait included.
package peek
