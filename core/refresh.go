package core

import (
	"context"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// refresh gives a live session the identity of the token its client
// refreshed (EdgeFrame.refresh; the edge verified the token and that it
// names the session's user). The new grants apply at once: the session
// leaves every room they no longer allow, each with Left CODE_FORBIDDEN,
// through the same check that enforces a revocation. Then the client
// gets Refreshed, so every Left comes before it.
//
// It runs on the connection's worker, in order with its other frames: a
// join after the refresh is checked against the new grants.
func (c *Core) refresh(ctx context.Context, s *session, id *corralv1.Identity) {
	if id.GetUserId() != s.UserID() {
		c.metrics.refuse(refusedRefreshUser)
		s.SendErr(corralv1.Code_CODE_UNAUTHENTICATED, "refresh: the token is for another user", "", "")
		return
	}
	s.SetIdentity(id)
	c.adm.enforceSession(ctx, s, refusedRefreshGrant, "the refreshed token does not grant this room")
	s.SendTo(&corralv1.ServerFrame{Kind: &corralv1.ServerFrame_Refreshed{Refreshed: &corralv1.Refreshed{
		ExpiresUnix: id.GetExpiresUnix(),
	}}})
}
