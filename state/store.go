package state

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Store keeps the keyed state of many rooms.
type Store interface {
	// Set writes one key; see [Set]. Errors wrap ErrConflict,
	// ErrTooManyKeys, ErrTooLarge or ErrInvalid when nothing was written.
	Set(ctx context.Context, room string, s Set) (Result, error)
	// Delete removes one key. With cas, only when its version is version
	// (ErrConflict otherwise). Deleting a key that does not exist changes
	// nothing: Result.Existed is false and no change is written.
	Delete(ctx context.Context, room, key string, cas bool, version uint64) (Result, error)
	// Snapshot reads the room's whole state and the position it is at.
	Snapshot(ctx context.Context, room string) (Snapshot, error)
	// Since returns the changes after position in epoch, oldest first.
	// When they are not all kept, or epoch is not the room's, or position
	// is ahead of the room, the error wraps ErrTooOld: take a Snapshot
	// instead. The empty epoch at position 0 is the empty state before
	// any write, the Snapshot of a room never written: it continues into
	// whatever epoch the room's first write opens. maxBytes > 0 bounds
	// what is read and returned (each change counts [ChangeSize]): past
	// it the error wraps ErrTooOld too, and the store never held more
	// than the bound and a small batch of changes for the call.
	Since(ctx context.Context, room, epoch string, position uint64, maxBytes int) ([]Change, error)
	// Expire applies the room's due expiries (each a change) and returns
	// the next deadline (zero: none).
	Expire(ctx context.Context, room string) (time.Time, error)
	// Close releases the store's resources. It is safe to call twice.
	Close() error
}

// Set is one write of a key.
type Set struct {
	Key   string
	Value []byte
	// CAS: write only when the key's version is Version now (0: the key
	// must not exist).
	CAS     bool
	Version uint64
	// TTL > 0: the key is removed after this long (a change with
	// Expired). Zero: no deadline (a deadline the key had is dropped).
	TTL time.Duration
}

// Result is the outcome of a write.
type Result struct {
	// Version is the key's version after the write (0 after a delete).
	Version uint64
	// Position is the write's change in the room's order, Epoch the
	// state's epoch.
	Position uint64
	Epoch    string
	// Existed is whether the key existed before the write.
	Existed bool
}

// Entry is one key of a [Snapshot].
type Entry struct {
	Key     string
	Value   []byte
	Version uint64
	// Expires is the key's deadline; zero: none.
	Expires time.Time
}

// Snapshot is a room's whole state at a position.
type Snapshot struct {
	Epoch    string
	Position uint64
	// Entries in key order.
	Entries []Entry
	// NextExpiry is the earliest deadline of a key; zero: none.
	NextExpiry time.Time
}

// Change is one change of a room's state.
type Change struct {
	Position uint64
	Key      string
	// Value and Version are the key's after a set.
	Value   []byte
	Version uint64
	// Deleted: the key was removed (Expired: by its TTL). Version is then
	// the version the key had when it was removed.
	Deleted bool
	Expired bool
	Expires time.Time
}

// Limits bound one room's state. A zero field means the store's default.
type Limits struct {
	// MaxKeys is how many keys a room holds; a Set of a new key past it
	// fails with ErrTooManyKeys. Default 1,000.
	MaxKeys int
	// MaxValue is the largest value in bytes (ErrTooLarge). Default
	// 64 KiB.
	MaxValue int
	// MaxChanges is how many of the newest changes are kept for Since.
	// Default 1,000.
	MaxChanges int
}

func (l Limits) withDefaults(d Limits) Limits {
	if l.MaxKeys <= 0 {
		l.MaxKeys = d.MaxKeys
	}
	if l.MaxValue <= 0 {
		l.MaxValue = d.MaxValue
	}
	if l.MaxChanges <= 0 {
		l.MaxChanges = d.MaxChanges
	}
	return l
}

var defaultLimits = Limits{MaxKeys: 1000, MaxValue: 64 << 10, MaxChanges: 1000}

// MaxKey is the longest key in bytes.
const MaxKey = 200

var (
	// ErrConflict: a compare-and-set found another version; nothing was
	// written.
	ErrConflict = errors.New("state: version conflict")
	// ErrTooManyKeys: the room holds its most keys; nothing was written.
	ErrTooManyKeys = errors.New("state: too many keys")
	// ErrTooLarge: the value is larger than the room's bound.
	ErrTooLarge = errors.New("state: value too large")
	// ErrTooOld: the changes asked for are not all kept, or belong to
	// another epoch: read a Snapshot.
	ErrTooOld = errors.New("state: position too old")
	// ErrInvalid: an empty room or key, a key too long or not UTF-8.
	ErrInvalid = errors.New("state: invalid argument")
)

var errClosed = errors.New("state: closed")

func checkKey(room, key string) error {
	if room == "" {
		return fmt.Errorf("%w: empty room", ErrInvalid)
	}
	if key == "" || len(key) > MaxKey || !utf8.ValidString(key) {
		return fmt.Errorf("%w: key must be 1 to %d bytes of UTF-8", ErrInvalid, MaxKey)
	}
	for _, c := range []byte(key) {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w: control character in key", ErrInvalid)
		}
	}
	return nil
}

// ChangeSize is what a change counts against Since's maxBytes: its key,
// its value and 32 bytes for the rest.
func ChangeSize(c Change) int { return len(c.Key) + len(c.Value) + 32 }
