package core

import (
	"cmp"
	"context"
	"slices"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"google.golang.org/protobuf/proto"
)

// The internal API's views of every core (every_core on Info, Rooms,
// Members, Connections and Signals, and Disconnect's action): the core that takes the call asks the others through the
// control bus (controlbus.Redis.Ask), each answers from its own tables
// with the same method, and the asker merges. A core that does not answer
// within askWait is counted missing, never waited for longer.

// ControlAsker is a control bus that also carries queries between cores
// (controlbus.Redis implements it). Without one a core answers for
// itself.
type ControlAsker interface {
	// Ask sends query to every other core and returns the answers that
	// came before ctx ended, and how many cores heard it.
	Ask(ctx context.Context, query []byte) (answers [][]byte, asked int, err error)
	// Answer sets the function that answers other cores' queries.
	Answer(fn func(ctx context.Context, query []byte) []byte)
}

// askWait bounds how long a call with every_core waits for the others.
const askWait = 2 * time.Second

// Query kinds: the first byte of a query, the request's bytes after it.
const (
	queryInfo        = 'i'
	queryRooms       = 'r'
	queryConnections = 'c'
	queryDisconnect  = 'd'
	querySignals     = 's'
	queryMembers     = 'm'
)

// NodeQueryKind is the first byte of a question for the process around
// each core rather than for the core (Config.NodeQuery, AskNodes).
const NodeQueryKind = 'N'

// asker returns the control bus as a ControlAsker, nil when it is none.
func (c *Core) asker() ControlAsker {
	a, _ := c.cfg.Control.(ControlAsker)
	return a
}

// answerQuery answers another core's query from this core's tables; nil
// for a query it does not know.
func (c *Core) answerQuery(ctx context.Context, q []byte) []byte {
	if len(q) == 0 {
		return nil
	}
	var res proto.Message
	var err error
	switch q[0] {
	case queryInfo:
		res, err = c.Info(ctx, &corralv1.InfoRequest{})
	case queryRooms:
		req := &corralv1.RoomsRequest{}
		if err = proto.Unmarshal(q[1:], req); err == nil {
			req.EveryCore = false
			res, err = c.Rooms(ctx, req)
		}
	case queryConnections:
		req := &corralv1.ConnectionsRequest{}
		if err = proto.Unmarshal(q[1:], req); err == nil {
			req.EveryCore = false
			res, err = c.Connections(ctx, req)
		}
	case NodeQueryKind:
		if c.cfg.NodeQuery == nil {
			return nil
		}
		return c.cfg.NodeQuery(ctx, q)
	case queryMembers:
		req := &corralv1.MembersRequest{}
		if err = proto.Unmarshal(q[1:], req); err == nil {
			req.EveryCore = false
			res, err = c.Members(ctx, req)
		}
	case querySignals:
		req := &corralv1.SignalsRequest{}
		if err = proto.Unmarshal(q[1:], req); err == nil {
			req.EveryCore = false
			res, err = c.Signals(ctx, req)
		}
	case queryDisconnect:
		// An action, asked as a query so that its result comes back:
		// checked again here by Disconnect itself.
		req := &corralv1.DisconnectRequest{}
		if err = proto.Unmarshal(q[1:], req); err == nil {
			req.EveryCore = false
			res, err = c.Disconnect(ctx, req)
		}
	default:
		return nil
	}
	if err != nil {
		return nil
	}
	b, _ := proto.Marshal(res)
	return b
}

// askOthers asks the other cores req's question and decodes each answer
// with decode; it returns how many answered and how many did not.
func (c *Core) askOthers(ctx context.Context, kind byte, req proto.Message, decode func([]byte) error) (answered, missing uint32) {
	a := c.asker()
	if a == nil {
		return 0, 0
	}
	q, err := proto.Marshal(req)
	if err != nil {
		return 0, 0
	}
	ctx, cancel := context.WithTimeout(ctx, askWait)
	defer cancel()
	answers, asked, err := a.Ask(ctx, append([]byte{kind}, q...))
	if err != nil {
		c.cfg.Logger.Warn("asking the other cores failed; answering for this core only", "err", err)
		return 0, 0
	}
	for _, b := range answers {
		if len(b) > 0 && decode(b) == nil {
			answered++
		}
	}
	if asked > int(answered) {
		missing = uint32(asked) - answered
	}
	return answered, missing
}

// infoEveryCore is Info with the other cores' nodes: each core after
// this one, then the edges, each listed once with its counts summed.
func (c *Core) infoEveryCore(ctx context.Context, own *corralv1.InfoResponse) *corralv1.InfoResponse {
	cores := own.GetNodes()[:1]
	edges := slices.Clone(own.GetNodes()[1:])
	byEdge := make(map[string]*corralv1.NodeInfo, len(edges))
	for _, e := range edges {
		byEdge[e.GetId()] = e
	}
	answered, missing := c.askOthers(ctx, queryInfo, &corralv1.InfoRequest{}, func(b []byte) error {
		res := &corralv1.InfoResponse{}
		if err := proto.Unmarshal(b, res); err != nil {
			return err
		}
		for _, n := range res.GetNodes() {
			if n.GetRole() == "core" {
				cores = append(cores, n)
				continue
			}
			if e := byEdge[n.GetId()]; e != nil {
				e.Connections += n.GetConnections()
				e.Rooms += n.GetRooms()
				e.UptimeMs = max(e.GetUptimeMs(), n.GetUptimeMs())
				continue
			}
			byEdge[n.GetId()] = n
			edges = append(edges, n)
		}
		return nil
	})
	slices.SortStableFunc(cores[1:], func(a, b *corralv1.NodeInfo) int { return cmp.Compare(a.GetId(), b.GetId()) })
	return &corralv1.InfoResponse{Nodes: append(cores, edges...), CoresAnswered: answered + 1, CoresMissing: missing}
}

// roomsEveryCore is Rooms over every core: each core's first page after
// the same token, merged by name (members summed, the highest last seq);
// the union's first limit names are the page, since each of them is
// within its own core's first limit.
func (c *Core) roomsEveryCore(ctx context.Context, req *corralv1.RoomsRequest, own *corralv1.RoomsResponse, limit int) *corralv1.RoomsResponse {
	byName := make(map[string]*corralv1.RoomInfo, len(own.GetRooms()))
	for _, r := range own.GetRooms() {
		byName[r.GetName()] = r
	}
	more := own.GetNextPageToken() != ""
	q := proto.CloneOf(req)
	q.EveryCore = false
	answered, missing := c.askOthers(ctx, queryRooms, q, func(b []byte) error {
		res := &corralv1.RoomsResponse{}
		if err := proto.Unmarshal(b, res); err != nil {
			return err
		}
		more = more || res.GetNextPageToken() != ""
		for _, r := range res.GetRooms() {
			m := byName[r.GetName()]
			if m == nil {
				byName[r.GetName()] = r
				continue
			}
			m.Members += r.GetMembers()
			if r.GetLastSeq() > m.GetLastSeq() {
				m.LastSeq, m.Epoch = r.GetLastSeq(), r.GetEpoch()
			}
		}
		return nil
	})
	rooms := make([]*corralv1.RoomInfo, 0, len(byName))
	for _, r := range byName {
		rooms = append(rooms, r)
	}
	slices.SortFunc(rooms, func(a, b *corralv1.RoomInfo) int { return cmp.Compare(a.GetName(), b.GetName()) })
	res := &corralv1.RoomsResponse{CoresAnswered: answered + 1, CoresMissing: missing}
	if len(rooms) > limit {
		rooms, more = rooms[:limit], true
	}
	res.Rooms = rooms
	if more && len(rooms) > 0 {
		res.NextPageToken = encodePageToken(rooms[len(rooms)-1].GetName())
	}
	return res
}

// connectionsEveryCore is Connections over every core, merged by session
// id as roomsEveryCore merges rooms by name.
func (c *Core) connectionsEveryCore(ctx context.Context, req *corralv1.ConnectionsRequest, own *corralv1.ConnectionsResponse, limit int) *corralv1.ConnectionsResponse {
	conns := slices.Clone(own.GetConnections())
	more := own.GetNextPageToken() != ""
	q := proto.CloneOf(req)
	q.EveryCore = false
	answered, missing := c.askOthers(ctx, queryConnections, q, func(b []byte) error {
		res := &corralv1.ConnectionsResponse{}
		if err := proto.Unmarshal(b, res); err != nil {
			return err
		}
		more = more || res.GetNextPageToken() != ""
		conns = append(conns, res.GetConnections()...)
		return nil
	})
	slices.SortFunc(conns, func(a, b *corralv1.ConnectionInfo) int { return cmp.Compare(a.GetSessionId(), b.GetSessionId()) })
	// A session is attached to one core; one that moved meanwhile may
	// show twice: keep the first.
	conns = slices.CompactFunc(conns, func(a, b *corralv1.ConnectionInfo) bool { return a.GetSessionId() == b.GetSessionId() })
	res := &corralv1.ConnectionsResponse{CoresAnswered: answered + 1, CoresMissing: missing}
	if len(conns) > limit {
		conns, more = conns[:limit], true
	}
	res.Connections = conns
	if more && len(conns) > 0 {
		res.NextPageToken = encodePageToken(conns[len(conns)-1].GetSessionId())
	}
	return res
}

// disconnectEveryCore is Disconnect on every core: the sessions each
// closed, in order.
func (c *Core) disconnectEveryCore(ctx context.Context, req *corralv1.DisconnectRequest, own *corralv1.DisconnectResponse) *corralv1.DisconnectResponse {
	ids := slices.Clone(own.GetSessionIds())
	q := proto.CloneOf(req)
	q.EveryCore = false
	answered, missing := c.askOthers(ctx, queryDisconnect, q, func(b []byte) error {
		res := &corralv1.DisconnectResponse{}
		if err := proto.Unmarshal(b, res); err != nil {
			return err
		}
		ids = append(ids, res.GetSessionIds()...)
		return nil
	})
	slices.Sort(ids)
	return &corralv1.DisconnectResponse{SessionIds: slices.Compact(ids), CoresAnswered: answered + 1, CoresMissing: missing}
}

// membersEveryCore is Members over every core: each user once, with its
// sessions and connections on every core; the presence, shared by every
// core, is this core's read.
func (c *Core) membersEveryCore(ctx context.Context, req *corralv1.MembersRequest) (*corralv1.MembersResponse, error) {
	q := proto.CloneOf(req)
	q.EveryCore = false
	own, err := c.Members(ctx, q)
	if err != nil {
		return nil, err
	}
	byUser := make(map[string]*corralv1.Member, len(own.GetMembers()))
	for _, m := range own.GetMembers() {
		byUser[m.GetUserId()] = m
	}
	answered, missing := c.askOthers(ctx, queryMembers, q, func(b []byte) error {
		res := &corralv1.MembersResponse{}
		if err := proto.Unmarshal(b, res); err != nil {
			return err
		}
		for _, m := range res.GetMembers() {
			if len(byUser) > c.apiCfg.MaxMembers {
				break // refused below; stop growing
			}
			if have := byUser[m.GetUserId()]; have != nil {
				have.SessionIds = append(have.SessionIds, m.GetSessionIds()...)
				have.Connections += m.GetConnections()
				continue
			}
			byUser[m.GetUserId()] = m
		}
		return nil
	})
	if len(byUser) > c.apiCfg.MaxMembers {
		return nil, tooManyMembers(c.apiCfg.MaxMembers)
	}
	res := &corralv1.MembersResponse{Presence: own.GetPresence(), CoresAnswered: answered + 1, CoresMissing: missing}
	for _, m := range byUser {
		slices.Sort(m.SessionIds)
		m.SessionIds = slices.Compact(m.SessionIds)
		res.Members = append(res.Members, m)
		res.Connections += m.GetConnections()
	}
	slices.SortFunc(res.Members, func(a, b *corralv1.Member) int { return cmp.Compare(a.GetUserId(), b.GetUserId()) })
	return res, nil
}

// AskNodes asks the process around every other core sharing the store
// (their Config.NodeQuery) the question q, which begins with
// NodeQueryKind, and returns their answers and how many heard it. It
// waits askWait at most. Without a control bus that carries questions,
// there is no other core: nothing, 0.
func (c *Core) AskNodes(ctx context.Context, q []byte) (answers [][]byte, asked int) {
	a := c.asker()
	if a == nil || len(q) == 0 || q[0] != NodeQueryKind {
		return nil, 0
	}
	ctx, cancel := context.WithTimeout(ctx, askWait)
	defer cancel()
	answers, asked, err := a.Ask(ctx, q)
	if err != nil {
		c.cfg.Logger.Warn("asking the other cores failed; answering for this core only", "err", err)
		return nil, 0
	}
	return answers, asked
}
