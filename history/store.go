package history

import (
	"context"
	"errors"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// Store keeps the history of many rooms. All methods may be called
// concurrently.
//
// Append keeps msg: the caller must not modify it afterwards. Messages in a
// [Page] may be shared with the store and other readers and must not be
// modified.
type Store interface {
	// Append atomically assigns the room's next seq to msg (sets msg.Seq;
	// msg.Room must equal room), stores it, trims and publishes it (Redis).
	// With a non-empty dedupeKey already seen within the window, nothing is
	// stored and the first seq is returned with Duplicate=true.
	Append(ctx context.Context, room string, msg *corralv1.Message, dedupeKey string) (AppendResult, error)
	// Read returns one page (see Query).
	Read(ctx context.Context, q Query) (Page, error)
	// ReadMany runs several queries in one round trip (one pipeline), for
	// resume. Pages are in the order of qs.
	ReadMany(ctx context.Context, qs []Query) ([]Page, error)
	// State reports a room's epoch and seq bounds, creating the epoch when
	// the room has none ([Memory] keeps a new epoch only for a held room:
	// see there).
	State(ctx context.Context, room string) (State, error)
	// Close releases the store's resources. It is safe to call twice.
	Close() error
}

// LossFence is implemented by a store that can lose acknowledged messages
// without losing the room's epoch: [Redis], whose replication is
// asynchronous, after a failover to a replica that lagged. A caller that
// knows a room's position (the epoch and the newest seq it appended or
// delivered) passes it, so that the store moves the room to a new epoch
// rather than reuse a seq for another message: the caller then sees the
// epoch change and resets the room's members.
type LossFence interface {
	// AppendKnown is [Store.Append] by a caller that saw seq known.Last in
	// epoch known.Epoch (zero: nothing known). When the room's history in
	// that epoch ends below known.Last, the message opens a new epoch.
	AppendKnown(ctx context.Context, room string, msg *corralv1.Message, dedupeKey string, known State) (AppendResult, error)
	// Fence moves the room to a new epoch when its history in known.Epoch
	// ends below known.Last, and returns the room's epoch and last seq.
	// Known.First is ignored. It never creates a history.
	Fence(ctx context.Context, room string, known State) (State, error)
}

// Limits are one room's retention: how many messages it keeps and how long
// its history lives after its last message. A zero field means the
// store's default (MemoryOptions, RedisOptions).
type Limits struct {
	MaxLen int
	TTL    time.Duration
}

// MaxPage is the most messages one [Page] holds.
const MaxPage = 1000

// Query selects one page of a room's history.
//
// Forward (Reverse false) returns messages with seq > After, oldest first.
// Reverse returns messages with seq < Before (0 means from the newest),
// newest first. Limit <= 0 or > MaxPage means MaxPage. More reports whether
// messages remain beyond the page in the direction of reading.
//
// Trimmed messages are not returned: a forward page may start above
// After+1; compare with [State].First to detect the gap.
//
// MaxBytes > 0 bounds a page in bytes as well: its messages' encoded sizes
// (proto.Size, the bytes the store keeps and a reader decodes) add up to at
// most MaxBytes, except that a page that has messages to give holds at
// least one, so that a reader always advances; More is then set. A replay
// of large messages is read in pages a connection can hold, not in pages
// of MaxPage of the largest messages (~65 MiB).
//
// Peek reads without writing: a room that has no history (no epoch) reads
// as an empty page with an empty Epoch, and no epoch is created for it.
// Reads for a caller that names rooms freely (the internal API) peek, so
// that made-up room names do not grow the store.
type Query struct {
	Room      string
	After     uint64
	Before    uint64
	Reverse   bool
	Limit     int
	MaxBytes  int
	Peek      bool
	Assembled bool
}

// State describes a room's history.
type State struct {
	// Epoch names this unbroken history of the room.
	Epoch string
	// First is the oldest retained seq, 0 when none is retained.
	First uint64
	// Last is the newest assigned seq, 0 before the first append.
	Last uint64
}

// Page is one page of a room's history with the state it was read at.
type Page struct {
	State
	Messages []*corralv1.Message
	More     bool
	// Next, with Query.Assembled, is the seq of the last message the page
	// read (the highest forward, the lowest reverse; 0 when it read none):
	// the next page in the same direction is After (Before) Next.
	Next uint64
}

// AppendResult is the outcome of [Store.Append].
type AppendResult struct {
	Seq       uint64
	Epoch     string
	Duplicate bool
}

// Sender is a publish's place in its sender's sequence of publishes to a
// room (corral.v1.Publish.seq): Stream names the sequence (the core uses
// the session id), Seq is the place, from 1. The zero Sender is none.
type Sender struct {
	Stream string
	Seq    uint64
}

// SenderOrder is implemented by the stores that keep each sender's order in
// a room ([Memory] and [Redis]): the check and the append are one atomic
// step, so the order holds whichever process appends, and survives what
// the history survives (a process restart; a Redis failover loses the
// mark only with the messages it describes).
type SenderOrder interface {
	// AppendOrdered is [LossFence.AppendKnown] ([Store.Append] for a store
	// that is no LossFence) for a publish at sender's place. dedupeKey
	// must not be empty. A duplicate is answered first, as by Append.
	// Otherwise, when the store remembers the stream's last stored place
	// and it is below sender.Seq-1, nothing is stored and the error wraps
	// [ErrOutOfOrder]. A place at or below the remembered one starts the
	// stream again (a new client instance of the session). The mark is
	// remembered for the dedupe window after the stream's last append: the
	// state is bounded by the streams that appended within the window.
	AppendOrdered(ctx context.Context, room string, msg *corralv1.Message, dedupeKey string, sender Sender, known State) (AppendResult, error)
}

// ErrOutOfOrder is returned (wrapped) by [SenderOrder.AppendOrdered] when
// the sender's previous publish is not stored; nothing was stored.
var ErrOutOfOrder = errors.New("history: out of order")

// ErrBusy is returned (wrapped) when a store's bound on in-flight work is
// reached; the call did nothing and may be retried later.
var ErrBusy = errors.New("history: busy")

var errClosed = errors.New("history: closed")

// cutBytes is how many of a page's messages, of sizes size(0..n-1), fit
// maxBytes (see [Query].MaxBytes): all of them when maxBytes <= 0, and at
// least one.
func cutBytes(n, maxBytes int, size func(int) int) int {
	if maxBytes <= 0 {
		return n
	}
	total := 0
	for i := range n {
		total += size(i)
		if total > maxBytes && i > 0 {
			return i
		}
	}
	return n
}

func pageLimit(n int) int {
	if n <= 0 || n > MaxPage {
		return MaxPage
	}
	return n
}
