//go:build !linux

package edge

import (
	"errors"
	"syscall"
)

// epoll has no counterpart here: connections keep their reader.
type epoll struct{}

func openEpoll() (*epoll, error) { return nil, errors.New("edge: no epoll on this platform") }

func (*epoll) arm(syscall.RawConn, uint64, bool) error    { return errors.New("edge: no epoll") }
func (*epoll) armOut(syscall.RawConn, uint64, bool) error { return errors.New("edge: no epoll") }
func (*epoll) wait(func(uint64))                          {}
func (*epoll) close()                                     {}
