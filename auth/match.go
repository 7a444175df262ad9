package auth

import "github.com/corral-rt/corral/roompattern"

// Match reports whether room is matched by any pattern in grants.
//
// Deprecated: use roompattern.Match.
func Match(grants []string, room string) bool { return roompattern.Match(grants, room) }
