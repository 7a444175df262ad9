package sessions

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"math"
	"time"
)

// Position is a place in one room's history.
type Position struct {
	Seq   uint64
	Epoch string
}

// Session is a resumable client session.
type Session struct {
	ID string
	// Token is the secret that resumes the session. A store keeps only its
	// hash; it is set on sessions returned by Create and Resume.
	Token  string
	UserID string
	// Rooms holds the session's rooms and its position in each.
	Rooms   map[string]Position
	Created time.Time
}

var (
	// ErrNotFound means the session is unknown or expired.
	ErrNotFound = errors.New("sessions: not found")
	// ErrTokenMismatch means the resume token is not the session's.
	ErrTokenMismatch = errors.New("sessions: resume token mismatch")
	// ErrUserMismatch means the session belongs to another user.
	ErrUserMismatch = errors.New("sessions: session belongs to another user")
	// ErrStale means a newer resume attempt of the same client instance
	// already holds the session (see [Attempt]).
	ErrStale = errors.New("sessions: a newer resume attempt of this client holds the session")
	// ErrBusy is returned (wrapped) when a store's bound on in-flight work
	// is reached; the call did nothing and may be retried later.
	ErrBusy = errors.New("sessions: busy")

	errClosed = errors.New("sessions: closed")
)

// Attempt names one resume attempt of a client: Instance is random per
// client instance, N grows with each of its dials. A store refuses an
// attempt of the instance that last resumed the session unless its N is
// larger, so a slow attempt the client abandoned cannot take the session
// from a newer one. The zero Attempt is not ordered: it always resumes.
type Attempt struct {
	Instance string
	N        uint32
}

func (a Attempt) ordered() bool { return a.Instance != "" && a.N > 0 }

// Store keeps sessions. All methods may be called concurrently.
type Store interface {
	// Create makes a new session for userID with fresh random id
	// (URL-safe, 128 bits) and token (256 bits).
	Create(ctx context.Context, userID string) (*Session, error)
	// Resume continues session id for userID. It first authorizes, and
	// changes nothing when that fails: the session must exist (else an
	// error wrapping ErrNotFound), token must match (constant-time
	// compare of hashes; ErrTokenMismatch), the session must be userID's
	// (ErrUserMismatch) and at must be newer than the attempt recorded for
	// the same instance (ErrStale). Then it records at, refreshes the TTL
	// and rotates the token: the returned Session.Token is a fresh one.
	// The presented token stays good only until the fresh one is used: a
	// client whose Welcome was lost (the connection broke right after the
	// resume) retries with the token it has, and that retry must not lock
	// it out. So a used token is refused (ErrTokenMismatch) once its
	// successor has resumed, and the successor is refused once the used
	// token resumed again (it never reached its client).
	Resume(ctx context.Context, id, token, userID string, at Attempt) (*Session, error)
	// Touch refreshes the TTL (called periodically while connected and at
	// disconnect). An unknown session is ErrNotFound.
	Touch(ctx context.Context, id string) error
	// TouchLater is Touch for a caller that needs no answer (a
	// disconnect): the store may buffer it and write it with the
	// buffered acks (Flush, within FlushInterval; Close flushes), so that
	// a storm of disconnects costs no round trip and no in-flight slot
	// per session. An unknown session is ignored.
	TouchLater(id string)
	// SetRoom records membership in room at pos, replacing any position
	// and any ack not yet written. An unknown session is ErrNotFound.
	SetRoom(ctx context.Context, id, room string, pos Position) error
	// SetRooms is SetRoom for every room of rooms in one write: a resume
	// or a join of several rooms records their positions with one store
	// call (one round trip on Redis), not one each. No rooms: nothing
	// is written and it returns nil.
	SetRooms(ctx context.Context, id string, rooms map[string]Position) error
	// DeleteRoom removes room from the session, with any ack not yet
	// written. An unknown session is ErrNotFound.
	DeleteRoom(ctx context.Context, id, room string) error
	// Ack records seq as processed in room: the position's seq becomes
	// the highest acked. Acks for unknown sessions or rooms the session
	// is not in are ignored. Implementations may buffer acks and write
	// them in batches; Flush forces it.
	Ack(ctx context.Context, id, room string, seq uint64) error
	// Flush writes buffered acks.
	Flush(ctx context.Context) error
	// Delete removes the session; deleting an unknown one is no error.
	Delete(ctx context.Context, id string) error
	// Close flushes, stops the store's goroutines and waits for them. It
	// is safe to call twice.
	Close() error
}

// Options configures a store. Zero fields mean defaults.
type Options struct {
	// TTL is how long a session lives without Touch or Resume; default
	// 2m. See the package documentation before lowering it.
	TTL time.Duration
	// FlushInterval is how often buffered acks are written (Redis);
	// default 100ms.
	FlushInterval time.Duration
	// MaxInFlight bounds the calls waiting on Redis; past it calls fail at
	// once with an error wrapping ErrBusy. Default 4096.
	MaxInFlight int
	// Prefix starts every Redis key; default "corral".
	Prefix string
	// MaxSessions bounds the sessions a [Memory] holds; default
	// 1,048,576, negative: unbounded. Past it, once the expired ones are
	// dropped, the sixteenth that would expire soonest go (counted, see
	// [Memory.Evicted]): the sessions detached longest, since attached
	// ones are touched every TTL/3. Such a session's resume finds
	// nothing and starts over (the client rejoins, a position it gives
	// is replayed or reset as for any new session). Redis keeps its own.
	MaxSessions int
}

func (o Options) withDefaults() Options {
	if o.TTL <= 0 {
		o.TTL = 2 * time.Minute
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = 100 * time.Millisecond
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 4096
	}
	if o.Prefix == "" {
		o.Prefix = "corral"
	}
	if o.MaxSessions == 0 {
		o.MaxSessions = 1 << 20
	} else if o.MaxSessions < 0 {
		o.MaxSessions = math.MaxInt
	}
	return o
}

// newSecrets returns a fresh session id (128 bits) and resume token
// (256 bits), both URL-safe.
func newSecrets() (id, token string) {
	var b [16 + 32]byte
	_, _ = rand.Read(b[:]) // never fails
	return base64.RawURLEncoding.EncodeToString(b[:16]), base64.RawURLEncoding.EncodeToString(b[16:])
}

func tokenHash(token string) [sha256.Size]byte {
	return sha256.Sum256([]byte(token))
}
