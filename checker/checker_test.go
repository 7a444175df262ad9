package checker_test

import (
	"strings"
	"testing"

	"github.com/corral-rt/corral/checker"
)

func TestCheck(t *testing.T) {
	tests := map[string]struct {
		build func(c *checker.Checker)
		want  string // substring of the error; empty: no error
	}{
		"perfect": {build: func(c *checker.Checker) {
			for _, cl := range []string{"a", "b"} {
				c.Member(cl, "r", 0, 3)
				for s := uint64(1); s <= 3; s++ {
					c.Received(cl, "r", s, string(rune('0'+s)))
				}
			}
			c.Acked("r", 2, "2")
		}},
		"gap": {build: func(c *checker.Checker) {
			c.Member("a", "r", 0, 3)
			c.Received("a", "r", 1, "1")
			c.Received("a", "r", 3, "3")
		}, want: "missing, first 2"},
		"duplicate": {build: func(c *checker.Checker) {
			c.Received("a", "r", 1, "1")
			c.Received("a", "r", 1, "1")
		}, want: "duplicate seq 1"},
		"sender in order": {build: func(c *checker.Checker) {
			for i, id := range []string{"a1", "a2", "a3"} {
				c.Sent("alice", "r", id)
				c.Acked("r", uint64(2*i+1), id)
			}
			c.Sent("bob", "r", "b1")
			c.Received("x", "r", 2, "b1")
		}},
		"sender reordered": {build: func(c *checker.Checker) {
			c.Sent("alice", "r", "a1")
			c.Sent("alice", "r", "a2")
			c.Sent("alice", "r", "a3")
			c.Acked("r", 1, "a1")
			c.Acked("r", 2, "a3")
			c.Acked("r", 3, "a2")
		}, want: `publish "a3" (seq 2) entered the room before "a2" (seq 3), made earlier: sender order broken`},
		"sender lost": {build: func(c *checker.Checker) {
			c.Sent("alice", "r", "a1")
			c.Sent("alice", "r", "a2")
			c.Acked("r", 1, "a1")
		}, want: `publish "a2" never stored: lost`},
		"sender duplicated": {build: func(c *checker.Checker) {
			c.Sent("alice", "r", "a1")
			c.Received("x", "r", 1, "a1")
			c.Received("x", "r", 2, "a1")
		}, want: `stored 2 times (seqs [1 2]): duplicated`},
		"sender per room": {build: func(c *checker.Checker) {
			c.Sent("alice", "r", "a1")
			c.Sent("alice", "q", "a2")
			c.Acked("r", 5, "a1")
			c.Acked("q", 1, "a2")
		}},
		"out of order": {build: func(c *checker.Checker) {
			c.Received("a", "r", 2, "2")
			c.Received("a", "r", 1, "1")
		}, want: "out of order"},
		"two orders": {build: func(c *checker.Checker) {
			c.Received("a", "r", 1, "x")
			c.Received("b", "r", 1, "y")
		}, want: "two orders"},
		"acked but different": {build: func(c *checker.Checker) {
			c.Acked("r", 1, "mine")
			c.Received("a", "r", 1, "other")
		}, want: "two orders"},
		"reset excuses gap": {build: func(c *checker.Checker) {
			c.Member("a", "r", 0, 3)
			c.Reset("a", "r")
			c.Received("a", "r", 3, "3")
		}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := checker.New()
			tt.build(c)
			err := c.Check()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected violation: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
