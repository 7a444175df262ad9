// Package everycore is the internal API's view of every core sharing the
// stores (every_core on Info, Rooms, Members, Connections and Signals,
// and Disconnect's action): the core that takes the call asks the others
// through the control bus (controlbus.Redis.Ask), each answers from its
// own tables with the same method ([Cores.Answer]), and the asker merges.
// A core that does not answer within askWait is counted missing, never
// waited for longer.
//
// It knows its own core only through [Local], the core's answers from its
// own tables, so it cannot reach into the core's rooms or sessions.
//
// # Concurrency
//
// A [Cores] holds no state of its own after New: its methods are safe for
// concurrent use, as safe as its Local's and Asker's.
package everycore

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"google.golang.org/protobuf/proto"
)

// Asker is a control bus that also carries queries between cores
// (controlbus.Redis implements it).
type Asker interface {
	// Ask sends query to every other core and returns the answers that
	// came before ctx ended, and how many cores heard it.
	Ask(ctx context.Context, query []byte) (answers [][]byte, asked int, err error)
	// Answer sets the function that answers other cores' queries.
	Answer(fn func(ctx context.Context, query []byte) []byte)
}

// Local is one core's answers from its own tables: the RoomService
// methods, called with every_core false.
type Local interface {
	Info(context.Context, *corralv1.InfoRequest) (*corralv1.InfoResponse, error)
	Rooms(context.Context, *corralv1.RoomsRequest) (*corralv1.RoomsResponse, error)
	Connections(context.Context, *corralv1.ConnectionsRequest) (*corralv1.ConnectionsResponse, error)
	Members(context.Context, *corralv1.MembersRequest) (*corralv1.MembersResponse, error)
	Signals(context.Context, *corralv1.SignalsRequest) (*corralv1.SignalsResponse, error)
	Disconnect(context.Context, *corralv1.DisconnectRequest) (*corralv1.DisconnectResponse, error)
}

// ErrTooManyMembers: the cores' members together pass Options.MaxMembers.
var ErrTooManyMembers = errors.New("everycore: more members than one Members call lists")

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
// each core rather than for the core (Options.NodeQuery, AskNodes).
const NodeQueryKind = 'N'

// Options are what Cores needs of its core.
type Options struct {
	// Asker carries the queries; nil: there is no other core, and every
	// merge is this core's answer alone.
	Asker Asker
	// Local answers for this core.
	Local Local
	// NodeQuery answers the other cores' questions for the process around
	// the core; nil: not answered.
	NodeQuery func(ctx context.Context, query []byte) []byte
	// MaxMembers bounds the members a merged Members lists.
	MaxMembers int
	// PageToken encodes the last name of a page as the next page's token.
	PageToken func(last string) string
	Logger    *slog.Logger
}

// Cores asks the other cores and merges their answers with this core's.
type Cores struct {
	o Options
}

// New returns the every-core view of o.Local. It does not register
// Answer with o.Asker: the caller does, once the core can answer.
func New(o Options) *Cores {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Cores{o: o}
}

// Answer answers another core's query from this core's tables; nil for a
// query it does not know or cannot decode.
func (c *Cores) Answer(ctx context.Context, q []byte) []byte {
	if len(q) == 0 {
		return nil
	}
	l := c.o.Local
	var res proto.Message
	var err error
	switch q[0] {
	case queryInfo:
		res, err = l.Info(ctx, &corralv1.InfoRequest{})
	case queryRooms:
		req := &corralv1.RoomsRequest{}
		if err = proto.Unmarshal(q[1:], req); err == nil {
			req.EveryCore = false
			res, err = l.Rooms(ctx, req)
		}
	case queryConnections:
		req := &corralv1.ConnectionsRequest{}
		if err = proto.Unmarshal(q[1:], req); err == nil {
			req.EveryCore = false
			res, err = l.Connections(ctx, req)
		}
	case NodeQueryKind:
		if c.o.NodeQuery == nil {
			return nil
		}
		return c.o.NodeQuery(ctx, q)
	case queryMembers:
		req := &corralv1.MembersRequest{}
		if err = proto.Unmarshal(q[1:], req); err == nil {
			req.EveryCore = false
			res, err = l.Members(ctx, req)
		}
	case querySignals:
		req := &corralv1.SignalsRequest{}
		if err = proto.Unmarshal(q[1:], req); err == nil {
			req.EveryCore = false
			res, err = l.Signals(ctx, req)
		}
	case queryDisconnect:
		// An action, asked as a query so that its result comes back:
		// checked again here by Disconnect itself.
		req := &corralv1.DisconnectRequest{}
		if err = proto.Unmarshal(q[1:], req); err == nil {
			req.EveryCore = false
			res, err = l.Disconnect(ctx, req)
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

// ask asks the other cores req's question and decodes each answer with
// decode; it returns how many answered and how many did not.
func (c *Cores) ask(ctx context.Context, kind byte, req proto.Message, decode func([]byte) error) (answered, missing uint32) {
	a := c.o.Asker
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
		c.o.Logger.Warn("asking the other cores failed; answering for this core only", "err", err)
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

// Info is this core's Info, own, with the other cores' nodes: each core
// after this one, then the edges, each listed once with its counts
// summed.
func (c *Cores) Info(ctx context.Context, own *corralv1.InfoResponse) *corralv1.InfoResponse {
	cores := own.GetNodes()[:1]
	edges := slices.Clone(own.GetNodes()[1:])
	byEdge := make(map[string]*corralv1.NodeInfo, len(edges))
	for _, e := range edges {
		byEdge[e.GetId()] = e
	}
	answered, missing := c.ask(ctx, queryInfo, &corralv1.InfoRequest{}, func(b []byte) error {
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

// Rooms is Rooms over every core: each core's first page after the same
// token (own is this core's), merged by name (members summed, the highest
// last seq); the union's first limit names are the page, since each of
// them is within its own core's first limit.
func (c *Cores) Rooms(ctx context.Context, req *corralv1.RoomsRequest, own *corralv1.RoomsResponse, limit int) *corralv1.RoomsResponse {
	byName := make(map[string]*corralv1.RoomInfo, len(own.GetRooms()))
	for _, r := range own.GetRooms() {
		byName[r.GetName()] = r
	}
	more := own.GetNextPageToken() != ""
	q := proto.CloneOf(req)
	q.EveryCore = false
	answered, missing := c.ask(ctx, queryRooms, q, func(b []byte) error {
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
		res.NextPageToken = c.o.PageToken(rooms[len(rooms)-1].GetName())
	}
	return res
}

// Connections is Connections over every core, merged by session id as
// Rooms merges rooms by name.
func (c *Cores) Connections(ctx context.Context, req *corralv1.ConnectionsRequest, own *corralv1.ConnectionsResponse, limit int) *corralv1.ConnectionsResponse {
	conns := slices.Clone(own.GetConnections())
	more := own.GetNextPageToken() != ""
	q := proto.CloneOf(req)
	q.EveryCore = false
	answered, missing := c.ask(ctx, queryConnections, q, func(b []byte) error {
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
		res.NextPageToken = c.o.PageToken(conns[len(conns)-1].GetSessionId())
	}
	return res
}

// Disconnect is Disconnect on every core: the sessions each closed, in
// order.
func (c *Cores) Disconnect(ctx context.Context, req *corralv1.DisconnectRequest, own *corralv1.DisconnectResponse) *corralv1.DisconnectResponse {
	ids := slices.Clone(own.GetSessionIds())
	q := proto.CloneOf(req)
	q.EveryCore = false
	answered, missing := c.ask(ctx, queryDisconnect, q, func(b []byte) error {
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

// Members is Members over every core: each user once, with its sessions
// and connections on every core; the presence, shared by every core, is
// this core's read. Past Options.MaxMembers users it fails with
// ErrTooManyMembers.
func (c *Cores) Members(ctx context.Context, req *corralv1.MembersRequest) (*corralv1.MembersResponse, error) {
	q := proto.CloneOf(req)
	q.EveryCore = false
	own, err := c.o.Local.Members(ctx, q)
	if err != nil {
		return nil, err
	}
	byUser := make(map[string]*corralv1.Member, len(own.GetMembers()))
	for _, m := range own.GetMembers() {
		byUser[m.GetUserId()] = m
	}
	answered, missing := c.ask(ctx, queryMembers, q, func(b []byte) error {
		res := &corralv1.MembersResponse{}
		if err := proto.Unmarshal(b, res); err != nil {
			return err
		}
		for _, m := range res.GetMembers() {
			if len(byUser) > c.o.MaxMembers {
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
	if len(byUser) > c.o.MaxMembers {
		return nil, ErrTooManyMembers
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

// Signals asks the other cores req's question and returns their signals
// (unsorted, one key may repeat), whether any had more, and how many
// answered (this core not counted) and did not.
func (c *Cores) Signals(ctx context.Context, req *corralv1.SignalsRequest) (sigs []*corralv1.SignalEvent, more bool, answered, missing uint32) {
	q := proto.CloneOf(req)
	q.EveryCore = false
	answered, missing = c.ask(ctx, querySignals, q, func(b []byte) error {
		other := &corralv1.SignalsResponse{}
		if err := proto.Unmarshal(b, other); err != nil {
			return err
		}
		more = more || other.GetMore()
		sigs = append(sigs, other.GetSignals()...)
		return nil
	})
	return sigs, more, answered, missing
}

// AskNodes asks the process around every other core sharing the store
// (their Options.NodeQuery) the question q, which begins with
// NodeQueryKind, and returns their answers and how many heard it. It
// waits askWait at most. Without an Asker there is no other core:
// nothing, 0.
func (c *Cores) AskNodes(ctx context.Context, q []byte) (answers [][]byte, asked int) {
	a := c.o.Asker
	if a == nil || len(q) == 0 || q[0] != NodeQueryKind {
		return nil, 0
	}
	ctx, cancel := context.WithTimeout(ctx, askWait)
	defer cancel()
	answers, asked, err := a.Ask(ctx, q)
	if err != nil {
		c.o.Logger.Warn("asking the other cores failed; answering for this core only", "err", err)
		return nil, 0
	}
	return answers, asked
}
