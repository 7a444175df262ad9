// Package client is a Go client for corral's WebSocket protocol: dial,
// hello/welcome, join, publish with acknowledgement, signals, and the
// server's frames in order. Tests, the load generator and Go users share it.
//
// A Conn has one reader goroutine. Every server frame (batches flattened)
// arrives on Frames in the order the server sent it, or, with
// Options.OnFrame, is handed to a function on the reader goroutine; Join and
// Publish also wait for their own answers. Drain Frames (or return from
// OnFrame quickly): a full channel stops the reader, which is the client's
// backpressure.
//
// In short (the runnable Examples, which `go test` runs against an
// in-process corral, say the same in full):
//
//	c, err := client.Dial(ctx, "ws://127.0.0.1:8080/ws", client.Options{Token: "alice"})
//	j, err := c.Join(ctx, "lobby", 0, "")            // j.Seq: the room's last seq
//	p, err := c.Publish(ctx, "lobby", "m1", payload) // p.Seq: where it landed
//	for f := range c.Frames() { ... f.GetMessage() ... }
//
// To resume after a drop, dial again with Options.Resume: the Welcome's
// session id and resume token, and per room the last seq processed and
// its epoch; the server replays what was missed (ExampleOptions_resume).
// A Session (Connect) does all of that by itself: it reconnects, resumes,
// re-sends unacknowledged publishes and passes each message on once. Its
// publishes to a room enter the room in the order they were made, across
// refusals, retries and reconnects (an outbox per room, outbox.go;
// docs/GUARANTEES.md); PublishAsync keeps several on their way at once.
//
// A refusal settles only the request it refuses: an Error frame names the
// kind of client frame it refuses (Error.frame) with its room or ref, so
// a refused signal or presence query in a room is not the answer to a
// Join of that room still waiting, and a Session's join fails only on the
// join's own refusal. Every Error also arrives on Frames (a Session's
// Events), matched or not. From a server that names no frame, the ref,
// else the room, decides, as before (docs/SDKS.md).
//
// Growing messages and keyed room state (docs/SDKS.md): Conn.Append,
// Conn.SetState and Conn.DeleteState write; an Assembler rebuilds growing
// messages from the chunk messages received, and a State keeps a room's
// keys from its StateSnapshot and StateChange frames, each applying every
// version once and in order. Neither is safe for concurrent use: feed
// them from the goroutine that reads the frames. A resume from positions
// saved outside this process (Options.Resume), whose Assembler holds no
// bodies, sets RoomPosition.OpenPrefix: the messages open there come
// first, assembled.
//
// coder/websocket dials and writes. For ws:// URLs the Conn reads the
// server's frames from its TCP connection itself (cheaper per message: see
// wire.go); for wss:// it reads through coder/websocket.
package client
