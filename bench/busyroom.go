package bench

import "time"

// NewBusyRoom returns the busy room of issue 19: one room of 200 members,
// 20 of whom publish reliable messages at 20 Hz each (400 posts/s, 80,000
// deliveries/s) for 20 s. It is chat-burst with these figures, under its
// own name; every chat-burst flag applies.
func NewBusyRoom() *ChatBurst {
	c := NewChatBurst()
	c.Sockets, c.Rooms, c.Senders, c.Rate = 200, 1, 20, 400
	c.RampUp, c.Duration = 0, 20*time.Second
	c.SLO = 100 * time.Millisecond
	c.name = "busy-room"
	c.describe = `A busy room (issue 19): 1 room x 200 members, 20 publishers x 20 Hz reliable publishes.

chat-burst with --sockets 200 --rooms 1 --senders 20 --rate 400 --ramp-up 0
--duration 20s: 80,000 deliveries/s, every member's socket receiving a
message every 2.5 ms. It measures the cost of a socket that is never idle
(write coalescing); quote it with --client standard and --pid.`
	return c
}
