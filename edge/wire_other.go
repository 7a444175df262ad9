//go:build !unix

package edge

import "syscall"

// writeNonblock is not available here: every message goes through the
// connection's writer.
func writeNonblock(syscall.RawConn, []byte) (int, error) { return 0, nil }
