package state_test

import (
	"testing"

	"github.com/corral-rt/corral/state"
)

// FuzzParseChange: the change publications read from Redis pub/sub never
// panic the reader; what parses has a known kind.
func FuzzParseChange(f *testing.F) {
	for _, s := range []string{
		"\x001\ne\n0\n1\n0\nk\nv", "\x002\ne\n1\n3\n0\nk\n", "\x003\ne\n2\n1\n0\nk\n", "\x001\ne\n0\n1\n1700000000000\nk\na\nb",
		"", "\x00", "\n\n\n\n\n\n", "\x00x\ne\n0\n1\n0\nk\nv", "\x001\ne\n9\n1\n0\nk\nv", "\x0018446744073709551616\ne\n0\n1\n0\nk\nv",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, c, err := state.ParseChange(b)
		if err != nil {
			return
		}
		if c.Expired && !c.Deleted || c.Deleted && len(c.Value) > 0 {
			t.Fatalf("inconsistent change %+v", c)
		}
	})
}
