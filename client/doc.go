// Package client is a Go client for corral's WebSocket protocol: dial,
// hello/welcome, join, publish with acknowledgement, signals, and the
// server's frames in order. Tests, the load generator and Go users share it.
//
// A Conn has one reader goroutine. Every server frame (batches flattened)
// arrives on Frames in the order the server sent it; Join and Publish also
// wait for their own answers. Drain Frames: a full channel stops the reader,
// which is the client's backpressure.
package client
