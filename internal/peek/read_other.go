//go:build !linux

package peek

import "errors"

// CanRead reports whether ReadNow reads here (Linux); elsewhere the
// caller reads the connection as usual.
const CanRead = false

// ReadNow is not available off Linux (CanRead).
func ReadNow(uintptr, []byte) (int, bool, error) {
	return 0, false, errors.New("peek: ReadNow is not available on this platform")
}
