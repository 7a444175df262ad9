package core

import (
	"context"
	"sync"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/safetext"
)

// Server-side control of this core's connections: what the internal
// API's Subscribe and Unsubscribe (package core/api, which checks them
// and carries them to the other cores) do to a user's connections here.
//
// A Subscribe or Unsubscribe of a connection runs on the connection's own
// queue (core/session Work.PushTask), in order with its client's frames, so
// that it never races the client's own joins and leaves; a server-side
// join passes the door (admit) and joins (join) exactly as a client Join.

// controlWait bounds how long a call waits for this core's connections;
// the rest is reported pending.
const controlWait = 10 * time.Second

// onEachConn runs task on the queue of each of user's connections here.
// With wait, it waits (within ctx and controlWait) for the tasks and
// returns how many connections it reached and how many had not finished;
// a connection closing or with a full queue is not reached (counted in
// corral_core_dropped_total as control_busy).
func (c apiCore) onEachConn(ctx context.Context, user string, wait bool, task func(ctx context.Context, s *session)) (reached, pending int) {
	var done []chan bool
	for _, s := range c.attached.OfUser(user) {
		w := s.Work()
		if w == nil || s.Gone() {
			continue
		}
		ran := make(chan bool, 1)
		queued := w.PushTask(func(ctx context.Context, cur *session) {
			if ctx == nil || cur != s || cur.Gone() {
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

// SubscribeHere joins user's connections on this core to the rooms.
func (c apiCore) SubscribeHere(ctx context.Context, req *corralv1.SubscribeRequest, since map[string]*corralv1.RoomPosition, wait bool) *corralv1.SubscribeResponse {
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
		in := make(map[string]bool)
		for _, name := range s.RoomNames() {
			in[name] = true
		}
		for i, room := range rooms {
			if in[room] {
				already[i] = true
				continue
			}
			q := &joinReq{Name: room, Presence: req.GetPresence()}
			if p := since[room]; p != nil {
				q.Since, q.Epoch, q.Position = p.GetSeq(), p.GetEpoch(), true
			}
			reqs = append(reqs, q)
		}
		c.life.Join(ctx, s, c.adm.admit(ctx, s, reqs))
		mu.Lock()
		defer mu.Unlock()
		if answered {
			return // too late for the response
		}
		for i, room := range rooms {
			switch {
			case already[i]:
				results[i].Already++
			case s.Room(room) != nil:
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

// UnsubscribeHere removes user's connections on this core from the rooms:
// each gets Left with CODE_UNSUBSCRIBED and reason.
func (c apiCore) UnsubscribeHere(ctx context.Context, req *corralv1.UnsubscribeRequest, reason string, wait bool) *corralv1.UnsubscribeResponse {
	rooms := req.GetRooms()
	var mu sync.Mutex // guards results and answered (as in SubscribeHere)
	answered := false
	results := make([]*corralv1.UnsubscribeResult, len(rooms))
	for i, room := range rooms {
		results[i] = &corralv1.UnsubscribeResult{Room: room}
	}
	reached, pending := c.onEachConn(ctx, req.GetUserId(), wait, func(ctx context.Context, s *session) {
		for i, name := range rooms {
			r := s.DropRoom(name)
			if r == nil {
				continue
			}
			r.Leave(s, &corralv1.Left{Room: name, Code: corralv1.Code_CODE_UNSUBSCRIBED, Reason: safetext.Reason(reason)})
			c.events.EmitLeft(s, name)
			c.pres.leave(s, name, true)
			c.releaseMember(r)
			if err := c.sess.DeleteRoom(ctx, s.SessionID(), name); err != nil {
				c.cfg.Logger.Warn("session store: delete room failed", "session", s.SessionID(), "room", name, "err", err)
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
