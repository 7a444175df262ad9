package edge

import (
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/safetext"
)

// Requests and their answers: which client frames wait on an answer, and
// how the answer names the frame: an Error by the kind of frame it
// refuses (Error.frame), the room and the ref. With it the edge keeps, per connection,
// the requests it passed to the core that the core has not answered yet
// (ids and refs only), and answers each of them 4103 (UNAVAILABLE, retry
// at once) when the link's stream ends: a request the core took and never
// answered before it went away would otherwise cost the client its
// resend timeout. A request the core did answer is settled by that answer
// and is not answered again.

// reqKind is a row of the table in requestOf.
type reqKind uint8

const (
	reqNone          reqKind = iota // no answer expected (signal, ack, setPresence)
	reqPublish                      // Published{room, id} or Error{publish, room, ref: id}
	reqAppend                       // Published{room, id} or Error{append, room, ref: Append.id}
	reqJoin                         // Joined{room} or Error{join, room}
	reqLeave                        // Left{room} or Error{leave, room}
	reqPresenceQuery                // PresencePage{room} or Error{presenceQuery, room}
	reqState                        // SetState, DeleteState: StateUpdated{room, ref} or Error{setState|deleteState, room, ref}
	reqCall                         // CallResult{id}, refusals included
	reqRefresh                      // Refreshed or Error{refresh} (no room, no ref)
)

// refusedAs reports whether an Error whose frame is frame (Error.frame,
// ClientFrame's JSON name of the kind refused) refuses a request of k.
func (k reqKind) refusedAs(frame string) bool {
	switch frame {
	case "publish":
		return k == reqPublish
	case "append":
		return k == reqAppend
	case "join":
		return k == reqJoin
	case "leave":
		return k == reqLeave
	case "presenceQuery":
		return k == reqPresenceQuery
	case "setState", "deleteState":
		return k == reqState
	case "refresh":
		return k == reqRefresh
	}
	return false // signal, ack, setPresence, ping, hello: never tracked
}

// request is what is kept of a client frame to answer it: its row and
// the names its answer carries.
type request struct {
	kind reqKind
	// frame is the frame's kind, as an Error refusing it names it
	// (Error.frame): ClientFrame's JSON name.
	frame string
	room  string
	ref   string
	id    uint64 // Call.id
}

// requestOf reads f's row: the names its answer or refusal carries, and
// whether it expects an answer at all. A Ping expects a Pong, but only
// one sent before the Welcome reaches the core, and a connection without
// a Welcome is closed when its link fails: it is not tracked. A Hello is
// answered by the Welcome or a close.
func requestOf(f *corralv1.ClientFrame) request {
	switch k := f.GetKind().(type) {
	case *corralv1.ClientFrame_Publish:
		return request{kind: reqPublish, frame: "publish", room: k.Publish.GetRoom(), ref: k.Publish.GetId()}
	case *corralv1.ClientFrame_Append:
		return request{kind: reqAppend, frame: "append", room: k.Append.GetRoom(), ref: k.Append.GetId()}
	case *corralv1.ClientFrame_Join:
		return request{kind: reqJoin, frame: "join", room: k.Join.GetRoom()}
	case *corralv1.ClientFrame_Leave:
		return request{kind: reqLeave, frame: "leave", room: k.Leave.GetRoom()}
	case *corralv1.ClientFrame_PresenceQuery:
		return request{kind: reqPresenceQuery, frame: "presenceQuery", room: k.PresenceQuery.GetRoom()}
	case *corralv1.ClientFrame_SetState:
		return request{kind: reqState, frame: "setState", room: k.SetState.GetRoom(), ref: k.SetState.GetRef()}
	case *corralv1.ClientFrame_DeleteState:
		return request{kind: reqState, frame: "deleteState", room: k.DeleteState.GetRoom(), ref: k.DeleteState.GetRef()}
	case *corralv1.ClientFrame_Call:
		return request{kind: reqCall, frame: "call", id: k.Call.GetId()}
	case *corralv1.ClientFrame_Refresh:
		return request{kind: reqRefresh, frame: "refresh"}
	// Refused, never answered: a refusal names the room.
	case *corralv1.ClientFrame_Signal:
		return request{frame: "signal", room: k.Signal.GetRoom()}
	case *corralv1.ClientFrame_Ack:
		return request{frame: "ack", room: k.Ack.GetRoom()}
	case *corralv1.ClientFrame_SetPresence:
		return request{frame: "setPresence", room: k.SetPresence.GetRoom()}
	case *corralv1.ClientFrame_Hello:
		return request{frame: "hello"} // a second one, refused
	}
	return request{}
}

// answeredBy reports whether the server frame a answers r: its success
// answer, or an Error naming r as its refusal would.
func (r request) answeredBy(a *corralv1.ServerFrame) bool {
	if e := a.GetError(); e != nil {
		if r.kind == reqCall {
			return false // a call's refusal is its CallResult
		}
		if e.GetRoom() != r.room || e.GetRef() != r.ref {
			return false
		}
		// The core names the kind of frame an Error refuses (Error.frame):
		// a signal's refusal in a room leaves a join of it in flight. A
		// core from before the field names none: then room and ref decide.
		return e.GetFrame() == "" || r.kind.refusedAs(e.GetFrame())
	}
	switch k := a.GetKind().(type) {
	case *corralv1.ServerFrame_Published:
		return (r.kind == reqPublish || r.kind == reqAppend) && k.Published.GetRoom() == r.room && k.Published.GetId() == r.ref
	case *corralv1.ServerFrame_Joined:
		return r.kind == reqJoin && k.Joined.GetRoom() == r.room
	case *corralv1.ServerFrame_Left:
		return r.kind == reqLeave && k.Left.GetRoom() == r.room
	case *corralv1.ServerFrame_PresencePage:
		return r.kind == reqPresenceQuery && k.PresencePage.GetRoom() == r.room
	case *corralv1.ServerFrame_StateUpdated:
		return r.kind == reqState && k.StateUpdated.GetRoom() == r.room && k.StateUpdated.GetRef() == r.ref
	case *corralv1.ServerFrame_CallResult:
		return r.kind == reqCall && k.CallResult.GetId() == r.id
	case *corralv1.ServerFrame_Refreshed:
		return r.kind == reqRefresh
	}
	return false
}

// isAnswer reports whether a is of a kind that answers some request: the
// frames settle looks at (a Batch holds room traffic, never an answer).
func isAnswer(a *corralv1.ServerFrame) bool {
	switch a.GetKind().(type) {
	case *corralv1.ServerFrame_Error, *corralv1.ServerFrame_Published, *corralv1.ServerFrame_Joined,
		*corralv1.ServerFrame_Left, *corralv1.ServerFrame_PresencePage, *corralv1.ServerFrame_StateUpdated,
		*corralv1.ServerFrame_CallResult, *corralv1.ServerFrame_Refreshed:
		return true
	}
	return false
}

// maxUnanswered bounds the requests tracked per connection: the core's
// own bound on one connection's queued frames (core.Config.ConnQueueFrames'
// default), past which it closes the connection anyway. A request past it
// is not tracked: on a link failure its client waits for its resend
// timeout, as before.
const maxUnanswered = 1024

// trackLocked records r, passed to the core for c, as unanswered. Lock
// (link.mu) must be held.
func (c *conn) trackLocked(r request) {
	if r.kind == reqNone || len(c.unanswered) >= maxUnanswered {
		return
	}
	c.unanswered = append(c.unanswered, r)
}

// settleLocked forgets the earliest unanswered request that a, a frame
// from the core for c, answers. Lock (link.mu) must be held.
func (c *conn) settleLocked(a *corralv1.ServerFrame) {
	if len(c.unanswered) == 0 || !isAnswer(a) {
		return
	}
	for i, r := range c.unanswered {
		if !r.answeredBy(a) {
			continue
		}
		if i == 0 {
			// Answers mostly come in order: the head goes, no copy.
			c.unanswered[0] = request{}
			c.unanswered = c.unanswered[1:]
		} else {
			c.unanswered = append(c.unanswered[:i], c.unanswered[i+1:]...)
		}
		if len(c.unanswered) == 0 {
			c.unanswered = nil // let a burst's array go
		}
		return
	}
}

// takeUnansweredLocked returns c's unanswered requests, in the order
// they were sent, and forgets them. Lock (link.mu) must be held.
func (c *conn) takeUnansweredLocked() []request {
	u := c.unanswered
	c.unanswered = nil
	return u
}

// refuseRequest answers r with an error: a call's is its CallResult,
// any other's an Error naming the frame as its answer would.
func (c *conn) refuseRequest(r request, code corralv1.Code, msg string, retryMs uint32) {
	e := &corralv1.Error{Code: code, Message: safetext.Reason(msg), RetryAfterMs: retryMs}
	if r.kind == reqCall {
		c.sendFrame(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_CallResult{CallResult: &corralv1.CallResult{
			Id: r.id, Error: e,
		}}})
		return
	}
	e.Frame, e.Room, e.Ref = r.frame, r.room, r.ref
	c.sendFrame(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Error{Error: e}})
}
