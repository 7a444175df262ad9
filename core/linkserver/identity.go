package linkserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"connectrpc.com/connect/v2"
	"github.com/corral-rt/corral/internal/safetext"
)

// Who an edge says it is on its Link stream: its id and version, for the
// core's Info (Link.Edge, Link.Version).

// What an edge says of itself on its Link stream (edge/identity.go sends
// the same header names).
const (
	edgeIDHeader  = "Corral-Edge-Id"
	versionHeader = "Corral-Version"
)

// edgeOf reads an edge's id and version from its Link call. A value that
// is not a short valid name is ignored: a link without an id gets a
// random one, listed as an edge of its own.
func edgeOf(ctx context.Context) (id, version string) {
	if info, ok := connect.CallInfoForServerContext(ctx); ok {
		id, version = info.RequestHeader().Get(edgeIDHeader), info.RequestHeader().Get(versionHeader)
	}
	if safetext.CheckName("edge id", id, 64) != nil {
		id = randomID()
	}
	if safetext.CheckName("version", version, 128) != nil {
		version = ""
	}
	return id, version
}

// randomID returns a random id for a link whose edge named none.
func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
