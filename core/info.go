package core

import (
	"crypto/rand"
	"encoding/hex"
)

// Who is who in Info (core/api): this core's random node id (each edge's
// id and version, as it sends them on its Link stream, are the link
// server's: linkserver.Link.Edge).

// newNodeID returns a random id for Info.
func newNodeID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
