package grants_test

import (
	"context"
	"fmt"

	"github.com/corral-rt/corral/grants"
)

// A token grants "game:*"; at run time a service revokes "game:7" and
// grants "vip".
func ExampleAllows() {
	ctx := context.Background()
	s := grants.NewMemory()
	_ = s.Revoke(ctx, "ann", []string{"game:7"}, nil)
	_ = s.Grant(ctx, "ann", []string{"vip"}, nil)
	g, _ := s.Get(ctx, "ann")
	token := []string{"game:*"}
	for _, room := range []string{"game:1", "game:7", "vip", "other"} {
		fmt.Println(room, grants.Allows(g, grants.Join, token, room))
	}
	// Output:
	// game:1 true
	// game:7 false
	// vip true
	// other false
}
