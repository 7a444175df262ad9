package linkserver

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// set holds the open edge links of a Server and whether the server is
// closed, so that a link never opens after Close took the set. It is its
// own lock; callers never lock it from outside, and no other table's lock
// is ever held with it.
type set struct {
	// count follows len(links).
	count prometheus.Gauge

	mu     sync.Mutex // guards the following fields
	links  map[*Link]struct{}
	closed bool
}

func newSet(count prometheus.Gauge) *set {
	return &set{count: count, links: make(map[*Link]struct{})}
}

// add puts l in the set; it reports false, and does not, once the set is
// closed.
func (ls *set) add(l *Link) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		return false
	}
	ls.links[l] = struct{}{}
	ls.count.Inc()
	return true
}

// remove takes l out of the set; a link not in it is ignored.
func (ls *set) remove(l *Link) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if _, ok := ls.links[l]; ok {
		delete(ls.links, l)
		ls.count.Dec()
	}
}

// all returns the open links, in no order.
func (ls *set) all() []*Link {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.allLocked()
}

// allLocked returns the open links. Lock must be held.
func (ls *set) allLocked() []*Link {
	out := make([]*Link, 0, len(ls.links))
	for l := range ls.links {
		out = append(out, l)
	}
	return out
}

// each calls fn for each open link, under the set's lock: fn may take the
// link's own locks (its queue's, for backlog) but must not block nor use
// the set.
func (ls *set) each(fn func(*Link)) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for l := range ls.links {
		fn(l)
	}
}

// close closes the set and returns the links open at that moment, which
// the caller ends; first is false, and links nil, when it was closed
// already.
func (ls *set) close() (links []*Link, first bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		return nil, false
	}
	ls.closed = true
	return ls.allLocked(), true
}
