package bench_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/corral-rt/corral/bench"
)

// A broadcast at W3's scale against a corral started with
//
//	corral serve --insecure-dev --internal-addr 127.0.0.1:8091
func ExampleBroadcast() {
	b := bench.NewBroadcast() // 15,000 sockets, 100 rooms, 200 publishes/s
	b.Ramp = []float64{400, 600, 800}
	res, err := b.Run(context.Background(), bench.Options{
		Target: bench.Target{
			WS:  "ws://127.0.0.1:8080/ws",
			API: "http://127.0.0.1:8091",
		},
		Progress: os.Stderr,
	})
	if err != nil {
		fmt.Println(err) // a refusal, a failure, or bench.ErrViolation
	}
	if res != nil {
		res.WriteText(os.Stdout)
	}
}

// The connection rate and memory per idle connection, with the server's
// pid for its /proc figures.
func ExampleConnect() {
	c := bench.NewConnect()
	c.Rate, c.Hold = 5000, 30*time.Second
	res, err := c.Run(context.Background(), bench.Options{
		Target: bench.Target{WS: "ws://127.0.0.1:8080/ws", PID: 12345},
	})
	if err == nil {
		fmt.Println(res.Headline)
	}
}
