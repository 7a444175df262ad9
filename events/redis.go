package events

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
	"google.golang.org/protobuf/proto"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

//go:embed add.lua
var addLua string

var addScript = rueidis.NewLuaScript(addLua)

// RedisOptions configures [NewRedis]. Zero fields mean defaults.
type RedisOptions struct {
	// MaxLen is how many events the stream retains at least; default
	// 100000. Trimming is approximate (MAXLEN ~).
	MaxLen int
	// Prefix starts the stream's key, "<prefix>:events"; default "corral".
	Prefix string
}

// Redis is a [Log] in one Redis Stream, shared by every process that uses
// the same Redis and Prefix. Reads that wait use XREAD BLOCK, which the
// rueidis client runs on its pool of connections for blocking commands.
// All methods may be called concurrently.
//
// Stream entries are "n" <number>, "x" <epoch>, then either "e" <Event>
// (member events, from Append) or "m" <Message> (message events, written
// by history/append.lua). The epoch is a random id chosen when the stream
// is created, so a stream that was deleted and created again (a flushed
// Redis) is told apart from the one a position came from. A position is
// "<epoch>_<entry id>.<number>".
type Redis struct {
	client rueidis.Client
	key    string
	maxLen int
}

// NewRedis returns the log in client's Redis. The caller keeps client and
// closes it after the log is no longer used.
func NewRedis(client rueidis.Client, opts RedisOptions) *Redis {
	if opts.MaxLen <= 0 {
		opts.MaxLen = 100000
	}
	if opts.Prefix == "" {
		opts.Prefix = "corral"
	}
	return &Redis{client: client, key: opts.Prefix + ":events", maxLen: opts.MaxLen}
}

// Key is the stream's key, for stores that commit message events into it.
func (r *Redis) Key() string { return r.key }

// MaxLen is the stream's trimming length, for stores that commit message
// events into it.
func (r *Redis) MaxLen() int { return r.maxLen }

// Append implements [Log.Append]: one script call for all of evs.
func (r *Redis) Append(ctx context.Context, evs []*corralv1.Event) error {
	if len(evs) == 0 {
		return nil
	}
	args := make([]string, 3, 3+len(evs))
	args[0], args[1], args[2] = strconv.Itoa(r.maxLen), newEpoch(), "e"
	for _, ev := range evs {
		b, err := proto.Marshal(ev)
		if err != nil {
			return fmt.Errorf("events: append: %w", err)
		}
		args = append(args, string(b))
	}
	if err := addScript.Exec(ctx, r.client, []string{r.key}, args).Error(); err != nil {
		return fmt.Errorf("events: append: %w", err)
	}
	return nil
}

// AppendMessage commits the event of a message already in history, given
// the message's canonical encoding (with its seq). It is for a history
// store that cannot commit the event in its own append script: on Redis
// Cluster the stream's key and a room's keys live in different slots. Such
// an event is then not atomic with the append: it is lost if the process
// dies between the two, and two rooms' (or one room's) concurrent appends
// may enter the log in another order than their seqs.
func (r *Redis) AppendMessage(ctx context.Context, msg []byte) error {
	args := []string{strconv.Itoa(r.maxLen), newEpoch(), "m", string(msg)}
	if err := addScript.Exec(ctx, r.client, []string{r.key}, args).Error(); err != nil {
		return fmt.Errorf("events: append message: %w", err)
	}
	return nil
}

// Tail implements [Log.Tail].
func (r *Redis) Tail(ctx context.Context) (string, error) {
	es, err := r.client.Do(ctx, r.client.B().Xrevrange().Key(r.key).End("+").Start("-").Count(1).Build()).AsXRange()
	if err != nil {
		return "", fmt.Errorf("events: tail: %w", err)
	}
	if len(es) == 0 {
		// No log yet: its first event, whatever its epoch, comes next.
		return redisPosition("", "0-0", 0), nil
	}
	n, epoch, err := entryHeader(es[0])
	if err != nil {
		return "", fmt.Errorf("events: tail: %w", err)
	}
	return redisPosition(epoch, es[0].ID, n), nil
}

// Head implements [Log.Head].
func (r *Redis) Head(ctx context.Context) (string, error) {
	es, err := r.client.Do(ctx, r.client.B().Xrange().Key(r.key).Start("-").End("+").Count(1).Build()).AsXRange()
	if err != nil {
		return "", fmt.Errorf("events: head: %w", err)
	}
	if len(es) == 0 {
		return redisPosition("", "0-0", 0), nil
	}
	n, epoch, err := entryHeader(es[0])
	if err != nil {
		return "", fmt.Errorf("events: head: %w", err)
	}
	// Reading from the stream's start must find event n first.
	return redisPosition(epoch, "0-0", n-1), nil
}

func redisPosition(epoch, id string, n uint64) string {
	return position{where: epoch + "_" + id, n: n}.String()
}

// Read implements [Log.Read].
func (r *Redis) Read(ctx context.Context, after string, limit int, wait time.Duration) ([]*corralv1.Event, error) {
	// id and n are where to read after; epoch is the log's, "" when not
	// known yet; check whether the first event must be number n+1.
	id, n, epoch, check := "0-0", uint64(0), "", false
	if after != "" {
		p, err := parsePosition(after)
		var ok bool
		if err == nil {
			epoch, id, ok = strings.Cut(p.where, "_")
		}
		if !ok || !isStreamID(id) {
			return nil, fmt.Errorf("events: read after %q: %w", after, ErrBadPosition)
		}
		n, check = p.n, true
	}
	cmd := r.client.B().Xread().Count(int64(readLimit(limit)))
	var res rueidis.RedisResult
	if wait > 0 {
		ms := max(wait.Milliseconds(), 1)
		res = r.client.Do(ctx, cmd.Block(ms).Streams().Key(r.key).Id(id).Build().UnblockOnCancel())
	} else {
		res = r.client.Do(ctx, cmd.Streams().Key(r.key).Id(id).Build())
	}
	streams, err := res.AsXRead()
	if rueidis.IsRedisNil(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("events: read after %q: %w", after, err)
	}
	entries := streams[r.key]
	out := make([]*corralv1.Event, 0, len(entries))
	for i, e := range entries {
		en, eepoch, err := entryHeader(e)
		if err != nil {
			return nil, fmt.Errorf("events: read after %q: %w", after, err)
		}
		if check || i > 0 {
			if epoch != "" && eepoch != epoch {
				return nil, fmt.Errorf("events: read after %q: the log was reset: %w", after, ErrGap)
			}
			if en != n+1 {
				return nil, fmt.Errorf("events: read after %q: next event is number %d, want %d: %w", after, en, n+1, ErrGap)
			}
		}
		n, epoch = en, eepoch
		ev, err := decodeEntry(e)
		if err != nil {
			return nil, fmt.Errorf("events: read entry %s: %w", e.ID, err)
		}
		ev.Position = redisPosition(epoch, e.ID, n)
		out = append(out, ev)
	}
	return out, nil
}

// entryHeader returns an entry's number and epoch.
func entryHeader(e rueidis.XRangeEntry) (uint64, string, error) {
	n, err := strconv.ParseUint(e.FieldValues["n"], 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("entry %s has no number", e.ID)
	}
	return n, e.FieldValues["x"], nil
}

// newEpoch returns a random id for a new log.
func newEpoch() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}

func decodeEntry(e rueidis.XRangeEntry) (*corralv1.Event, error) {
	if b, ok := e.FieldValues["m"]; ok {
		msg := new(corralv1.Message)
		if err := proto.Unmarshal([]byte(b), msg); err != nil {
			return nil, err
		}
		return MessageEvent(msg), nil
	}
	ev := new(corralv1.Event)
	if err := proto.Unmarshal([]byte(e.FieldValues["e"]), ev); err != nil {
		return nil, err
	}
	return ev, nil
}

// isStreamID reports whether s looks like "<ms>-<seq>".
func isStreamID(s string) bool {
	dash := -1
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '-' && dash < 0 && i > 0:
			dash = i
		case c < '0' || c > '9':
			return false
		}
	}
	return dash > 0 && dash < len(s)-1
}
