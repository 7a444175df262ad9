package core

import (
	"context"
	"errors"
	"fmt"
	"github.com/corral-rt/corral/core/eventlog"
	"github.com/corral-rt/corral/core/everycore"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connectproto"
	"github.com/corral-rt/corral/events"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
	"github.com/corral-rt/corral/grants"
	"github.com/corral-rt/corral/history"
	"github.com/corral-rt/corral/internal/safetext"
	"github.com/corral-rt/corral/protocol"
	"google.golang.org/protobuf/proto"
)

// The internal API (RoomService minus Link, which is link.go): thin RPC
// methods that validate a request, call the concept that does the work,
// and convert errors at the boundary (errors.go).

// Publish appends a message to a room as an internal service and fans it
// out to the room's members.
func (c *Core) Publish(ctx context.Context, req *corralv1.PublishRequest) (*corralv1.PublishResponse, error) {
	if err := c.door.ValidRoom(req.GetRoom()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	if err := c.validPublish(req.GetRoom(), req.GetPayload(), req.GetIdempotencyKey(), req.GetSender()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	order, err := apiSender(req)
	if err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	if reason, retry, over := c.overloaded(); over {
		return nil, c.refuseOverloaded(reason, retry)
	}
	res, err := c.apiPublish(ctx, req.GetRoom(), req.GetPayload(), req.GetIdempotencyKey(), req.GetSender(), order)
	if err != nil {
		return nil, c.rpcError(err)
	}
	return &corralv1.PublishResponse{Seq: res.Seq, Epoch: res.Epoch, Duplicate: res.Duplicate}, nil
}

// validPublish checks the parts of an API publish that are not the
// room's name: the payload is bounded by the room's class (max-payload),
// as a client's is, so that every message of a room fits the bound its
// members were promised.
func (c *Core) validPublish(room string, payload []byte, key, sender string) error {
	switch {
	case len(payload) > c.class(room).MaxPayload:
		return errors.New("core: payload exceeds the room's limit (its class's max-payload)")
	case len(key) > 256:
		return errors.New("core: idempotency key longer than 256 bytes")
	case len(sender) > 256:
		return errors.New("core: sender longer than 256 bytes")
	case sender != "":
		// Clients show the sender as a user id: the same rule.
		if err := safetext.CheckName("sender", sender, 256); err != nil {
			return fmt.Errorf("core: %w", err)
		}
	}
	return nil
}

// apiSender is an API publish's place in its stream's sequence
// (PublishRequest.seq and stream), the zero Sender for none. Its stream
// is apart from the client sessions' (prefix "api:"), as its dedupe keys
// are.
func apiSender(req *corralv1.PublishRequest) (history.Sender, error) {
	if req.GetSeq() == 0 {
		return history.Sender{}, nil
	}
	stream := req.GetStream()
	if stream == "" {
		stream = req.GetSender()
	}
	switch {
	case req.GetIdempotencyKey() == "":
		// Without a key a retry of a stored publish could not be told
		// from a sequence that starts again, and would be stored twice.
		return history.Sender{}, errors.New("core: a publish with seq needs an idempotency key")
	case stream == "":
		return history.Sender{}, errors.New("core: a publish with seq needs a stream (or a sender) naming its sequence")
	case len(stream) > 256:
		return history.Sender{}, errors.New("core: stream longer than 256 bytes")
	}
	return history.Sender{Stream: "api:" + stream, Seq: req.GetSeq()}, nil
}

// apiPublish publishes one message of an internal service to a valid
// room, at its place in its stream's order when order is not zero.
func (c *Core) apiPublish(ctx context.Context, room string, payload []byte, key, sender string, order history.Sender) (history.AppendResult, error) {
	r, err := c.acquireRoom(ctx, room, false)
	if err != nil {
		return history.AppendResult{}, err
	}
	defer c.releaseRoom(r)
	msg := &corralv1.Message{
		Room:    room,
		Sender:  sender,
		Payload: payload,
		TimeMs:  time.Now().UnixMilli(),
	}
	dedupe := ""
	if key != "" {
		dedupe = "api:" + key
	}
	return r.publish(ctx, msg, dedupe, order)
}

// Broadcast publishes one payload to many rooms, a bounded number at a
// time. Every room is checked first: one invalid room fails the call and
// nothing is published. After that, each room succeeds or fails on its
// own, and its result says which.
func (c *Core) Broadcast(ctx context.Context, req *corralv1.BroadcastRequest) (*corralv1.BroadcastResponse, error) {
	rooms := req.GetRooms()
	switch {
	case len(rooms) == 0:
		return nil, connectErr(connect.CodeInvalidArgument, errors.New("core: no rooms"))
	case len(rooms) > c.apiCfg.MaxBroadcastRooms:
		return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("core: more than %d rooms", c.apiCfg.MaxBroadcastRooms))
	}
	seen := make(map[string]struct{}, len(rooms))
	for _, room := range rooms {
		if err := c.door.ValidRoom(room); err != nil {
			return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("room %s: %w", safetext.Quote(room), err))
		}
		if err := c.validPublish(room, req.GetPayload(), req.GetIdempotencyKey(), req.GetSender()); err != nil {
			return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("room %s: %w", safetext.Quote(room), err))
		}
		if _, dup := seen[room]; dup {
			return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("core: room %s appears twice", safetext.Quote(room)))
		}
		seen[room] = struct{}{}
	}

	if reason, retry, over := c.overloaded(); over {
		return nil, c.refuseOverloaded(reason, retry)
	}

	results := make([]*corralv1.BroadcastResult, len(rooms))
	var next atomic.Int64
	// stopped is the refusal of the first room found backed up midway:
	// every room left gets it, to be retried with the same key (checked
	// and encoded once, not once per room left).
	var stopped atomic.Pointer[connect.Error]
	var wg sync.WaitGroup
	for range min(len(rooms), c.apiCfg.BroadcastConcurrency) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(rooms) {
					return
				}
				out := &corralv1.BroadcastResult{Room: rooms[i]}
				ce := stopped.Load()
				if ce == nil {
					if reason, retry, over := c.overloaded(); over {
						stopped.CompareAndSwap(nil, c.refuseOverloaded(reason, retry))
						ce = stopped.Load()
					}
				}
				if ce != nil {
					out.ErrorCode, out.ErrorMessage = ce.Code().String(), ce.Message()
					results[i] = out
					continue
				}
				res, err := c.apiPublish(ctx, rooms[i], req.GetPayload(), req.GetIdempotencyKey(), req.GetSender(), history.Sender{})
				out.Seq, out.Epoch, out.Duplicate = res.Seq, res.Epoch, res.Duplicate
				if err != nil {
					ce := c.rpcError(err)
					out.ErrorCode, out.ErrorMessage = ce.Code().String(), ce.Message()
				}
				results[i] = out
			}
		})
	}
	wg.Wait()
	res := &corralv1.BroadcastResponse{Results: results}
	for _, r := range results {
		if r.GetErrorCode() != "" {
			res.Failed++
		}
	}
	return res, nil
}

// The retry hint of an overload refusal grows with the backlog: the
// bound's worth waits overloadRetryMin, each further bound's worth as
// much again, up to overloadRetryMax; jittered by up to half.
const (
	overloadRetryMin = 100 * time.Millisecond
	overloadRetryMax = 5 * time.Second
)

// overloaded reports why an internal API publish must be refused now (""
// when it need not be) and the wait to hint. The signals are cheap and
// already there: every link's queue toward its edge, and the bytes its
// edge last reported in its connections' send queues
// (APIConfig.OverloadQueueBytes). The reason names the larger of the two,
// or the link queue when one holds half of Config.LinkQueue frames (it
// fails, and its clients resume, at the whole).
func (c *Core) overloaded() (reason refuseReason, retry time.Duration, over bool) {
	limit := int(c.apiCfg.OverloadQueueBytes)
	if limit < 0 {
		return 0, 0, false
	}
	var coreBytes, edgeBytes uint64
	fullLink := false
	c.links.each(func(l *link) {
		frames, b, e := l.backlog()
		coreBytes += uint64(b)
		edgeBytes += e
		fullLink = fullLink || frames >= c.cfg.LinkQueue/2
	})
	total := coreBytes + edgeBytes
	switch {
	case fullLink:
		reason, total = refusedOverloadLink, max(total, 2*uint64(limit))
	case total <= uint64(limit):
		return 0, 0, false
	case coreBytes >= edgeBytes:
		reason = refusedOverloadLink
	default:
		reason = refusedOverloadEdge
	}
	retry = min(time.Duration(float64(overloadRetryMin)*float64(total)/float64(max(limit, 1))), overloadRetryMax)
	return reason, retry + rand.N(retry/2+1), true
}

// refuseOverloaded is the resource_exhausted answer of an overloaded
// core: counted by reason, with a corral.v1.Error detail whose code is
// CODE_OVERLOADED (retry) and whose retry_after_ms is the hint.
func (c *Core) refuseOverloaded(reason refuseReason, retry time.Duration) *connect.Error {
	c.metrics.refuse(reason)
	const msg = "core: overloaded: members' queues are backed up; retry after the hinted delay"
	err := connect.NewError(connect.CodeResourceExhausted, msg)
	detail, derr := connectproto.NewErrorDetail(&corralv1.Error{
		Code: corralv1.Code_CODE_OVERLOADED, Message: msg, RetryAfterMs: uint32(retry.Milliseconds()),
	})
	if derr != nil {
		c.cfg.Logger.Error("api: overload detail not encoded", "err", derr)
		return err
	}
	return err.WithDetail(detail)
}

// maxHistoryPageBytes bounds the messages of one History page.
const maxHistoryPageBytes = 4 << 20

// History reads a page of a room's retained messages.
func (c *Core) History(ctx context.Context, req *corralv1.HistoryRequest) (*corralv1.HistoryResponse, error) {
	if err := c.door.ValidRoom(req.GetRoom()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	page, err := c.hist.Read(ctx, history.Query{
		Room:    req.GetRoom(),
		After:   req.GetAfterSeq(),
		Before:  req.GetBeforeSeq(),
		Reverse: req.GetReverse(),
		Limit:   int(req.GetLimit()),
		// A read of a room that never existed must not create it: a
		// caller naming made-up rooms would grow the store.
		Peek: true,
	})
	if err != nil {
		return nil, c.rpcError(err)
	}
	// A page is bounded in bytes as well as in count (1,000 messages of
	// 64 KiB would be 64 MiB): past maxHistoryPageBytes the page ends
	// early and says there is more. The first message always fits.
	size := 0
	for i, m := range page.Messages {
		size += proto.Size(m)
		if i > 0 && size > maxHistoryPageBytes {
			page.Messages, page.More = page.Messages[:i], true
			break
		}
	}
	return &corralv1.HistoryResponse{
		Messages: page.Messages,
		Epoch:    page.Epoch,
		LastSeq:  page.Last,
		FirstSeq: page.First,
		More:     page.More,
	}, nil
}

// Members lists the room's members attached to this core, from the room's
// live state: members whose join finished (Joined was sent); and the
// room's presence from the presence store (every core).
func (c *Core) Members(ctx context.Context, req *corralv1.MembersRequest) (*corralv1.MembersResponse, error) {
	if err := c.door.ValidRoom(req.GetRoom()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	if req.GetEveryCore() {
		res, err := c.every.Members(ctx, req)
		if errors.Is(err, everycore.ErrTooManyMembers) {
			return nil, tooManyMembers(c.apiCfg.MaxMembers)
		}
		return res, err
	}
	snap, err := c.pres.store.List(ctx, req.GetRoom())
	if err != nil {
		return nil, connectErr(connect.CodeUnavailable, err)
	}
	limit := c.apiCfg.MaxMembers
	if len(snap.Members) > limit {
		return nil, tooManyMembers(limit)
	}
	r := c.rooms.get(req.GetRoom())
	res := &corralv1.MembersResponse{}
	for _, m := range snap.Members {
		res.Presence = append(res.Presence, presenceMember(m))
	}
	if r == nil {
		return res, nil
	}
	byUser := make(map[string]*corralv1.Member)
	r.mu.Lock()
	if len(r.members) > limit {
		r.mu.Unlock()
		return nil, tooManyMembers(limit)
	}
	for s := range r.members {
		m := byUser[s.user]
		if m == nil {
			m = &corralv1.Member{UserId: s.user}
			byUser[s.user] = m
		}
		m.SessionIds = append(m.SessionIds, s.id)
		m.Connections++
	}
	r.mu.Unlock()
	res.Members = make([]*corralv1.Member, 0, len(byUser))
	for _, m := range byUser {
		slices.Sort(m.SessionIds)
		res.Members = append(res.Members, m)
		res.Connections += m.Connections
	}
	slices.SortFunc(res.Members, func(a, b *corralv1.Member) int {
		switch {
		case a.UserId < b.UserId:
			return -1
		case a.UserId > b.UserId:
			return 1
		}
		return 0
	})
	return res, nil
}

// tooManyMembers refuses a Members call whose answer would pass max
// entries (core.APIConfig.MaxMembers).
func tooManyMembers(limit int) *connect.Error {
	return connectErr(connect.CodeResourceExhausted, fmt.Errorf("core: the room has more than %d members, the most one Members call lists", limit))
}

// Bounds of a Disconnect: its reason, and the ids it names, in bytes.
const (
	maxReason   = 256
	maxTargetID = 256
)

// Disconnect closes the connections of a user or a session attached to
// this core, with the request's code, reason and (jittered) delay. For a
// STOP code the sessions are also deleted, so a resume is refused.
func (c *Core) Disconnect(ctx context.Context, req *corralv1.DisconnectRequest) (*corralv1.DisconnectResponse, error) {
	code := req.GetCode()
	if _, known := corralv1.Code_name[int32(code)]; !known || code == corralv1.Code_CODE_UNSPECIFIED {
		return nil, connectErr(connect.CodeInvalidArgument, errors.New("core: code is required: one from the code table (docs/CODES.md)"))
	}
	if len(req.GetReason()) > maxReason {
		return nil, connectErr(connect.CodeInvalidArgument, errors.New("core: reason longer than 256 bytes"))
	}
	if len(req.GetUserId()) > maxTargetID || len(req.GetSessionId()) > maxTargetID {
		return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("core: user_id or session_id longer than %d bytes", maxTargetID))
	}
	var targets []*session
	switch t := req.GetTarget().(type) {
	case *corralv1.DisconnectRequest_SessionId:
		if s := c.attached.Lookup(t.SessionId); s != nil {
			targets = append(targets, s)
		}
	case *corralv1.DisconnectRequest_UserId:
		targets = c.attached.OfUser(t.UserId)
	}
	if req.GetUserId() == "" && req.GetSessionId() == "" {
		return nil, connectErr(connect.CodeInvalidArgument, errors.New("core: user_id or session_id is required"))
	}

	res := &corralv1.DisconnectResponse{}
	now := time.Now()

	for _, s := range targets {
		ep, ok := s.endpoint()
		if !ok {
			continue
		}
		c.events.RecordKick(s, code, req.GetReason(), now)
		if protocol.AdviceOf(code) == protocol.AdviceStop {
			// The session ends: no grace window, the user leaves now.
			c.presenceDetach(s, true)
		}
		// Each connection's delay is spread over [d, 1.5d], so a user's
		// many connections do not come back at once.
		d := req.GetDelayMs()
		ep.link.close(ep.conn, code, req.GetReason(), d+uint32(rand.N(int64(d)/2+1)))
		res.SessionIds = append(res.SessionIds, s.id)
	}
	slices.Sort(res.SessionIds)

	if protocol.AdviceOf(code) == protocol.AdviceStop {
		ids := res.SessionIds
		if id := req.GetSessionId(); id != "" && len(ids) == 0 {
			ids = []string{id} // not connected here: still end it
		}
		for _, id := range ids {
			if err := c.sess.Delete(ctx, id); err != nil {
				return nil, c.rpcError(err)
			}
		}
	}
	if req.GetEveryCore() {
		return c.every.Disconnect(ctx, req, res), nil
	}
	return res, nil
}

// Grant adds run-time grants for a user.
func (c *Core) Grant(ctx context.Context, req *corralv1.GrantRequest) (*corralv1.GrantResponse, error) {
	if err := c.door.Grants().Grant(ctx, req.GetUserId(), req.GetJoin(), req.GetPublish()); err != nil {
		return nil, c.grantsError(err)
	}
	return &corralv1.GrantResponse{}, nil
}

// Revoke takes grants away from a user and removes the user's sessions on
// this core from the rooms they may no longer be in; other cores do the
// same when the store announces the change.
func (c *Core) Revoke(ctx context.Context, req *corralv1.RevokeRequest) (*corralv1.RevokeResponse, error) {
	// Under the door's Enforce the announcement of this change, which grantsLoop
	// handles, cannot remove the memberships before this call counts them.
	var (
		ids []string
		n   int
		err error
	)
	c.door.Enforce(func() {
		if err = c.door.Grants().Revoke(ctx, req.GetUserId(), req.GetJoin(), req.GetPublish()); err != nil {
			return
		}
		ids, n = c.enforceGrants(ctx, req.GetUserId())
	})
	if err != nil {
		return nil, c.grantsError(err)
	}
	return &corralv1.RevokeResponse{SessionIds: ids, RoomsLeft: uint32(n)}, nil
}

func (c *Core) grantsError(err error) *connect.Error {
	if errors.Is(err, grants.ErrInvalid) {
		return connectErr(connect.CodeInvalidArgument, err)
	}
	return c.rpcError(err)
}

// Events streams the event log from a position, then live. See
// EventsRequest in proto/corral/v1/room_service.proto for the contract.
func (c *Core) Events(ctx context.Context, req *corralv1.EventsRequest, stream corralv1connect.RoomServiceEventsServerStream) error {
	log := c.events.Store()
	if log == nil {
		return connect.NewError(connect.CodeUnimplemented, "core: this server keeps no event log")
	}
	f, err := eventlog.NewFilter(req)
	if err != nil {
		return connectErr(connect.CodeInvalidArgument, err)
	}
	// The stream ends when the core closes, too.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.ctx, cancel)()

	pos := req.GetAfter()
	switch {
	case pos != "":
	case req.GetFromOldest():
		pos, err = log.Head(ctx)
	default:
		pos, err = log.Tail(ctx)
	}
	if err != nil {
		return c.eventsErr(ctx, err)
	}
	// The first read does not wait, so that a bad position fails the call
	// before any response; the first response, with no events, comes at
	// once and names the start.
	evs, err := log.Read(ctx, pos, events.MaxRead, 0)
	if err != nil {
		return c.eventsErr(ctx, err)
	}
	if err := stream.Send(&corralv1.EventsResponse{Position: pos}); err != nil {
		return err
	}
	heartbeat := c.apiCfg.EventsHeartbeat
	lastSend := time.Now()
	for {
		var out []*corralv1.Event
		if len(evs) > 0 {
			pos = evs[len(evs)-1].GetPosition()
			out = f.Keep(evs)
		}
		if len(out) > 0 || time.Since(lastSend) >= heartbeat {
			if err := stream.Send(&corralv1.EventsResponse{Events: out, Position: pos}); err != nil {
				return err
			}
			lastSend = time.Now()
		}
		wait := max(heartbeat-time.Since(lastSend), time.Millisecond)
		if evs, err = log.Read(ctx, pos, events.MaxRead, wait); err != nil {
			return c.eventsErr(ctx, err)
		}
	}
}

// eventsErr converts an event log error at the RPC boundary.
func (c *Core) eventsErr(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, events.ErrGap):
		return connectErr(connect.CodeOutOfRange, err)
	case errors.Is(err, events.ErrBadPosition):
		return connectErr(connect.CodeInvalidArgument, err)
	case c.ctx.Err() != nil:
		return connectErr(connect.CodeUnavailable, errCoreClosed)
	case ctx.Err() != nil:
		return c.rpcError(ctx.Err())
	}
	return c.rpcError(err)
}
