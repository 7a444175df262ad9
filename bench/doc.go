// Package bench drives corral with the reference workloads and reports what
// users feel.
//
// Each [Scenario] is one of the reference workloads (W1-W4) with a flag for
// every parameter and defaults from the seed that described it:
//
//	broadcast   W3: N sockets over R rooms, server-side publishes through
//	            the internal Connect API at a rate (or a --ramp of rates)
//	connect     W3's connection load: new connections per second, then N
//	            idle connections and the server's memory per connection
//	chat-burst  W4: publishes from WebSocket clients ramping up to a
//	            target rate; acknowledgement latency and errors by kind
//	busy-room   issue 19's busy room: chat-burst with 1 room x 200
//	            members, 20 senders x 20 Hz
//	limit       the bare-TCP ceiling: one write per message per socket,
//	            no WebSocket, to quote the others as a share of
//
// Every scenario connects through package client (the Go client users
// get; [Options.Client] picks its frame reader or, with ClientStandard,
// coder/websocket's Conn.Read as most users' clients read), checks delivery with package checker (order, gaps, duplicates,
// acknowledged-but-missing) and returns an error wrapping [ErrViolation]
// when anything was lost. Latency is measured from the time a publish was
// scheduled (carried in the payload as {"t":<unix nanos>,...}) to the time a
// member read it, so a generator or server that falls behind shows up as
// latency rather than as a quietly lower rate.
//
// A [Result] prints as a table ([Result.WriteText]), marshals as a JSON
// record, and renders as a self-contained HTML page with a latency
// histogram and a per-second timeline ([Result.WriteHTML]).
//
// The generator is a good citizen: every loop is bounded in time and count,
// it targets loopback unless [Target.AllowRemote] is set, raises its own
// open-file limit, and spreads its connections over several loopback
// source addresses when one would run out of ephemeral ports.
package bench
