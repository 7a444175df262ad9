package roompattern_test

import (
	"fmt"

	"github.com/corral-rt/corral/roompattern"
)

func ExampleMatch() {
	patterns := []string{"game:*", "org:*:chat"}
	fmt.Println(roompattern.Match(patterns, "game:42"))
	fmt.Println(roompattern.Match(patterns, "org:acme:chat"))
	fmt.Println(roompattern.Match(patterns, "lobby"))
	// Output:
	// true
	// true
	// false
}
