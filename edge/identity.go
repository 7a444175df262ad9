package edge

import (
	"crypto/rand"
	"encoding/hex"
)

// What an edge tells a core about itself when it opens a link, as
// request headers of the Link stream: an id, the same on every link of
// the edge, and its build's version. The core lists edges by them
// (RoomService.Info; core/info.go reads the same header names).
const (
	edgeIDHeader  = "Corral-Edge-Id"
	versionHeader = "Corral-Version"
)

// newEdgeID returns a random id for an edge's lifetime.
func newEdgeID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
