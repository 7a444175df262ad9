package edge

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// epoll is the poller's set of parked sockets: an epoll instance of the
// edge's own, itself waited on by Go's network poller (an epoll fd is
// readable while it has events), so no thread blocks in epoll_wait.
// Sockets are armed one-shot: an event fires once, then the socket stays
// in the set, disarmed, until it parks again (EPOLL_CTL_MOD).
type epoll struct {
	fd  int      // valid until close; poller.mu orders arm before close
	f   *os.File // fd, in Go's network poller
	raw syscall.RawConn
}

func openEpoll() (*epoll, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "edge-epoll")
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &epoll{fd: fd, f: f, raw: raw}, nil
}

// arm registers the socket behind raw (add: for the first time) to report
// id once when it turns readable or hangs up. Control holds the socket
// open meanwhile: a closed socket fails here instead of arming a number
// that may already name another.
func (ep *epoll) arm(raw syscall.RawConn, id uint64, add bool) error {
	return ep.ctl(raw, id, add, unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLONESHOT)
}

// armOut registers the socket behind raw (add: for the first time) to
// report id once when it turns writable, or fails (EPOLLERR and EPOLLHUP
// are always reported).
func (ep *epoll) armOut(raw syscall.RawConn, id uint64, add bool) error {
	return ep.ctl(raw, id, add, unix.EPOLLOUT|unix.EPOLLONESHOT)
}

func (ep *epoll) ctl(raw syscall.RawConn, id uint64, add bool, events uint32) error {
	ev := unix.EpollEvent{
		Events: events,
		Fd:     int32(uint32(id)),
		Pad:    int32(uint32(id >> 32)),
	}
	var err error
	cerr := raw.Control(func(fd uintptr) {
		op := unix.EPOLL_CTL_MOD
		if add {
			op = unix.EPOLL_CTL_ADD
		}
		err = unix.EpollCtl(ep.fd, op, int(fd), &ev)
		switch {
		case errors.Is(err, unix.ENOENT) && !add:
			err = unix.EpollCtl(ep.fd, unix.EPOLL_CTL_ADD, int(fd), &ev)
		case errors.Is(err, unix.EEXIST) && add:
			err = unix.EpollCtl(ep.fd, unix.EPOLL_CTL_MOD, int(fd), &ev)
		}
	})
	if cerr != nil {
		return cerr
	}
	return err
}

// wait reports each event's id to fn until close.
func (ep *epoll) wait(fn func(id uint64)) {
	var events [128]unix.EpollEvent
	ep.raw.Read(func(fd uintptr) bool {
		for {
			n, err := unix.EpollWait(int(fd), events[:], 0)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				return true
			}
			for _, ev := range events[:n] {
				fn(uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32)
			}
			if n < len(events) {
				return false // wait until readable again
			}
		}
	})
}

func (ep *epoll) close() { ep.f.Close() }
