//go:build !unix

package peek

import "net"

// WaitReadable returns at once where there is no MSG_PEEK: the caller
// borrows its buffer before the first byte arrives.
func WaitReadable(net.Conn) {}
