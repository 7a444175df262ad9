// Package roompattern holds the one meaning of a room pattern: an exact
// room name, or a name in which '*' matches any run of characters,
// including none ("game:*", "org:*:chat", "*"). Grants (token claims and
// the internal API's), signal rooms, read-only rooms and event filters all
// match rooms with it.
package roompattern

import (
	"strings"

	"github.com/corral-rt/corral/internal/safetext"
)

// MaxLen bounds one pattern, in bytes.
const MaxLen = 256

// Check reports why p is not a usable pattern: empty, longer than MaxLen,
// or not a printable name (safetext.CheckName). It wraps
// safetext.ErrInvalidName.
func Check(p string) error {
	return safetext.CheckName("pattern", p, MaxLen)
}

// Match reports whether room is matched by any pattern in patterns. A pattern
// is an exact room name, or contains '*', which matches any run of
// characters, including none: "game:*", "*", "org:*:chat". There are no
// other metacharacters.
//
// Match never backtracks: each pattern is checked in time linear in the
// lengths of the pattern and the room.
func Match(patterns []string, room string) bool {
	for _, g := range patterns {
		if match(g, room) {
			return true
		}
	}
	return false
}

// match reports whether pattern matches all of room.
//
// A pattern "p*m1*m2*...*s" matches when room starts with p, ends with s, and
// the middle segments m1, m2, ... occur in order, without overlap, between
// them. Taking the leftmost occurrence of each middle segment is always
// safe: it leaves the most room for the segments after it. So one pass, with
// no backtracking, decides the match.
func match(pattern, room string) bool {
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		return pattern == room
	}
	prefix := pattern[:star]
	pattern = pattern[star+1:]
	var middle, suffix string
	if last := strings.LastIndexByte(pattern, '*'); last >= 0 {
		middle, suffix = pattern[:last], pattern[last+1:]
	} else {
		suffix = pattern
	}
	if len(room) < len(prefix)+len(suffix) ||
		!strings.HasPrefix(room, prefix) || !strings.HasSuffix(room, suffix) {
		return false
	}
	room = room[len(prefix) : len(room)-len(suffix)]
	for middle != "" {
		seg, rest, _ := strings.Cut(middle, "*")
		middle = rest
		if seg == "" {
			continue
		}
		i := strings.Index(room, seg)
		if i < 0 {
			return false
		}
		room = room[i+len(seg):]
	}
	return true
}
