// Package api is the core's internal API: the RoomService handlers
// (Publish, Broadcast, Batch, History, Members, Disconnect, Grant,
// Revoke, Events, Rooms, Info, Connections, Signals, Subscribe,
// Unsubscribe). Each handler checks its request, asks the core for what
// it holds or does, merges the other cores' answers when every_core asks
// (package core/everycore), and converts errors at the RPC boundary: a
// caller gets a code and a fixed text, the log the store's error.
//
// A Service sees the core through [Core], an interface core.New
// implements and passes in [Options]; it never reads the core's tables
// itself. The commands of Subscribe and Unsubscribe for the other cores
// go out and come in here (the control bus); what they do to this core's
// connections is the core's ([Core.SubscribeHere], [Core.UnsubscribeHere]).
//
// Concurrency: a Service is safe for concurrent use. Its options are
// read-only after New; every call works on its own request and on what
// the core hands it, which is the caller's to keep.
package api
