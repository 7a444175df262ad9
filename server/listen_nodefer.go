//go:build !linux

package server

import "time"

// setDeferAccept does nothing off Linux: accept(2) returns a connection
// at its handshake, and the listener waits for the head on the network
// poller.
func setDeferAccept(uintptr, time.Duration) error { return nil }
