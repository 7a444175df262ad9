package hooks_test

import (
	"fmt"

	"github.com/corral-rt/corral/config"
	"github.com/corral-rt/corral/hooks"
	"github.com/corral-rt/corral/roomclass"
)

// A policy sends the joins of game rooms and the publishes of chat rooms
// to the backend; a failed backend still lets resumed game rooms in.
func ExamplePolicy_For() {
	p := &hooks.Policy{Join: []string{"game:*"}, Publish: []string{"chat:*"}, HookPolicy: config.HookPolicy{JoinPolicy: roomclass.AllowKnown}}
	for _, room := range []string{"game:42", "chat:lobby", "news"} {
		fmt.Printf("%s %+v\n", room, p.For(room))
	}
	// Output:
	// game:42 {Join:true Publish:false}
	// chat:lobby {Join:false Publish:true}
	// news {Join:false Publish:false}
}

// New makes the client corral uses; it connects on the first call.
func ExampleNew() {
	c, err := hooks.New(hooks.Config{
		Hooks:  config.Hooks{URL: "http://127.0.0.1:9000"}, // h2c
		Policy: hooks.Policy{HookPolicy: config.HookPolicy{Connect: true}, Join: []string{"team:*"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	fmt.Println(c.Policy().For("team:blue").Join)
	// Output: true
}
