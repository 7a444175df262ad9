package core

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"connectrpc.com/connect/v2"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/buildinfo"
	"github.com/corral-rt/corral/internal/safetext"
	"github.com/corral-rt/corral/roompattern"
)

// What this core holds, as the internal API describes it: Rooms lists
// the rooms with members here, page by page; Info names this core (its
// node id and build) and the edges linked to it (the id and version each
// edge sends on its Link stream, edgeOf).

// Bounds of Rooms.
const (
	maxRoomsPage   = 1000
	maxRoomPattern = 256
)

// Rooms lists the rooms with members on this core, by name.
func (c *Core) Rooms(ctx context.Context, req *corralv1.RoomsRequest) (*corralv1.RoomsResponse, error) {
	pattern := req.GetPattern()
	if len(pattern) > maxRoomPattern {
		return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("core: pattern longer than %d bytes", maxRoomPattern))
	}
	if pattern != "" {
		if err := roompattern.Check(pattern); err != nil {
			return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("core: pattern: %w", err))
		}
	}
	after, err := decodePageToken(req.GetPageToken())
	if err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	limit := int(req.GetLimit())
	if limit <= 0 || limit > maxRoomsPage {
		limit = maxRoomsPage
	}
	type candidate struct {
		name string
		r    *room
	}
	var cands []candidate
	for _, r := range c.rooms.all() {
		if r.name > after && (pattern == "" || roompattern.Match([]string{pattern}, r.name)) {
			cands = append(cands, candidate{r.name, r})
		}
	}
	slices.SortFunc(cands, func(a, b candidate) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	res := &corralv1.RoomsResponse{}
	for _, cand := range cands {
		cand.r.mu.Lock()
		info := &corralv1.RoomInfo{Name: cand.name, Members: uint32(len(cand.r.members)), LastSeq: cand.r.last, Epoch: cand.r.epoch}
		cand.r.mu.Unlock()
		if info.Members == 0 {
			continue // publishes or joins in flight only
		}
		if len(res.Rooms) == limit {
			res.NextPageToken = encodePageToken(res.Rooms[limit-1].GetName())
			break
		}
		res.Rooms = append(res.Rooms, info)
	}
	if req.GetEveryCore() {
		return c.every.Rooms(ctx, req, res, limit), nil
	}
	return res, nil
}

// A page token is the last name of the previous page, opaque to callers.
func encodePageToken(name string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(name))
}

func decodePageToken(tok string) (string, error) {
	if tok == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) == 0 || len(b) > 1024 {
		return "", errors.New("core: page_token is not one this server returned")
	}
	return string(b), nil
}

// Info describes this core and the edges linked to it.
func (c *Core) Info(ctx context.Context, req *corralv1.InfoRequest) (*corralv1.InfoResponse, error) {
	now := time.Now()
	// Three snapshots, one table at a time: a link, session or room that
	// comes or goes meanwhile may be counted or not.
	links := c.links.all()
	sessions := c.attached.All()
	rooms := c.rooms.all()

	// An edge holds a few links to a core: one node per edge, its oldest
	// link first.
	slices.SortFunc(links, func(a, b *link) int { return a.started.Compare(b.started) })
	var edges []*corralv1.NodeInfo
	byEdge := make(map[string]*corralv1.NodeInfo)
	nodeOf := make(map[*link]*corralv1.NodeInfo, len(links))
	for _, l := range links {
		n := byEdge[l.edge]
		if n == nil {
			n = &corralv1.NodeInfo{Id: l.edge, Role: "edge", Version: l.version, UptimeMs: uint64(now.Sub(l.started).Milliseconds())}
			byEdge[l.edge] = n
			edges = append(edges, n)
		}
		nodeOf[l] = n
	}
	for _, s := range sessions {
		if ep, ok := s.endpoint(); ok {
			if n := nodeOf[ep.link]; n != nil {
				n.Connections++
			}
		}
	}
	active := uint32(0)
	for _, r := range rooms {
		in := make(map[*corralv1.NodeInfo]bool, 1)
		r.mu.Lock()
		if len(r.members) > 0 {
			active++
		}
		for l := range r.links {
			if n := nodeOf[l]; n != nil {
				in[n] = true
			}
		}
		r.mu.Unlock()
		for n := range in {
			n.Rooms++
		}
	}
	res := &corralv1.InfoResponse{Nodes: []*corralv1.NodeInfo{{
		Id:          c.id,
		Role:        "core",
		Version:     buildinfo.Version(),
		Connections: uint32(len(sessions)),
		Rooms:       active,
		UptimeMs:    uint64(now.Sub(c.started).Milliseconds()),
	}}}
	res.Nodes = append(res.Nodes, edges...)
	if req.GetEveryCore() {
		return c.every.Info(ctx, res), nil
	}
	return res, nil
}

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
