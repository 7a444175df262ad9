package roompattern_test

import (
	"testing"

	"github.com/corral-rt/corral/roompattern"
)

func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{
		{"game:*", "game:1"},
		{"*", ""},
		{"org:*:chat", "org:acme:chat"},
		{"*a*a*a*b", "aaaaaaaaaaaaaaaa"},
		{"ab*ba", "aba"},
		{"a*bc*bc", "abcbc"},
		{"", ""},
		{"**", "*"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, room string) {
		got := roompattern.Match([]string{pattern}, room)
		if !roompattern.Match([]string{"*"}, room) {
			t.Fatalf("* does not match %q", room)
		}
		if !roompattern.Match([]string{room}, room) {
			t.Fatalf("%q does not match itself", room)
		}
		if !roompattern.Match([]string{pattern}, pattern) {
			t.Fatalf("%q does not match itself", pattern)
		}
		if len(pattern)*len(room) <= 1<<16 {
			if want := matchDP(pattern, room); got != want {
				t.Fatalf("Match(%q, %q) = %v, reference says %v", pattern, room, got, want)
			}
		}
	})
}

// matchDP is an obviously correct, quadratic reference matcher: ok[j]
// reports whether the pattern so far matches room[:j].
func matchDP(pattern, room string) bool {
	ok := make([]bool, len(room)+1)
	ok[0] = true
	for i := 0; i < len(pattern); i++ {
		next := make([]bool, len(room)+1)
		if pattern[i] == '*' {
			seen := false
			for j := range ok {
				seen = seen || ok[j]
				next[j] = seen
			}
		} else {
			for j := 1; j <= len(room); j++ {
				next[j] = ok[j-1] && room[j-1] == pattern[i]
			}
		}
		ok = next
	}
	return ok[len(room)]
}
