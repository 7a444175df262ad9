// Package checker verifies delivery in tests and load runs: given what every
// client received and what publishers had acknowledged, it checks per room
// one order for all, no gaps, no duplicates, and that every acknowledged
// publish reached every member who was in the room; given the order in
// which each sender made its publishes, it checks per sender and room that
// they entered the room in that order, each once, none lost.
package checker

import (
	"errors"
	"fmt"
	"sort"
	"sync"
)

// Checker collects deliveries and acknowledgements. All methods are safe
// for concurrent use.
type Checker struct {
	mu sync.Mutex // guards the following fields
	// got[client][room] is what the client received, in arrival order.
	got map[string]map[string][]entry
	// windows[client][room] are the (after, upto] seq ranges the client was
	// a member for and must have received completely.
	windows map[string]map[string][][2]uint64
	// acked[room][seq] is the publish id a publisher was told has seq.
	acked map[string]map[uint64]string
	// resets[client][room] counts Reset frames (history was lost).
	resets map[string]map[string]int
	// sent[sender][room] are the publish ids a sender made, in order.
	sent map[string]map[string][]string
}

type entry struct {
	seq uint64
	id  string
}

// New returns an empty Checker.
func New() *Checker {
	return &Checker{
		got:     make(map[string]map[string][]entry),
		windows: make(map[string]map[string][][2]uint64),
		acked:   make(map[string]map[uint64]string),
		resets:  make(map[string]map[string]int),
		sent:    make(map[string]map[string][]string),
	}
}

// Received records that client received message seq (publish id id) in room.
func (c *Checker) Received(client, room string, seq uint64, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.got[client]
	if m == nil {
		m = make(map[string][]entry)
		c.got[client] = m
	}
	m[room] = append(m[room], entry{seq, id})
}

// Reset records that client was told to refetch room (a tolerated gap).
func (c *Checker) Reset(client, room string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.resets[client]
	if m == nil {
		m = make(map[string]int)
		c.resets[client] = m
	}
	m[room]++
}

// Acked records that a publisher was told its publish id got seq in room.
func (c *Checker) Acked(room string, seq uint64, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.acked[room]
	if m == nil {
		m = make(map[uint64]string)
		c.acked[room] = m
	}
	m[seq] = id
}

// Sent records that sender made the publish id to room, after every
// publish it made to room before; Check then wants id stored in room
// exactly once (acknowledged or received by someone), after them.
func (c *Checker) Sent(sender, room, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.sent[sender]
	if m == nil {
		m = make(map[string][]string)
		c.sent[sender] = m
	}
	m[room] = append(m[room], id)
}

// Member declares that client must have received every message of room
// with after < seq <= upto.
func (c *Checker) Member(client, room string, after, upto uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.windows[client]
	if m == nil {
		m = make(map[string][][2]uint64)
		c.windows[client] = m
	}
	m[room] = append(m[room], [2]uint64{after, upto})
}

// Check verifies everything recorded and returns every violation found
// (nil when delivery was perfect). Clients with a Reset in a room are
// exempt from the gap check in that room.
func (c *Checker) Check() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	add := func(format string, args ...any) {
		if len(errs) < 50 {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	// canon[room][seq] is the publish id every client must agree on.
	canon := make(map[string]map[uint64]string)
	for room, m := range c.acked {
		canon[room] = make(map[uint64]string, len(m))
		for seq, id := range m {
			canon[room][seq] = id
		}
	}
	for _, client := range sortedKeys(c.got) {
		for _, room := range sortedKeys(c.got[client]) {
			seen := make(map[uint64]bool)
			var last uint64
			for i, e := range c.got[client][room] {
				if seen[e.seq] {
					add("%s/%s: duplicate seq %d (position %d)", client, room, e.seq, i)
					continue
				}
				seen[e.seq] = true
				if e.seq < last {
					add("%s/%s: seq %d after %d: out of order", client, room, e.seq, last)
				}
				last = max(last, e.seq)
				cm := canon[room]
				if cm == nil {
					cm = make(map[uint64]string)
					canon[room] = cm
				}
				if want, ok := cm[e.seq]; ok && want != e.id {
					add("%s/%s: seq %d is %q here but %q elsewhere: two orders", client, room, e.seq, e.id, want)
				} else if !ok {
					cm[e.seq] = e.id
				}
			}
		}
	}
	for _, client := range sortedKeys(c.windows) {
		for _, room := range sortedKeys(c.windows[client]) {
			if c.resets[client][room] > 0 {
				continue
			}
			have := make(map[uint64]bool)
			for _, e := range c.got[client][room] {
				have[e.seq] = true
			}
			for _, w := range c.windows[client][room] {
				missing := 0
				first := uint64(0)
				for s := w[0] + 1; s <= w[1]; s++ {
					if !have[s] {
						if missing == 0 {
							first = s
						}
						missing++
					}
				}
				if missing > 0 {
					add("%s/%s: %d of seq (%d,%d] missing, first %d", client, room, missing, w[0], w[1], first)
				}
			}
		}
	}
	c.checkSenders(canon, add)
	return errors.Join(errs...)
}

// checkSenders checks each sender's publishes against canon, the room's
// one order: each stored once, none lost, in the order they were made.
// Lock must be held.
func (c *Checker) checkSenders(canon map[string]map[uint64]string, add func(string, ...any)) {
	if len(c.sent) == 0 {
		return
	}
	// where[room][id] is every seq the id was stored at.
	where := make(map[string]map[string][]uint64)
	for room, m := range canon {
		w := make(map[string][]uint64, len(m))
		for seq, id := range m {
			w[id] = append(w[id], seq)
		}
		where[room] = w
	}
	for _, sender := range sortedKeys(c.sent) {
		for _, room := range sortedKeys(c.sent[sender]) {
			var prevID string
			var prev uint64
			for _, id := range c.sent[sender][room] {
				at := where[room][id]
				switch {
				case len(at) == 0:
					add("%s/%s: publish %q never stored: lost", sender, room, id)
					continue
				case len(at) > 1:
					sort.Slice(at, func(i, j int) bool { return at[i] < at[j] })
					add("%s/%s: publish %q stored %d times (seqs %v): duplicated", sender, room, id, len(at), at)
				}
				if at[0] < prev {
					add("%s/%s: publish %q (seq %d) entered the room before %q (seq %d), made earlier: sender order broken", sender, room, id, at[0], prevID, prev)
				}
				prevID, prev = id, at[0]
			}
		}
	}
}

// Count reports how many messages client received in room.
func (c *Checker) Count(client, room string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got[client][room])
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
