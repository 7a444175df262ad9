package core

// RoomsLen reports how many rooms c holds, for tests that they are
// forgotten.
func RoomsLen(c *Core) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.rooms)
}
