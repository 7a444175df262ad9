package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"connectrpc.com/connect/v2"
	"github.com/corral-rt/corral/internal/safetext"
)

// Who is who in Info (core/api): this core's random node id, and each
// edge's id and version as it sends them on its Link stream (edgeOf).

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
		id = newNodeID()
	}
	if safetext.CheckName("version", version, 128) != nil {
		version = ""
	}
	return id, version
}

// newNodeID returns a random id for Info.
func newNodeID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
