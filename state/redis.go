package state

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/corral-rt/corral/internal/tryagain"
)

//go:embed prelude.lua
var preludeLua string

//go:embed set.lua
var setLua string

//go:embed delete.lua
var deleteLua string

//go:embed snapshot.lua
var snapshotLua string

//go:embed since.lua
var sinceLua string

//go:embed expire.lua
var expireLua string

var (
	setScript      = rueidis.NewLuaScript(preludeLua + setLua)
	deleteScript   = rueidis.NewLuaScript(preludeLua + deleteLua)
	snapshotScript = rueidis.NewLuaScript(preludeLua + snapshotLua)
	sinceScript    = rueidis.NewLuaScript(preludeLua + sinceLua)
	expireScript   = rueidis.NewLuaScript(preludeLua + expireLua)
)

// RedisOptions configures [NewRedis]. Zero fields mean defaults.
type RedisOptions struct {
	// Prefix of every key; default "corral".
	Prefix string
	// TTL is how long a room's state lives after its last write; default
	// 24h.
	TTL time.Duration
	// Limits gives a room its bounds, as MemoryOptions.Limits.
	Limits func(room string) Limits
	// Now is the clock deadlines are set and compared on; default
	// time.Now. Every process sharing the Redis should agree on it.
	Now func() time.Time
	// Channel names the pub/sub channel a room's changes are published
	// on; nil: the store's own ("<prefix>:{<room>}:state:ch"). Set to the
	// room's message channel (history.Redis.Channel), a process follows a
	// room with one subscription: the changes are tagged publications on
	// it ([IsChange]), read from the messages' subscription
	// (history.Subscription.OnTagged), not from a [Feed]. It must name a
	// channel in the room's hash slot ("{<room>}").
	Channel func(room string) string
}

// Redis is a [Store] in Redis: per room a hash of the keys, a sorted set
// of their deadlines, a stream of changes and a meta hash, every
// operation one script (see the package doc).
type Redis struct {
	client  rueidis.Client
	prefix  string
	ttl     string
	limits  func(room string) Limits
	now     func() time.Time
	sharded string
	channel func(room string) string // nil: the store's own
	closed  atomic.Bool
}

// NewRedis returns a store on client. Close does not close client.
func NewRedis(client rueidis.Client, opts RedisOptions) *Redis {
	if opts.Prefix == "" {
		opts.Prefix = "corral"
	}
	if opts.TTL <= 0 {
		opts.TTL = 24 * time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &Redis{client: client, prefix: opts.Prefix, ttl: strconv.FormatInt(opts.TTL.Milliseconds(), 10),
		limits: opts.Limits, now: opts.Now, sharded: "0", channel: opts.Channel}
	if client.Mode() == rueidis.ClientModeCluster {
		r.sharded = "1" // publish with SPUBLISH, as package history does
	}
	return r
}

func (r *Redis) limitsOf(room string) Limits {
	if r.limits == nil {
		return defaultLimits
	}
	return r.limits(room).withDefaults(defaultLimits)
}

// Channel is the pub/sub channel of room's changes; [ParseChange] reads
// its publications.
func (r *Redis) Channel(room string) string {
	if r.channel != nil {
		return r.channel(room)
	}
	return r.prefix + ":{" + room + "}:state:ch"
}

// SharesChannel reports whether the changes ride another channel
// (RedisOptions.Channel): the reader of that channel brings them.
func (r *Redis) SharesChannel() bool { return r.channel != nil }

// run runs script on room's keys with the prelude's arguments and extra.
func (r *Redis) run(ctx context.Context, script *rueidis.Lua, room string, l Limits, extra ...string) (rueidis.RedisResult, error) {
	if r.closed.Load() {
		return rueidis.RedisResult{}, errClosed
	}
	base := r.prefix + ":{" + room + "}:state"
	keys := []string{base, base + ":ttl", base + ":log", base + ":meta"}
	var e [8]byte
	_, _ = rand.Read(e[:]) // never fails
	args := append([]string{strconv.FormatInt(r.now().UnixMilli(), 10), strconv.Itoa(l.MaxChanges), r.ttl,
		r.Channel(room), r.sharded, hex.EncodeToString(e[:])}, extra...)
	// A slot in migration refuses a script on keys split between two
	// nodes (TRYAGAIN): it did not run, so it is run again.
	var res rueidis.RedisResult
	err := tryagain.Do(ctx, func() error {
		res = script.Exec(ctx, r.client, keys, args)
		return res.Error()
	})
	return res, err
}

func ms(t int64) time.Time {
	if t == 0 {
		return time.Time{}
	}
	return time.UnixMilli(t)
}

// Set implements [Store.Set].
func (r *Redis) Set(ctx context.Context, room string, s Set) (Result, error) {
	fail := func(err error) (Result, error) {
		return Result{}, fmt.Errorf("state: set %q in %q: %w", s.Key, room, err)
	}
	if err := checkKey(room, s.Key); err != nil {
		return fail(err)
	}
	l := r.limitsOf(room)
	if len(s.Value) > l.MaxValue {
		return fail(fmt.Errorf("%d bytes, at most %d: %w", len(s.Value), l.MaxValue, ErrTooLarge))
	}
	cas := "0"
	if s.CAS {
		cas = "1"
	}
	ttl := int64(0)
	if s.TTL > 0 {
		ttl = max(s.TTL.Milliseconds(), 1)
	}
	res, err := r.run(ctx, setScript, room, l, s.Key, string(s.Value), cas,
		strconv.FormatUint(s.Version, 10), strconv.FormatInt(ttl, 10), strconv.Itoa(l.MaxKeys))
	if err != nil {
		return fail(err)
	}
	a, err := res.ToArray()
	if err != nil || len(a) < 3 {
		return fail(fmt.Errorf("reply %v: %w", a, err))
	}
	code, _ := a[0].AsInt64()
	n, _ := a[1].AsInt64()
	epoch, _ := a[2].ToString()
	switch code {
	case -1:
		return fail(fmt.Errorf("version %d, not %d: %w", n, s.Version, ErrConflict))
	case -2:
		return fail(fmt.Errorf("%d keys: %w", l.MaxKeys, ErrTooManyKeys))
	}
	existed, _ := a[3].AsInt64()
	return Result{Version: uint64(code), Position: uint64(n), Epoch: epoch, Existed: existed == 1}, nil
}

// Delete implements [Store.Delete].
func (r *Redis) Delete(ctx context.Context, room, key string, cas bool, version uint64) (Result, error) {
	fail := func(err error) (Result, error) {
		return Result{}, fmt.Errorf("state: delete %q in %q: %w", key, room, err)
	}
	if err := checkKey(room, key); err != nil {
		return fail(err)
	}
	c := "0"
	if cas {
		c = "1"
	}
	res, err := r.run(ctx, deleteScript, room, r.limitsOf(room), key, c, strconv.FormatUint(version, 10))
	if err != nil {
		return fail(err)
	}
	a, err := res.ToArray()
	if err != nil || len(a) < 3 {
		return fail(fmt.Errorf("reply %v: %w", a, err))
	}
	code, _ := a[0].AsInt64()
	n, _ := a[1].AsInt64()
	epoch, _ := a[2].ToString()
	if code == -1 {
		return fail(fmt.Errorf("version %d, not %d: %w", n, version, ErrConflict))
	}
	return Result{Position: uint64(n), Epoch: epoch, Existed: code == 1}, nil
}

// Snapshot implements [Store.Snapshot].
func (r *Redis) Snapshot(ctx context.Context, room string) (Snapshot, error) {
	fail := func(err error) (Snapshot, error) {
		return Snapshot{}, fmt.Errorf("state: snapshot of %q: %w", room, err)
	}
	if room == "" {
		return fail(fmt.Errorf("%w: empty room", ErrInvalid))
	}
	res, err := r.run(ctx, snapshotScript, room, r.limitsOf(room))
	if err != nil {
		return fail(err)
	}
	a, err := res.ToArray()
	if err != nil || len(a) < 4 {
		return fail(fmt.Errorf("reply %v: %w", a, err))
	}
	var s Snapshot
	s.Epoch, _ = a[0].ToString()
	pos, _ := a[1].AsInt64()
	next, _ := a[2].AsInt64()
	s.Position, s.NextExpiry = uint64(pos), ms(next)
	kv, err := a[3].ToArray()
	if err != nil {
		return fail(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		k, _ := kv[i].ToString()
		v, _ := kv[i+1].ToString()
		e, err := parseEntry(k, v)
		if err != nil {
			return fail(err)
		}
		s.Entries = append(s.Entries, e)
	}
	slices.SortFunc(s.Entries, func(a, b Entry) int { return strings.Compare(a.Key, b.Key) })
	return s, nil
}

// parseEntry reads "<version> <expires ms> <value>".
func parseEntry(key, v string) (Entry, error) {
	ver, rest, ok1 := strings.Cut(v, " ")
	exp, val, ok2 := strings.Cut(rest, " ")
	n, err1 := strconv.ParseUint(ver, 10, 64)
	x, err2 := strconv.ParseInt(exp, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil {
		return Entry{}, fmt.Errorf("malformed entry of %q", key)
	}
	return Entry{Key: key, Value: []byte(val), Version: n, Expires: ms(x)}, nil
}

// Since implements [Store.Since].
func (r *Redis) Since(ctx context.Context, room, epoch string, position uint64, maxBytes int) ([]Change, error) {
	fail := func(err error) ([]Change, error) {
		return nil, fmt.Errorf("state: changes of %q after %s/%d: %w", room, epoch, position, err)
	}
	if room == "" {
		return fail(fmt.Errorf("%w: empty room", ErrInvalid))
	}
	res, err := r.run(ctx, sinceScript, room, r.limitsOf(room), epoch, strconv.FormatUint(position, 10), strconv.Itoa(max(maxBytes, 0)))
	if err != nil {
		return fail(err)
	}
	a, err := res.ToArray()
	if err != nil || len(a) < 3 {
		return fail(fmt.Errorf("reply %v: %w", a, err))
	}
	switch code, _ := a[0].AsInt64(); code {
	case -1:
		now, _ := a[1].ToString()
		pos, _ := a[2].AsInt64()
		return fail(fmt.Errorf("now %s/%d: %w", now, pos, ErrTooOld))
	case -2:
		return fail(fmt.Errorf("more than %d bytes: %w", maxBytes, ErrTooOld))
	}
	entries, err := a[3].ToArray()
	if err != nil {
		return fail(err)
	}
	out := make([]Change, 0, len(entries))
	for _, e := range entries {
		c, err := parseLogEntry(e)
		if err != nil {
			return fail(err)
		}
		out = append(out, c)
	}
	return out, nil
}

// parseLogEntry reads one XRANGE entry: [id, [field, value, ...]].
func parseLogEntry(e rueidis.RedisMessage) (Change, error) {
	pair, err := e.ToArray()
	if err != nil || len(pair) != 2 {
		return Change{}, fmt.Errorf("malformed change: %v", err)
	}
	id, _ := pair[0].ToString()
	fields, err := pair[1].AsStrMap()
	if err != nil {
		return Change{}, err
	}
	pos, err := strconv.ParseUint(strings.TrimSuffix(id, "-0"), 10, 64)
	if err != nil {
		return Change{}, fmt.Errorf("malformed change id %q", id)
	}
	return changeOf(pos, fields["d"], fields["n"], fields["x"], fields["k"], fields["v"])
}

func changeOf(pos uint64, kind, version, expires, key, value string) (Change, error) {
	n, err1 := strconv.ParseUint(version, 10, 64)
	x, err2 := strconv.ParseInt(expires, 10, 64)
	if err1 != nil || err2 != nil || (kind != "0" && kind != "1" && kind != "2") {
		return Change{}, fmt.Errorf("malformed change %d", pos)
	}
	c := Change{Position: pos, Key: key, Version: n, Expires: ms(x), Deleted: kind != "0", Expired: kind == "2"}
	if kind == "0" {
		c.Value = []byte(value)
	}
	return c, nil
}

// errPublication is returned by ParseChange for bytes that are not a
// change publication.
var errPublication = errors.New("state: malformed change publication")

// ChangeTag is the first byte of a change publication: it tells one from
// a room's messages when both share a channel (RedisOptions.Channel).
const ChangeTag = 0

// IsChange reports whether a publication is a change ([ChangeTag]).
func IsChange(b []byte) bool { return len(b) > 0 && b[0] == ChangeTag }

// ParseChange reads a publication of [Redis.Channel]: the change and the
// epoch it belongs to.
func ParseChange(b []byte) (epoch string, c Change, err error) {
	if !IsChange(b) {
		return "", Change{}, errPublication
	}
	parts := strings.SplitN(string(b[1:]), "\n", 7)
	if len(parts) != 7 {
		return "", Change{}, errPublication
	}
	pos, err := strconv.ParseUint(parts[0], 10, 64)
	if err != nil {
		return "", Change{}, errPublication
	}
	c, err = changeOf(pos, parts[2], parts[3], parts[4], parts[5], parts[6])
	if err != nil {
		return "", Change{}, errPublication
	}
	return parts[1], c, nil
}

// Expire implements [Store.Expire].
func (r *Redis) Expire(ctx context.Context, room string) (time.Time, error) {
	res, err := r.run(ctx, expireScript, room, r.limitsOf(room))
	if err != nil {
		return time.Time{}, fmt.Errorf("state: expire in %q: %w", room, err)
	}
	next, err := res.AsInt64()
	if err != nil {
		return time.Time{}, fmt.Errorf("state: expire in %q: %w", room, err)
	}
	return ms(next), nil
}

// Close implements [Store.Close]; the client stays open.
func (r *Redis) Close() error {
	r.closed.Store(true)
	return nil
}
