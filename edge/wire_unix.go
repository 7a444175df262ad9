//go:build unix

package edge

import (
	"sync"
	"syscall"
)

// writeNonblock makes one write(2) of p on raw's socket (non-blocking, as
// Go keeps every network socket) and returns how much it took; 0 and no
// error when the socket has no room. It allocates nothing: the function
// RawConn.Write calls is made once per rawWrite, and rawWrites are pooled
// (a closure per call was one allocation per inline delivery).
func writeNonblock(raw syscall.RawConn, p []byte) (int, error) {
	rw := rawWrites.Get().(*rawWrite)
	rw.p = p
	err := raw.Write(rw.do)
	n, werr := rw.n, rw.err
	rw.p, rw.err = nil, nil
	rawWrites.Put(rw)
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

// rawWrite is one writeNonblock's state, and do the function that writes
// it, bound once.
type rawWrite struct {
	p   []byte
	n   int
	err error
	do  func(fd uintptr) bool
}

var rawWrites = sync.Pool{New: func() any {
	rw := &rawWrite{}
	rw.do = func(fd uintptr) bool {
		for {
			rw.n, rw.err = writeFd(int(fd), rw.p)
			if rw.err != syscall.EINTR {
				return true // never wait for room: the caller queues instead
			}
		}
	}
	return rw
}}
