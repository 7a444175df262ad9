package config

// Default bursts of the per-connection buckets the queues are sized by
// when a rate is unlimited (an unlimited bucket has no burst to size by;
// the largest the defaults allow is taken).
const (
	defaultPublishBurst = 100
	defaultSignalBurst  = 200
)

// SenderBurstBytes is what one connection may send at once within e's
// limits, as the server frames it makes: its publish burst and its
// signal burst, each of the largest frame with its
// server frame's fields (room, sender, id, seq: 1 KiB), and 1 MiB for a
// room's presence and signal ticks. It is the one figure the queues that
// hold a sender's traffic are sized by: a connection's send queue at the
// edge (edge.Config.QueueBytes) and its backlog at the core
// (conn-backlog-bytes, whose default holds it at the default limits:
// TestBacklogHoldsABurst). A queue smaller than it closes a reader, or
// the sender itself, for traffic the limits allow (4001 or 4105): 100
// publishes and 64 signals of 60 KB passed the 7.4 MiB send queue of a
// reader paused through them, and the 8 MiB backlog of a sender whose
// core wrote to Redis (TestWorstTrafficKeepsReaders). About 20 MiB at
// the defaults.
func (e *Edge) SenderBurstBytes() int {
	const frameFields, ticks = 1 << 10, 1 << 20
	publishes, signals := e.MessageBurst, e.SignalBurst
	if !e.MessageRate.Limited() {
		publishes = max(publishes, defaultPublishBurst)
	}
	if !e.SignalRate.Limited() {
		signals = max(signals, defaultSignalBurst)
	}
	readLimit := e.ReadLimit
	if readLimit <= 0 {
		readLimit = 64 << 10
	}
	return (max(publishes, 1)+max(signals, 1))*int(readLimit+frameFields) + ticks
}
