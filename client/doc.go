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
// coder/websocket dials and writes. For ws:// URLs the Conn reads the
// server's frames from its TCP connection itself (cheaper per message: see
// wire.go); for wss:// it reads through coder/websocket.
package client
