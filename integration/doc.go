// Package integration holds corral's tests across processes and listeners:
// real WebSocket clients against corral started in one process and split
// into an edge and a core over h2c.
package integration
