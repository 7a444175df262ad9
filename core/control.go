package core

import (
	"context"
	"errors"
	"fmt"
	"github.com/corral-rt/corral/history"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect/v2"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/safetext"
	"google.golang.org/protobuf/proto"
)

// Server-side control through the internal API: Subscribe and Unsubscribe
// act on a user's live connections on every core (this core's at once,
// the others' through Config.Control); Batch publishes many messages to
// many rooms. (Rooms and Info, which describe what this core holds, are
// in info.go.)
//
// A Subscribe or Unsubscribe of a connection runs on the connection's own
// queue (connwork.go pushTask), in order with its client's frames, so
// that it never races the client's own joins and leaves; a server-side
// join passes the door (admit) and joins (join) exactly as a client Join.

// Bounds of Subscribe and Unsubscribe.
const (
	maxControlRooms = 128
	// controlWait bounds how long a call waits for this core's
	// connections; the rest is reported pending.
	controlWait = 10 * time.Second
)

// Subscribe joins a user's live connections to rooms, on every core.
func (c *Core) Subscribe(ctx context.Context, req *corralv1.SubscribeRequest) (*corralv1.SubscribeResponse, error) {
	if err := c.validControl(req.GetUserId(), req.GetRooms()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	if _, err := sincePositions(req); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	others, err := c.announce(ctx, controlSubscribe, req)
	if err != nil {
		return nil, err
	}
	res := c.subscribeHere(ctx, req, true)
	res.OtherCores = uint32(others)
	return res, nil
}

// Unsubscribe removes a user's live connections from rooms, on every core.
func (c *Core) Unsubscribe(ctx context.Context, req *corralv1.UnsubscribeRequest) (*corralv1.UnsubscribeResponse, error) {
	if err := c.validControl(req.GetUserId(), req.GetRooms()); err != nil {
		return nil, connectErr(connect.CodeInvalidArgument, err)
	}
	if len(req.GetReason()) > maxReason {
		return nil, connectErr(connect.CodeInvalidArgument, errors.New("core: reason longer than 256 bytes"))
	}
	others, err := c.announce(ctx, controlUnsubscribe, req)
	if err != nil {
		return nil, err
	}
	res := c.unsubscribeHere(ctx, req, true)
	res.OtherCores = uint32(others)
	return res, nil
}

// validControl checks the target and rooms of a Subscribe or Unsubscribe.
func (c *Core) validControl(user string, rooms []string) error {
	switch {
	case user == "":
		return errors.New("core: user_id is required")
	case len(user) > maxTargetID:
		return fmt.Errorf("core: user_id longer than %d bytes", maxTargetID)
	case len(rooms) == 0:
		return errors.New("core: no rooms")
	case len(rooms) > maxControlRooms:
		return fmt.Errorf("core: more than %d rooms", maxControlRooms)
	}
	seen := make(map[string]struct{}, len(rooms))
	for _, room := range rooms {
		if err := c.door.ValidRoom(room); err != nil {
			return fmt.Errorf("room %s: %w", safetext.Quote(room), err)
		}
		if _, dup := seen[room]; dup {
			return fmt.Errorf("core: room %s appears twice", safetext.Quote(room))
		}
		seen[room] = struct{}{}
	}
	return nil
}

// sincePositions returns a Subscribe's positions by room; each must name
// one of its rooms, once.
func sincePositions(req *corralv1.SubscribeRequest) (map[string]*corralv1.RoomPosition, error) {
	out := make(map[string]*corralv1.RoomPosition, len(req.GetSince()))
	for _, p := range req.GetSince() {
		if !slices.Contains(req.GetRooms(), p.GetRoom()) {
			return nil, fmt.Errorf("core: since names room %s, which is not in rooms", safetext.Quote(p.GetRoom()))
		}
		if _, dup := out[p.GetRoom()]; dup {
			return nil, fmt.Errorf("core: since names room %s twice", safetext.Quote(p.GetRoom()))
		}
		out[p.GetRoom()] = p
	}
	return out, nil
}

// Kinds of commands on the control bus: the first byte of a command, the
// rest is the request in protobuf.
const (
	controlSubscribe   byte = 's'
	controlUnsubscribe byte = 'u'
)

// announce sends a command to the other cores and returns how many got
// it. Without a bus, this core is the only one.
func (c *Core) announce(ctx context.Context, kind byte, req proto.Message) (int, error) {
	if c.cfg.Control == nil {
		return 0, nil
	}
	b, err := proto.Marshal(req)
	if err != nil {
		return 0, c.rpcError(fmt.Errorf("core: encode command: %w", err))
	}
	n, err := c.cfg.Control.Publish(ctx, append([]byte{kind}, b...))
	if err != nil {
		return 0, c.rpcError(err)
	}
	return n, nil
}

// decodeControl decodes a command of another core.
func decodeControl(cmd []byte) (proto.Message, error) {
	if len(cmd) == 0 {
		return nil, errors.New("core: empty command")
	}
	var m proto.Message
	switch cmd[0] {
	case controlSubscribe:
		m = new(corralv1.SubscribeRequest)
	case controlUnsubscribe:
		m = new(corralv1.UnsubscribeRequest)
	default:
		return nil, fmt.Errorf("core: unknown command kind %q", cmd[0])
	}
	if err := proto.Unmarshal(cmd[1:], m); err != nil {
		return nil, fmt.Errorf("core: decode command: %w", err)
	}
	return m, nil
}

// onControl applies another core's command to this core's connections,
// without waiting for them. It runs on the bus's goroutine.
func (c *Core) onControl(cmd []byte) {
	m, err := decodeControl(cmd)
	if err != nil {
		c.metrics.drop(droppedBadControl, 1)
		c.cfg.Logger.Warn("control bus: bad command", "err", err)
		return
	}
	// The command was checked by the core that published it; checked
	// again, so that a confused publisher cannot bypass the bounds.
	switch req := m.(type) {
	case *corralv1.SubscribeRequest:
		if _, perr := sincePositions(req); c.validControl(req.GetUserId(), req.GetRooms()) != nil || perr != nil {
			c.metrics.drop(droppedBadControl, 1)
			return
		}
		c.subscribeHere(c.ctx, req, false)
	case *corralv1.UnsubscribeRequest:
		if c.validControl(req.GetUserId(), req.GetRooms()) != nil || len(req.GetReason()) > maxReason {
			c.metrics.drop(droppedBadControl, 1)
			return
		}
		c.unsubscribeHere(c.ctx, req, false)
	}
}

// onEachConn runs task on the queue of each of user's connections here.
// With wait, it waits (within ctx and controlWait) for the tasks and
// returns how many connections it reached and how many had not finished;
// a connection closing or with a full queue is not reached (counted in
// corral_core_dropped_total as control_busy).
func (c *Core) onEachConn(ctx context.Context, user string, wait bool, task func(ctx context.Context, s *session)) (reached, pending int) {
	var done []chan bool
	for _, s := range c.attached.OfUser(user) {
		w := s.work
		if w == nil || s.isGone() {
			continue
		}
		ran := make(chan bool, 1)
		queued := w.pushTask(func(ctx context.Context, cur *session) {
			if ctx == nil || cur != s || cur.isGone() {
				ran <- false // dropped, or the session moved on
				return
			}
			task(ctx, s)
			ran <- true
		})
		if queued {
			done = append(done, ran)
		} else {
			c.metrics.drop(droppedControlBusy, 1)
		}
	}
	if !wait {
		return len(done), 0
	}
	timer := time.NewTimer(controlWait)
	defer timer.Stop()
	late := false // past the wait: take only what is done
	for _, ran := range done {
		if !late {
			select {
			case ok := <-ran:
				if ok {
					reached++
				}
				continue
			case <-ctx.Done():
			case <-timer.C:
			}
			late = true
		}
		select {
		case ok := <-ran:
			if ok {
				reached++
			}
		default:
			pending++
		}
	}
	return reached, pending
}

// subscribeHere joins user's connections on this core to the rooms.
func (c *Core) subscribeHere(ctx context.Context, req *corralv1.SubscribeRequest, wait bool) *corralv1.SubscribeResponse {
	since, _ := sincePositions(req)
	rooms := req.GetRooms()
	var mu sync.Mutex // guards results and answered
	// answered: the response is built; a task that finishes later must
	// not touch results any more.
	answered := false
	results := make([]*corralv1.SubscribeResult, len(rooms))
	for i, room := range rooms {
		results[i] = &corralv1.SubscribeResult{Room: room}
	}
	reached, pending := c.onEachConn(ctx, req.GetUserId(), wait, func(ctx context.Context, s *session) {
		already := make([]bool, len(rooms))
		var reqs []*joinReq
		s.mu.Lock()
		for i, room := range rooms {
			if _, in := s.rooms[room]; in {
				already[i] = true
				continue
			}
			q := &joinReq{name: room, presence: req.GetPresence()}
			if p := since[room]; p != nil {
				q.since, q.epoch, q.position = p.GetSeq(), p.GetEpoch(), true
			}
			reqs = append(reqs, q)
		}
		s.mu.Unlock()
		c.join(ctx, s, c.admit(ctx, s, reqs))
		mu.Lock()
		defer mu.Unlock()
		if answered {
			return // too late for the response
		}
		for i, room := range rooms {
			switch {
			case already[i]:
				results[i].Already++
			case s.room(room) != nil:
				results[i].Joined++
			default:
				results[i].Refused++
			}
		}
	})
	mu.Lock()
	defer mu.Unlock()
	answered = true
	return &corralv1.SubscribeResponse{Connections: uint32(reached + pending), Results: results, Pending: uint32(pending)}
}

// unsubscribeReason is Left.reason of an Unsubscribe without one.
const unsubscribeReason = "the application removed this connection from the room"

// unsubscribeHere removes user's connections on this core from the rooms:
// each gets Left with CODE_UNSUBSCRIBED.
func (c *Core) unsubscribeHere(ctx context.Context, req *corralv1.UnsubscribeRequest, wait bool) *corralv1.UnsubscribeResponse {
	rooms := req.GetRooms()
	reason := req.GetReason()
	if reason == "" {
		reason = unsubscribeReason
	}
	var mu sync.Mutex // guards results and answered (as in subscribeHere)
	answered := false
	results := make([]*corralv1.UnsubscribeResult, len(rooms))
	for i, room := range rooms {
		results[i] = &corralv1.UnsubscribeResult{Room: room}
	}
	reached, pending := c.onEachConn(ctx, req.GetUserId(), wait, func(ctx context.Context, s *session) {
		for i, name := range rooms {
			r := s.dropRoom(name)
			if r == nil {
				continue
			}
			r.leave(s, &corralv1.Left{Room: name, Code: corralv1.Code_CODE_UNSUBSCRIBED, Reason: safetext.Reason(reason)})
			c.events.EmitLeft(s, name)
			c.presenceLeave(s, name, true)
			c.releaseMember(r)
			if err := c.sess.DeleteRoom(ctx, s.id, name); err != nil {
				c.cfg.Logger.Warn("session store: delete room failed", "session", s.id, "room", name, "err", err)
			}
			mu.Lock()
			if !answered {
				results[i].Left++
			}
			mu.Unlock()
		}
	})
	mu.Lock()
	defer mu.Unlock()
	answered = true
	return &corralv1.UnsubscribeResponse{Connections: uint32(reached + pending), Results: results, Pending: uint32(pending)}
}

// Batch publishes many messages, each to its own room. Every item is
// checked and published on its own; a room's items are published in item
// order, and once one of them fails the room's later items are not
// published (aborted), so that a retry cannot land out of order.
func (c *Core) Batch(ctx context.Context, req *corralv1.BatchRequest) (*corralv1.BatchResponse, error) {
	items := req.GetPublishes()
	switch {
	case len(items) == 0:
		return nil, connectErr(connect.CodeInvalidArgument, errors.New("core: no publishes"))
	case len(items) > c.apiCfg.MaxBatch:
		return nil, connectErr(connect.CodeInvalidArgument, fmt.Errorf("core: more than %d publishes in one batch", c.apiCfg.MaxBatch))
	}
	results := make([]*corralv1.BatchResult, len(items))
	// Each room's items, in item order; rooms in order of first item.
	byRoom := make(map[string]int)
	var groups [][]int
	for i, it := range items {
		results[i] = &corralv1.BatchResult{Room: it.GetRoom()}
		g, ok := byRoom[it.GetRoom()]
		if !ok {
			g = len(groups)
			byRoom[it.GetRoom()] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	publishRoom := func(idx []int) {
		failed := false
		for _, i := range idx {
			it, out := items[i], results[i]
			if failed {
				out.ErrorCode, out.ErrorMessage = connect.CodeAborted.String(), "an earlier item of this room failed: not published, to keep the room's order"
				continue
			}
			err := c.door.ValidRoom(it.GetRoom())
			if err == nil {
				err = c.validPublish(it.GetRoom(), it.GetPayload(), it.GetIdempotencyKey(), it.GetSender())
			}
			var order history.Sender
			if err == nil {
				order, err = apiSender(it)
			}
			if err != nil {
				failed = true
				out.ErrorCode, out.ErrorMessage = connect.CodeInvalidArgument.String(), err.Error()
				continue
			}
			res, err := c.apiPublish(ctx, it.GetRoom(), it.GetPayload(), it.GetIdempotencyKey(), it.GetSender(), order)
			if err != nil {
				failed = true
				ce := c.rpcError(err)
				out.ErrorCode, out.ErrorMessage = ce.Code().String(), ce.Message()
				continue
			}
			out.Seq, out.Epoch, out.Duplicate = res.Seq, res.Epoch, res.Duplicate
		}
	}
	if req.GetParallel() {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range min(len(groups), c.apiCfg.BroadcastConcurrency) {
			wg.Go(func() {
				for {
					g := int(next.Add(1) - 1)
					if g >= len(groups) {
						return
					}
					publishRoom(groups[g])
				}
			})
		}
		wg.Wait()
	} else {
		// One at a time in item order: a room's failure still aborts its
		// later items.
		failed := make(map[string]bool)
		for i, it := range items {
			if failed[it.GetRoom()] {
				results[i].ErrorCode, results[i].ErrorMessage = connect.CodeAborted.String(), "an earlier item of this room failed: not published, to keep the room's order"
				continue
			}
			publishRoom([]int{i})
			if results[i].GetErrorCode() != "" {
				failed[it.GetRoom()] = true
			}
		}
	}
	res := &corralv1.BatchResponse{Results: results}
	for _, r := range results {
		if r.GetErrorCode() != "" {
			res.Failed++
		}
	}
	return res, nil
}
