package linkserver_test

import (
	"fmt"

	"github.com/corral-rt/corral/core/frame"
	"github.com/corral-rt/corral/core/linkserver"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// A room's fan-out: one frame, sized once, queued on each link with
// members; the links' senders (here, unserved links: the example takes
// what was queued) send it to their edges.
func ExampleEnqueueEach() {
	a, b := linkserver.Unserved(linkserver.Options{}), linkserver.Unserved(linkserver.Options{})
	members := map[*linkserver.Link]int{a: 3, b: 1} // members per link
	f := frame.Live("chat", 1, "epoch", &corralv1.ServerFrame{})
	linkserver.EnqueueEach(members, f)
	for _, l := range []*linkserver.Link{a, b} {
		n, _, _ := l.Backlog()
		fmt.Println(n, len(l.Take(10, 1<<20)))
	}
	// Output:
	// 1 1
	// 1 1
}
