// Package peek waits for a connection's first byte without a buffer, so
// that a goroutine waiting on a silent client (a reconnect herd has
// thousands) borrows its read buffer only once there is something to
// read. WaitReadable may be called by one goroutine per connection, the
// connection's reader.
package peek
