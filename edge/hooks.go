package edge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/hooks"
	"github.com/corral-rt/corral/internal/safetext"
)

// The edge's hooks: the application's backend (Config.Hooks) answers a
// connection's hello (Connect), its refreshes (Refresh) and its call
// frames (Call) when its policy says so. The edge calls these three
// because it holds what they need (the HTTP request's headers and
// cookies, the connection) and because a call needs no room order; the
// core calls Join and Publish at its door. See docs/HOOKS.md.

// hookRequest is what the Connect hook learns of the HTTP request: the
// allow-listed headers and cookies (Config.HookHeaders, HookCookies).
type hookRequest struct {
	headers, cookies map[string]string
}

// captureHook keeps the allow-listed headers and cookies of r for the
// Connect hook; nil when the hook is off.
func (e *Edge) captureHook(r *http.Request) *hookRequest {
	if e.cfg.Hooks == nil || !e.cfg.Hooks.Policy().Connect {
		return nil
	}
	hr := &hookRequest{}
	for _, name := range e.cfg.HookHeaders {
		if v := r.Header.Values(name); len(v) > 0 {
			if hr.headers == nil {
				hr.headers = make(map[string]string)
			}
			hr.headers[strings.ToLower(name)] = strings.Join(v, ", ")
		}
	}
	for _, name := range e.cfg.HookCookies {
		if ck, err := r.Cookie(name); err == nil {
			if hr.cookies == nil {
				hr.cookies = make(map[string]string)
			}
			hr.cookies[name] = ck.Value
		}
	}
	return hr
}

// refusedError is the backend's refusal of a connection or a refresh.
type refusedError struct {
	code   corralv1.Code
	reason string
}

func (e *refusedError) Error() string { return e.reason }

// authenticate returns the hello's identity: from the Connect hook when
// it is on (with the rooms to join server-side), else from Config.Auth.
// With the Connect hook, info is the connection's default member info
// (ConnectResponse.info). A refusal by the backend is a *refusedError; a
// backend that could not answer wraps hooks.ErrUnavailable.
func (c *conn) authenticate(ctx context.Context, hello *corralv1.Hello) (id *corralv1.Identity, rooms []string, info []byte, err error) {
	if c.hook == nil {
		id, err := c.e.cfg.Auth.Authenticate(ctx, hello.GetToken())
		return id, nil, nil, err
	}
	res, err := c.e.cfg.Hooks.Connect(ctx, &corralv1.ConnectRequest{
		Token:      hello.GetToken(),
		Headers:    c.hook.headers,
		Cookies:    c.hook.cookies,
		RemoteAddr: c.remote,
		Protocol:   c.enc.String(),
		Client:     hello.GetClient(),
		Resume:     hello.GetResume() != nil,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	if r := res.GetRefusal(); r != nil {
		code, reason := hooks.ClientRefusal(r, corralv1.Code_CODE_UNAUTHENTICATED)
		return nil, nil, nil, &refusedError{code, reason}
	}
	id = &corralv1.Identity{
		UserId: res.GetUserId(), Join: res.GetJoin(), Publish: res.GetPublish(), ExpiresUnix: res.GetExpiresUnix(),
	}
	if hello.GetResume() == nil {
		rooms = res.GetRooms()
		if len(rooms) > maxInitialRooms {
			c.e.cfg.Logger.Warn("connect hook: too many initial rooms, the rest ignored", "user", id.GetUserId(), "rooms", len(rooms))
			rooms = rooms[:maxInitialRooms]
		}
	}
	return id, rooms, res.GetInfo(), nil
}

// nop is a CancelFunc with nothing to cancel.
func nop() {}

// maxInitialRooms bounds the rooms a Connect answer joins server-side
// (the core's rooms-per-connection bound applies too).
const maxInitialRooms = 1024

// joinInitial joins the rooms the Connect hook named, as joins of the
// client would be: each passes the core's door.
func (c *conn) joinInitial(rooms []string) bool {
	for _, room := range rooms {
		if !c.link.forward(c, &corralv1.ClientFrame{Kind: &corralv1.ClientFrame_Join{Join: &corralv1.Join{Room: room}}}) {
			return false
		}
	}
	return true
}

// helloRefused closes a connection whose hello authenticate refused, and
// reports whether it did (err is not an authenticator's own error).
func (c *conn) helloRefused(err error) bool {
	var ref *refusedError
	switch {
	case errors.As(err, &ref):
		c.closeWith(ref.code, ref.reason, 0, false)
	case errors.Is(err, hooks.ErrUnavailable):
		c.e.cfg.Logger.Warn("connect hook unavailable", "remote", c.remote, "err", err)
		c.closeWith(corralv1.Code_CODE_UNAVAILABLE, "authentication unavailable: retry later", retryMs(hooks.RetryAfter(err)), false)
	default:
		return false
	}
	return true
}

// refreshHook's codes when its failure policy answered the client
// itself: there is no Error to send; codeClosed: the connection is
// closing.
const (
	codeAnswered corralv1.Code = -1
	codeClosed   corralv1.Code = -2
)

// refreshHook asks the backend about a refresh. It returns the new
// identity, or nil with the code and text of the Error to send, or
// codeAnswered or codeClosed. When the backend cannot answer, hooks-policy-refresh
// applies: closed closes the connection with CODE_UNAVAILABLE and a delay
// (the client reconnects later, with its token, and resumes);
// allow-known answers an Error CODE_UNAVAILABLE with retryAfterMs (the
// client may retry the refresh) and keeps the connection until its
// token's expiry plus RefreshGrace, then closes it with
// CODE_TOKEN_EXPIRED (corral_hook_unchecked_total{hook="refresh"}).
func (c *conn) refreshHook(ctx context.Context, token string) (*corralv1.Identity, corralv1.Code, string) {
	res, err := c.e.cfg.Hooks.Refresh(ctx, &corralv1.RefreshRequest{
		UserId: c.user, Token: token, ConnectionId: fmt.Sprint(c.id),
	})
	if err != nil {
		c.e.cfg.Logger.Warn("refresh hook unavailable", "user", c.user, "err", err)
		pol := c.e.cfg.Hooks.Policy()
		if !pol.RefreshAllowKnown() {
			c.closeWith(corralv1.Code_CODE_UNAVAILABLE, "refresh: the application could not answer: reconnect later",
				retryMs(hooks.RetryAfter(err)), false)
			return nil, codeClosed, ""
		}
		c.e.cfg.Hooks.Unchecked(hooks.HookRefresh, 1)
		c.closeAt(c.expires, pol.RefreshGrace)
		c.sendFrame(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Error{Error: &corralv1.Error{
			Frame:        "refresh",
			Code:         corralv1.Code_CODE_UNAVAILABLE,
			Message:      "refresh: the application could not answer: retry later (the connection is kept a grace past its token's expiry)",
			RetryAfterMs: retryMs(hooks.RetryAfter(err)),
		}}})
		return nil, codeAnswered, ""
	}
	if r := res.GetRefusal(); r != nil {
		// Always 4401, as a refused token's refresh (client.proto): the
		// code is what tells a client which of its requests was refused.
		_, reason := hooks.ClientRefusal(r, corralv1.Code_CODE_UNAUTHENTICATED)
		return nil, corralv1.Code_CODE_UNAUTHENTICATED, "refresh: " + reason
	}
	return &corralv1.Identity{
		UserId: c.user, Join: res.GetJoin(), Publish: res.GetPublish(), ExpiresUnix: res.GetExpiresUnix(),
	}, 0, ""
}

// maxMethod bounds a call's method name in bytes.
const maxMethod = 128

// call answers a Call frame through the backend's Call hook, on a
// goroutine of its own so the reader goes on: at most
// Config.MaxCallsInFlight per connection (past it CallResult carries
// CODE_RATE_LIMITED). Every error is a code of the table with a fixed
// text; what the backend said on failure goes to the log only.
func (c *conn) call(k *corralv1.Call) {
	fail := func(code corralv1.Code, msg string, retry time.Duration) {
		c.sendFrame(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_CallResult{CallResult: &corralv1.CallResult{
			Id: k.GetId(), Error: &corralv1.Error{Code: code, Message: safetext.Reason(msg), RetryAfterMs: retryMs(retry)},
		}}})
	}
	if c.e.cfg.Hooks == nil || !c.e.cfg.Hooks.Policy().Call {
		fail(corralv1.Code_CODE_UNKNOWN_FRAME, "this server takes no calls", 0)
		return
	}
	if err := safetext.CheckName("method", k.GetMethod(), maxMethod); err != nil {
		fail(corralv1.Code_CODE_INVALID_ARGUMENT, err.Error(), 0)
		return
	}
	if c.calls.Add(1) > int32(c.e.cfg.MaxCallsInFlight) {
		c.calls.Add(-1)
		c.e.metrics.refuse(refusedCallsInFlight)
		fail(corralv1.Code_CODE_RATE_LIMITED, fmt.Sprintf("at most %d calls in flight per connection", c.e.cfg.MaxCallsInFlight), 100*time.Millisecond)
		return
	}
	// Close waits for it: readers are done by then (no new call), and
	// cancelling the edge's context ends the one in flight.
	c.e.wg.Add(1)
	go func() {
		defer c.e.wg.Done()
		defer c.calls.Add(-1)
		res, err := c.e.cfg.Hooks.Call(c.e.ctx, &corralv1.CallRequest{
			UserId: c.user, Method: k.GetMethod(), Payload: k.GetPayload(), ConnectionId: fmt.Sprint(c.id),
		})
		switch {
		case err != nil:
			c.e.cfg.Logger.Warn("call hook unavailable", "user", c.user, "method", k.GetMethod(), "err", err)
			fail(corralv1.Code_CODE_UNAVAILABLE, "the application could not answer: retry later", hooks.RetryAfter(err))
		case res.GetRefusal() != nil:
			code, reason := hooks.ClientRefusal(res.GetRefusal(), corralv1.Code_CODE_FORBIDDEN)
			fail(code, reason, 0)
		default:
			c.sendFrame(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_CallResult{CallResult: &corralv1.CallResult{
				Id: k.GetId(), Payload: res.GetPayload(),
			}}})
		}
	}()
}

func retryMs(d time.Duration) uint32 { return uint32(min(d.Milliseconds(), 1<<31)) }
