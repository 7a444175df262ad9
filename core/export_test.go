package core

// RoomsLen reports how many rooms c holds, for tests that they are
// forgotten.
func RoomsLen(c *Core) int {
	return c.rooms.len()
}
