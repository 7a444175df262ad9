package heldpool_test

import (
	"testing"

	"github.com/corral-rt/corral/internal/heldpool"
)

// TestCount: what is taken and not given back is counted, whatever the
// pool drops (under -race, a quarter of what is put back).
func TestCount(t *testing.T) {
	p := heldpool.New(func() *[8]byte { return new([8]byte) })
	held, stop := p.Count()
	defer stop()
	var out []*[8]byte
	for range 100 {
		out = append(out, p.Get())
	}
	for _, b := range out[:60] {
		p.Put(b)
	}
	for range 50 {
		p.Put(p.Get())
	}
	if n := held(); n != 40 {
		t.Fatalf("held %d, want 40", n)
	}
}
