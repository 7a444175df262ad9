package events

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

// Log is an event log. All methods may be called concurrently.
//
// Events passed to Append and returned by Read are shared with the log and
// other readers: they must not be modified.
type Log interface {
	// Append commits member events, in order. Message events are
	// committed by the history store with their message.
	Append(ctx context.Context, evs []*corralv1.Event) error
	// Tail returns the position of the newest event: a Read after it
	// returns only events committed later.
	Tail(ctx context.Context) (string, error)
	// Head returns the position just before the oldest retained event: a
	// Read after it returns every retained event, or ErrGap if that one
	// is trimmed meanwhile.
	Head(ctx context.Context) (string, error)
	// Read returns at most limit events after the position after, oldest
	// first, with their Position set; after "" means from the oldest
	// retained event. When there is none yet, Read waits up to wait for
	// one, and returns none (and no error) when wait passes. It returns an
	// error wrapping ErrGap when events after the position are no longer
	// held, and ErrBadPosition when the position is not one of this kind
	// of log.
	Read(ctx context.Context, after string, limit int, wait time.Duration) ([]*corralv1.Event, error)
}

// Immediate is implemented by a Log whose Append never waits (Memory): the
// core's event writer then appends without a deadline context per batch.
type Immediate interface {
	Log
	Immediate()
}

var (
	// ErrGap means the log no longer holds the events after a position:
	// they were trimmed, or the log was reset (a restart of an in-memory
	// log, a flushed Redis).
	ErrGap = errors.New("events: position no longer retained")
	// ErrBadPosition means a position is malformed or from another kind of
	// log.
	ErrBadPosition = errors.New("events: malformed position")
)

// MaxRead is the most events one Read returns.
const MaxRead = 1000

func readLimit(n int) int {
	if n <= 0 || n > MaxRead {
		return MaxRead
	}
	return n
}

// position is a parsed position: where (an epoch or a stream id) and the
// event number.
type position struct {
	where string
	n     uint64
}

func (p position) String() string {
	return p.where + "." + strconv.FormatUint(p.n, 10)
}

func parsePosition(s string) (position, error) {
	i := strings.LastIndexByte(s, '.')
	if i <= 0 {
		return position{}, ErrBadPosition
	}
	n, err := strconv.ParseUint(s[i+1:], 10, 64)
	if err != nil {
		return position{}, ErrBadPosition
	}
	return position{where: s[:i], n: n}, nil
}

// MessageEvent is the event of a committed message.
func MessageEvent(msg *corralv1.Message) *corralv1.Event {
	return &corralv1.Event{
		Room:   msg.GetRoom(),
		TimeMs: msg.GetTimeMs(),
		Kind:   &corralv1.Event_Message{Message: msg},
	}
}
