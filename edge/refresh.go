package edge

import (
	"context"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// Token lifetime. A connection lives as long as its token: at the token's
// exp (Identity.expires_unix) the edge closes it with CODE_TOKEN_EXPIRED,
// unless the client sent a Refresh with a newer token first. Each
// connection has one runtime timer (time.AfterFunc: no goroutine until it
// fires, so a parked connection costs nothing more and still expires),
// replaced by a refresh and stopped when the connection ends.
//
// A Refresh is verified by verifyRefresh, as the Hello's token is, and
// must name the connection's user. The new identity then goes to the core
// (EdgeFrame.refresh), which re-checks the session's rooms against its
// grants, leaves those no longer granted (Left CODE_FORBIDDEN) and answers
// Refreshed. A refused refresh is an Error frame CODE_UNAUTHENTICATED
// without a room, and changes nothing: the connection still ends at the old
// expiry. A refresh the Refresh hook could not answer follows
// hooks-policy-refresh (hooks.go refreshHook).

// expireAt arms the connection's expiry timer for the token expiry unix
// (seconds; 0: never), replacing the previous one. It runs on the
// connection's reader.
func (c *conn) expireAt(unix int64) {
	c.expires = unix
	c.closeAt(unix, 0)
}

// closeAt arms the expiry timer for unix (0: none) plus grace, without
// changing the token's exp: a refresh the Refresh hook could not check
// under allow-known keeps the connection a grace past it (hooks.go). It
// runs on the connection's reader.
func (c *conn) closeAt(unix int64, grace time.Duration) {
	if c.expiry != nil {
		c.expiry.Stop()
		c.expiry = nil
	}
	if unix <= 0 {
		return
	}
	// A token accepted within the verifier's leeway may be past its exp
	// already: it expires at once, after the welcome.
	c.expiry = time.AfterFunc(max(time.Until(time.Unix(unix, 0).Add(grace)), 0), func() {
		c.closeWith(corralv1.Code_CODE_TOKEN_EXPIRED, "the token expired: reconnect with a new token", 0, false)
	})
}

// stopExpiry stops the expiry timer; the connection is ending.
func (c *conn) stopExpiry() {
	if c.expiry != nil {
		c.expiry.Stop()
	}
}

// refresh handles a Refresh on the reader: verify, then hand the new
// identity to the core and re-arm the expiry (link.refresh). It reports false when the
// connection must finish (the link could not take the frame).
func (c *conn) refresh(f *corralv1.ClientFrame) bool {
	id, code, msg := c.verifyRefresh(f.GetRefresh().GetToken())
	if id == nil {
		c.e.metrics.refuse(refusedRefresh)
		switch code {
		case codeAnswered: // the Refresh hook's failure policy (hooks.go)
			return true
		case codeClosed:
			return false
		}
		c.refuse(f, code, msg, 0)
		return true
	}
	return c.link.refresh(c, f, id)
}

// verifyRefresh checks a refreshed token as the Hello's is checked, and
// that it names the connection's user. It returns the token's identity,
// or nil and the code and text to tell the client. With the Refresh hook
// on, the application's backend answers instead (hooks.go).
func (c *conn) verifyRefresh(token string) (*corralv1.Identity, corralv1.Code, string) {
	ctx, cancel := context.WithTimeout(c.e.ctx, c.e.cfg.HelloTimeout)
	defer cancel()
	if c.e.cfg.Hooks != nil && c.e.cfg.Hooks.Policy().Refresh {
		return c.refreshHook(ctx, token)
	}
	id, err := c.e.cfg.Auth.Authenticate(ctx, token)
	switch {
	case err != nil:
		return nil, corralv1.Code_CODE_UNAUTHENTICATED, "refresh: " + err.Error()
	case id.GetUserId() != c.user:
		return nil, corralv1.Code_CODE_UNAUTHENTICATED, "refresh: the token is for another user; connect again with it"
	}
	return id, 0, ""
}
