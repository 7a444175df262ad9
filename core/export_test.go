package core

import csession "github.com/corral-rt/corral/core/session"

// RoomsLen reports how many rooms c holds, for tests that they are
// forgotten.
func RoomsLen(c *Core) int {
	return c.rooms.len()
}

// testSession is a session of user, attached nowhere, for tests that
// drive the core's parts without a link.
func testSession(id, user string) *session {
	return csession.New(id, user, endpoint{}, nil, nil, nil, "")
}
