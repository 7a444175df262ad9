package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Limit is the machine's bare-TCP ceiling at the moment of a run: Sockets
// loopback connections in Rooms rooms, a tiny fan-out server inside this
// process writing each message to every member of its room with one
// write(2) per member, and one reader goroutine per socket. No WebSocket,
// no encoding, no queue: what any server that writes each message on its
// own pays at least. Quote the other scenarios' deliveries/s as a share of
// it, measured in the same sitting.
type Limit struct {
	Sockets  int
	Rooms    int
	Size     int
	Duration time.Duration
}

// NewLimit returns the issue 19 figures: 9,000 sockets (both ends live in
// this process: 18,000 open files) in 100 rooms, 100-byte messages, 10 s.
func NewLimit() *Limit {
	return &Limit{Sockets: 9000, Rooms: 100, Size: 100, Duration: 10 * time.Second}
}

func (l *Limit) Name() string { return "limit" }

func (l *Limit) Describe() string {
	return `The bare-TCP ceiling: one write(2) per message per socket, no WebSocket.

--sockets loopback TCP connections in --rooms rooms; a fan-out server in this
process writes each --size-byte message to every member of a room (one
write per member, one writer goroutine per core, rooms in turn) as fast as
the readers (one goroutine per socket) take them, for --duration. Reports
messages delivered per second: the ceiling of a server that writes each
message on its own, on this machine, now. Run it in the same sitting as the
scenarios it is quoted beside; it needs no corral server (--url is unused).`
}

func (l *Limit) Flags(fs *flag.FlagSet) {
	fs.IntVar(&l.Sockets, "sockets", l.Sockets, "loopback TCP connections (each costs this process two open files)")
	fs.IntVar(&l.Rooms, "rooms", l.Rooms, "rooms the sockets are spread over (round-robin)")
	fs.IntVar(&l.Size, "size", l.Size, "message `bytes`")
	fs.DurationVar(&l.Duration, "duration", l.Duration, "how long to write")
}

// Run measures the ceiling. o.Target is not used.
func (l *Limit) Run(ctx context.Context, o Options) (*Result, error) {
	if l.Sockets <= 0 || l.Rooms <= 0 || l.Size <= 0 || l.Duration <= 0 {
		return nil, errors.New("bench: limit needs positive --sockets, --rooms, --size and --duration")
	}
	if l.Duration > 10*time.Minute {
		return nil, errors.New("bench: limit runs at most 10 minutes")
	}
	limit, err := raiseFileLimit()
	if err != nil {
		return nil, fmt.Errorf("bench: raise the open-file limit: %w", err)
	}
	if need := 2*l.Sockets + 256; limit > 0 && uint64(need) > limit {
		return nil, fmt.Errorf("bench: %d sockets need about %d open files but this process may hold %d", l.Sockets, need, limit)
	}
	start := time.Now()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()

	// Connect: the accepted ends are the server's, the dialed ends the
	// readers'.
	dial := sourceDial(sourceCount(o.Sources, l.Sockets))
	var servers, readers []net.Conn
	defer func() {
		for _, c := range append(servers, readers...) {
			c.Close()
		}
	}()
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for range l.Sockets {
		rc, err := dial(cctx, "tcp4", ln.Addr().String())
		if err != nil {
			return nil, fmt.Errorf("bench: limit: dial: %w", err)
		}
		readers = append(readers, rc)
		sc, err := ln.Accept()
		if err != nil {
			return nil, fmt.Errorf("bench: limit: accept: %w", err)
		}
		servers = append(servers, sc)
	}
	rooms := make([][]net.Conn, l.Rooms)
	for i, sc := range servers {
		rooms[i%l.Rooms] = append(rooms[i%l.Rooms], sc)
	}

	var got atomic.Uint64 // bytes read by every reader
	var rwg sync.WaitGroup
	for _, rc := range readers {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			buf := make([]byte, 4096)
			for {
				n, err := rc.Read(buf)
				got.Add(uint64(n))
				if err != nil {
					return
				}
			}
		}()
	}

	msg := make([]byte, l.Size)
	for i := range msg {
		msg[i] = 'x'
	}
	wctx, stop := context.WithTimeout(ctx, l.Duration)
	defer stop()
	var sent atomic.Uint64 // messages fanned out (each to a whole room)
	writers := max(1, runtime.GOMAXPROCS(0))
	var wwg sync.WaitGroup
	t0 := time.Now()
	b0 := got.Load()
	for w := range writers {
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			if w >= l.Rooms {
				return // more writers than rooms
			}
			for r := w; wctx.Err() == nil; r = (r + writers) % l.Rooms {
				for _, sc := range rooms[r] {
					if _, err := sc.Write(msg); err != nil {
						return
					}
				}
				sent.Add(1)
			}
		}()
	}
	wwg.Wait()
	elapsed := time.Since(t0)
	delivered := float64(got.Load()-b0) / float64(l.Size)
	for _, c := range servers {
		c.Close()
	}
	rwg.Wait()

	rate := delivered / elapsed.Seconds()
	res := &Result{
		Scenario: l.Name(), Started: start, Seconds: time.Since(start).Seconds(),
		Params: map[string]any{"sockets": l.Sockets, "rooms": l.Rooms, "size": l.Size, "duration": l.Duration.String()},
		Best:   0, Errors: ErrorCounts{},
		Steps: []Step{{
			Name: "as fast as the readers take them", Unit: "msgs/s", Seconds: elapsed.Seconds(),
			Achieved: rate, DeliveriesPerSec: rate, OK: true,
		}},
	}
	res.Headline = fmt.Sprintf("bare-TCP ceiling: %.0f msgs/s (%d-byte writes, one per message per socket; %d sockets in %d rooms; %d fan-outs)",
		rate, l.Size, l.Sockets, l.Rooms, sent.Load())
	return res, nil
}
