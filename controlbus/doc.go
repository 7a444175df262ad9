// Package controlbus carries the internal API's commands that act on
// every core (RoomService.Subscribe and Unsubscribe) from the core that
// took the call to every other core sharing the store, which applies them
// to its own connections.
//
// It also carries queries (ask.go): [Redis.Ask] asks every other core a
// question (RoomService.Info, Rooms, Connections with every_core) and
// gathers their answers, which each core gives through [Redis.Answer].
//
// A [Bus] is fire and forget: [Bus.Publish] returns how many other cores
// received a command, not what they did with it. [Redis] publishes on one
// channel, "{prefix}:control"; without a shared store a core needs no bus
// (it is the only one).
package controlbus
