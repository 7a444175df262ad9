package delta_test

import (
	"fmt"

	"github.com/corral-rt/corral/delta"
)

// A member holding the previous value gets a delta when it is smaller,
// and rebuilds the new value from it.
func Example() {
	prev := []byte(`{"title":"Draft","body":"The quick brown fox jumps over the lazy dog."}`)
	next := []byte(`{"title":"Final","body":"The quick brown fox jumps over the lazy dog."}`)
	d, ok := delta.Choose(prev, next)
	fmt.Println(ok, len(d) < len(next))
	got, err := delta.Apply(prev, d, 1<<20)
	fmt.Println(string(got) == string(next), err)
	// Output:
	// true true
	// true <nil>
}
