package history

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-rt/corral/internal/inflight"
	"github.com/corral-rt/corral/internal/tryagain"
	"github.com/redis/rueidis"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/corral-rt/corral/events"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
)

//go:embed varint.lua
var varintLua string

//go:embed append.lua
var appendLua string

//go:embed read.lua
var readLua string

//go:embed fence.lua
var fenceLua string

var (
	appendScript = rueidis.NewLuaScript(appendLua)
	fenceScript  = rueidis.NewLuaScript(fenceLua)
	appendSHA    = sha1Hex(appendLua)
	readSHA      = sha1Hex(varintLua + readLua)
)

// RedisOptions configures [NewRedis]. Zero fields mean defaults.
type RedisOptions struct {
	// MaxLen is how many messages each room's stream retains at least;
	// default 10000. Trimming is approximate (MAXLEN ~), so a stream may
	// hold somewhat more.
	MaxLen int
	// TTL is how long a room's history lives after its last append;
	// default 24h.
	TTL time.Duration
	// Limits, when set, gives each room its own MaxLen and TTL (its room
	// class), looked up at every call that writes the room's keys; a zero
	// field keeps the default above.
	Limits func(room string) Limits
	// DedupeWindow is how long a dedupe key is remembered; default 2m.
	DedupeWindow time.Duration
	// MaxInFlight bounds the calls waiting on Redis; past it calls fail
	// at once with an error wrapping ErrBusy. Default 4096.
	MaxInFlight int
	// Prefix starts every key and channel name; default "corral".
	Prefix string
	// Events, when set, receives the event of every appended message in
	// the same script as the append. On Redis Cluster, where the log's
	// one stream cannot share a slot with every room, the event is written
	// by a second command after the append instead: see
	// [events.Redis.AppendMessage] for what that gives up.
	Events *events.Redis
	// OnEventError, when set, is told when that second command failed:
	// the message is in history (Append succeeds) but its event is not in
	// the log. Only on Redis Cluster.
	OnEventError func(room string, err error)
	// OnLoss, when set, is told each time a room moves to a new epoch
	// because its history ended below a seq a caller had seen (see
	// [LossFence]): acknowledged messages were lost, as after a failover
	// to a replica that lagged.
	OnLoss func(room string)
	// OnReplicated, when set, is told each time a room moves to a new
	// epoch because its history came to the Redis server by replication:
	// the first append to a room after a failover to a replica (unless
	// Replicas > 0), which may have lost messages no running process
	// knows of (see append.lua).
	OnReplicated func(room string)
	// Replicas, when > 0, makes Append return only once that many
	// replicas acknowledged the append (WAIT on the append's connection),
	// so that a failover to one of them loses no acknowledged message.
	// When they do not within ReplicaTimeout (default 1s), Append fails
	// with an error wrapping [ErrNotReplicated]. Not on Redis Cluster.
	Replicas       int
	ReplicaTimeout time.Duration
	// OnReplicaTimeout, when set, is told of each such failure.
	OnReplicaTimeout func(room string)
}

// ErrNotReplicated is returned (wrapped) by Append when
// RedisOptions.Replicas replicas did not acknowledge the append in time.
// The message is stored on the master and published: it may be delivered,
// and it is lost if the master fails before a replica has it. A retry with
// the same dedupe key returns its seq (Duplicate) instead of storing it
// twice.
var ErrNotReplicated = errors.New("history: append not acknowledged by enough replicas")

// Redis is a [Store] in Redis, shared by every process that uses the same
// Redis and Prefix. Requests are auto-pipelined by the rueidis client; no
// connection is checked out per request. All methods may be called
// concurrently.
type Redis struct {
	client   rueidis.Client
	prefix   string
	maxLen   string        // MAXLEN argument
	ttl      string        // ms
	window   string        // ms
	events   *events.Redis // nil: no event log
	evKey    string        // the event stream's key, or ""
	evMaxLen string        // its MAXLEN argument
	// sharded: on Redis Cluster, publish with SPUBLISH, subscribe with
	// SSUBSCRIBE per node, and write events after the append script.
	sharded bool
	onEvErr func(room string, err error)
	onLoss  func(room string)
	limits  func(room string) Limits // nil: maxLen and ttl for every room
	// onReplicated: see RedisOptions.OnReplicated.
	onReplicated func(room string)
	// replicas and waitMs are WAIT's arguments; replicas 0: no WAIT.
	replicas, waitMs int64
	onWaitTimeout    func(room string)
	limit            *inflight.Limit
	closed           atomic.Bool

	mu   sync.Mutex // guards subs
	subs map[*Subscription]struct{}
}

// NewRedis returns a store using client, which the caller keeps and closes
// after the store.
func NewRedis(client rueidis.Client, opts RedisOptions) *Redis {
	if opts.MaxLen <= 0 {
		opts.MaxLen = 10000
	}
	if opts.TTL <= 0 {
		opts.TTL = 24 * time.Hour
	}
	if opts.DedupeWindow <= 0 {
		opts.DedupeWindow = 2 * time.Minute
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 4096
	}
	if opts.Prefix == "" {
		opts.Prefix = "corral"
	}
	r := &Redis{
		client:       client,
		prefix:       opts.Prefix,
		maxLen:       strconv.Itoa(opts.MaxLen),
		ttl:          strconv.FormatInt(max(opts.TTL.Milliseconds(), 1), 10),
		window:       strconv.FormatInt(max(opts.DedupeWindow.Milliseconds(), 1), 10),
		limit:        inflight.New(opts.MaxInFlight),
		subs:         make(map[*Subscription]struct{}),
		events:       opts.Events,
		sharded:      client.Mode() == rueidis.ClientModeCluster,
		onEvErr:      opts.OnEventError,
		onLoss:       opts.OnLoss,
		limits:       opts.Limits,
		onReplicated: opts.OnReplicated,
	}
	if opts.Replicas > 0 {
		if opts.ReplicaTimeout <= 0 {
			opts.ReplicaTimeout = time.Second
		}
		r.replicas, r.waitMs = int64(opts.Replicas), max(opts.ReplicaTimeout.Milliseconds(), 1)
		r.onWaitTimeout = opts.OnReplicaTimeout
	}
	if opts.Events != nil && !r.sharded {
		r.evKey, r.evMaxLen = opts.Events.Key(), strconv.Itoa(opts.Events.MaxLen())
	}
	return r
}

// Events returns the log that receives the store's message events, or nil.
func (r *Redis) Events() events.Log {
	if r.events == nil {
		return nil
	}
	return r.events
}

// acquire takes an in-flight slot, or fails at once.
func (r *Redis) acquire() error {
	if r.closed.Load() {
		return errClosed
	}
	if !r.limit.TryAcquire() {
		return ErrBusy
	}
	return nil
}

func (r *Redis) release() { r.limit.Release() }

// roomKeys returns the seq, log, epoch and here keys of room, in the
// order the scripts take them.
func (r *Redis) roomKeys(room string, extra int) []string {
	base := r.prefix + ":{" + room + "}:"
	keys := make([]string, 4, 4+extra)
	keys[0], keys[1], keys[2], keys[3] = base+"seq", base+"log", base+"epoch", base+"here"
	return keys
}

// limitsOf is room's MAXLEN and TTL (ms) arguments.
func (r *Redis) limitsOf(room string) (maxLen, ttl string) {
	maxLen, ttl = r.maxLen, r.ttl
	if r.limits == nil {
		return maxLen, ttl
	}
	l := r.limits(room)
	if l.MaxLen > 0 {
		maxLen = strconv.Itoa(l.MaxLen)
	}
	if l.TTL > 0 {
		ttl = strconv.FormatInt(max(l.TTL.Milliseconds(), 1), 10)
	}
	return maxLen, ttl
}

func (r *Redis) channel(room string) string {
	return r.prefix + ":{" + room + "}:ch"
}

// Channel is the pub/sub channel of room's messages. Other publications
// may share it, tagged by a first byte no message has (0): a
// [Subscription] hands them to its OnTagged handler (keyed state's
// changes, state.RedisOptions.Channel), so a process follows a room with
// one subscription.
func (r *Redis) Channel(room string) string { return r.channel(room) }

// spublish is the scripts' argument saying whether to publish with
// SPUBLISH.
func (r *Redis) spublish() string {
	if r.sharded {
		return "1"
	}
	return "0"
}

// Append implements [Store.Append].
func (r *Redis) Append(ctx context.Context, room string, msg *corralv1.Message, dedupeKey string) (AppendResult, error) {
	return r.AppendKnown(ctx, room, msg, dedupeKey, State{})
}

// AppendKnown implements [LossFence.AppendKnown].
func (r *Redis) AppendKnown(ctx context.Context, room string, msg *corralv1.Message, dedupeKey string, known State) (AppendResult, error) {
	return r.AppendOrdered(ctx, room, msg, dedupeKey, Sender{}, known)
}

// AppendOrdered implements [SenderOrder.AppendOrdered]. The sender's mark
// is a key of the room's slot, written by append.lua with the message.
func (r *Redis) AppendOrdered(ctx context.Context, room string, msg *corralv1.Message, dedupeKey string, sender Sender, known State) (AppendResult, error) {
	if err := checkAppend(room, msg); err != nil {
		return AppendResult{}, err
	}
	if sender.Stream != "" && dedupeKey == "" {
		return AppendResult{}, fmt.Errorf("history: append to %q: a sender's place needs a dedupe key", room)
	}
	if err := r.acquire(); err != nil {
		return AppendResult{}, fmt.Errorf("history: append to %q: %w", room, err)
	}
	defer r.release()
	head, tail, err := encodeWithoutSeq(msg)
	if err != nil {
		return AppendResult{}, fmt.Errorf("history: append to %q: %w", room, err)
	}
	keys := r.roomKeys(room, 3)
	if dedupeKey != "" {
		keys = append(keys, r.prefix+":{"+room+"}:dedupe:"+dedupeKey)
	}
	place := ""
	if sender.Stream != "" {
		keys = append(keys, r.prefix+":{"+room+"}:sender:"+sender.Stream)
		place = strconv.FormatUint(sender.Seq, 10)
	}
	if r.evKey != "" {
		keys = append(keys, r.evKey)
	}
	// With replica wait, a promoted replica has every acknowledged
	// message: its histories need no new epoch.
	replicated := "1"
	if r.replicas > 0 {
		replicated = "0"
	}
	maxLen, ttl := r.limitsOf(room)
	args := []string{head, tail, r.channel(room), maxLen, ttl, r.window, candidateEpoch(), r.evMaxLen, r.spublish(),
		known.Epoch, strconv.FormatUint(known.Last, 10), replicated, place}
	var res []rueidis.RedisMessage
	acked := int64(-1)
	err = tryagain.Do(ctx, func() error {
		if r.replicas > 0 {
			res, acked, err = r.evalWait(ctx, appendSHA, appendLua, keys, args)
		} else {
			res, err = appendScript.Exec(ctx, r.client, keys, args).ToArray()
		}
		return err
	})
	if err == nil && len(res) != 4 {
		err = fmt.Errorf("unexpected reply of %d elements", len(res))
	}
	var out AppendResult
	if err == nil {
		out.Seq, err = res[0].AsUint64()
	}
	if err == nil {
		out.Epoch, err = res[1].ToString()
	}
	var dup, lost int64
	if err == nil {
		dup, err = res[2].AsInt64()
	}
	if err == nil {
		lost, err = res[3].AsInt64()
	}
	if err != nil {
		return AppendResult{}, fmt.Errorf("history: append to %q: %w", room, err)
	}
	if dup == 2 {
		// Nothing was written: the first element is the stream's mark.
		return AppendResult{}, fmt.Errorf("history: append to %q: place %d after %d: %w", room, sender.Seq, out.Seq, ErrOutOfOrder)
	}
	out.Duplicate = dup == 1
	if lost == 1 && r.onLoss != nil {
		r.onLoss(room)
	}
	if lost == 2 && r.onReplicated != nil {
		r.onReplicated(room)
	}
	if acked >= 0 && acked < r.replicas {
		if r.onWaitTimeout != nil {
			r.onWaitTimeout(room)
		}
		return out, fmt.Errorf("history: append to %q: seq %d: %d of %d replicas: %w", room, out.Seq, acked, r.replicas, ErrNotReplicated)
	}
	msg.Seq = out.Seq
	if r.events != nil && r.evKey == "" && !out.Duplicate {
		// Redis Cluster: the event log is in another slot.
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
		if err == nil {
			err = r.events.AppendMessage(ctx, b)
		}
		if err != nil && r.onEvErr != nil {
			r.onEvErr(room, err)
		}
	}
	return out, nil
}

// evalWait runs a script (append.lua, grow.lua) then WAIT in one batch, which rueidis sends
// on one connection of its pool for blocking commands: WAIT counts the
// replicas that acknowledged that connection's writes, and does not hold
// up the shared pipeline. It returns the script's reply and how many
// replicas acknowledged.
func (r *Redis) evalWait(ctx context.Context, sha, src string, keys, args []string) ([]rueidis.RedisMessage, int64, error) {
	wait := r.client.B().Wait().Numreplicas(r.replicas).Timeout(r.waitMs).Build()
	resps := r.client.DoMulti(ctx,
		r.client.B().Evalsha().Sha1(sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build(), wait)
	if err, ok := rueidis.IsRedisErr(resps[0].Error()); ok && err.IsNoScript() {
		resps = r.client.DoMulti(ctx,
			r.client.B().Eval().Script(src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build(),
			r.client.B().Wait().Numreplicas(r.replicas).Timeout(r.waitMs).Build())
	}
	res, err := resps[0].ToArray()
	if err != nil {
		return nil, 0, err
	}
	acked, err := resps[1].AsInt64()
	if err != nil {
		return nil, 0, fmt.Errorf("wait for replicas: %w", err)
	}
	return res, acked, nil
}

// Fence implements [LossFence.Fence].
func (r *Redis) Fence(ctx context.Context, room string, known State) (State, error) {
	if room == "" {
		return State{}, errEmptyRoom
	}
	if err := r.acquire(); err != nil {
		return State{}, fmt.Errorf("history: fence %q: %w", room, err)
	}
	defer r.release()
	keys := r.roomKeys(room, 0)
	keys = []string{keys[0], keys[2], keys[3]}
	_, ttl := r.limitsOf(room)
	args := []string{known.Epoch, strconv.FormatUint(known.Last, 10), candidateEpoch(), ttl, r.channel(room), r.spublish()}
	var res []rueidis.RedisMessage
	err := tryagain.Do(ctx, func() error {
		var err error
		res, err = fenceScript.Exec(ctx, r.client, keys, args).ToArray()
		return err
	})
	if err == nil && len(res) != 3 {
		err = fmt.Errorf("unexpected reply of %d elements", len(res))
	}
	var st State
	var bumped int64
	if err == nil {
		st.Epoch, err = res[0].ToString()
	}
	if err == nil {
		st.Last, err = res[1].AsUint64()
	}
	if err == nil {
		bumped, err = res[2].AsInt64()
	}
	if err != nil {
		return State{}, fmt.Errorf("history: fence %q: %w", room, err)
	}
	if bumped == 1 && r.onLoss != nil {
		r.onLoss(room)
	}
	return st, nil
}

// encodeWithoutSeq encodes msg with seq 0 and splits the encoding where the
// seq field belongs (after field 1, room), so that append.lua can insert the
// seq it assigns and store the canonical encoding.
func encodeWithoutSeq(msg *corralv1.Message) (head, tail string, err error) {
	msg.Seq = 0
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return "", "", err
	}
	// Marshal writes known fields in field-number order, so a room field
	// comes first.
	num, typ, n := protowire.ConsumeTag(b)
	if n > 0 && num == 1 && typ == protowire.BytesType {
		if _, m := protowire.ConsumeBytes(b[n:]); m >= 0 {
			return string(b[:n+m]), string(b[n+m:]), nil
		}
	}
	return "", string(b), nil
}

// candidateEpoch returns the epoch a room gets if this call starts its
// history. It only needs to differ from the room's earlier epochs, so a
// fast non-cryptographic generator suffices.
func candidateEpoch() string {
	var b [16]byte
	return string(strconv.AppendUint(b[:0], rand.Uint64(), 16))
}

// Read implements [Store.Read].
func (r *Redis) Read(ctx context.Context, q Query) (Page, error) {
	pages, err := r.ReadMany(ctx, []Query{q})
	if err != nil {
		return Page{}, err
	}
	return pages[0], nil
}

// ReadMany implements [Store.ReadMany].
func (r *Redis) ReadMany(ctx context.Context, qs []Query) ([]Page, error) {
	if len(qs) == 0 {
		return nil, nil
	}
	for _, q := range qs {
		if q.Room == "" {
			return nil, errEmptyRoom
		}
	}
	if err := r.acquire(); err != nil {
		return nil, fmt.Errorf("history: read: %w", err)
	}
	defer r.release()
	execs := make([]rueidis.LuaExec, len(qs))
	for i, q := range qs {
		dir, pos := "f", q.After
		if q.Reverse {
			dir, pos = "r", q.Before
		}
		execs[i] = r.readExec(q.Room, q.Peek, dir, pos, pageLimit(q.Limit)+1, q.MaxBytes)
		if q.Assembled {
			execs[i].Args = append(execs[i].Args, r.prefix+":{"+q.Room+"}:grow:")
		}
	}
	resps := evalMulti(ctx, r.client, varintLua+readLua, readSHA, execs)
	pages := make([]Page, len(qs))
	for i, resp := range resps {
		var err error
		if qs[i].Assembled {
			pages[i], err = parseFolded(resp)
		} else {
			pages[i], err = parsePage(resp, pageLimit(qs[i].Limit), qs[i].MaxBytes)
		}
		if err != nil {
			return nil, fmt.Errorf("history: read %q: %w", qs[i].Room, err)
		}
	}
	return pages, nil
}

// State implements [Store.State].
func (r *Redis) State(ctx context.Context, room string) (State, error) {
	if room == "" {
		return State{}, errEmptyRoom
	}
	if err := r.acquire(); err != nil {
		return State{}, fmt.Errorf("history: state of %q: %w", room, err)
	}
	defer r.release()
	resps := evalMulti(ctx, r.client, varintLua+readLua, readSHA, []rueidis.LuaExec{r.readExec(room, false, "", 0, 0, 0)})
	p, err := parsePage(resps[0], 0, 0)
	if err != nil {
		return State{}, fmt.Errorf("history: state of %q: %w", room, err)
	}
	return p.State, nil
}

// readExec is read.lua on room's keys; with peek it creates no epoch.
// With maxBytes > 0 the script stops reading past it (see parsePage).
func (r *Redis) readExec(room string, peek bool, dir string, pos uint64, count, maxBytes int) rueidis.LuaExec {
	epoch := ""
	if !peek {
		epoch = candidateEpoch()
	}
	_, ttl := r.limitsOf(room)
	return rueidis.LuaExec{
		Keys: r.roomKeys(room, 0),
		Args: []string{epoch, ttl, dir, strconv.FormatUint(pos, 10), strconv.Itoa(count), strconv.Itoa(max(maxBytes, 0))},
	}
}

// parsePage decodes a read.lua reply. Past limit messages, or past
// maxBytes of them ([Query].MaxBytes: the script sent the one that goes
// past), More is set.
func parsePage(resp rueidis.RedisResult, limit, maxBytes int) (Page, error) {
	arr, err := resp.ToArray()
	if err != nil {
		return Page{}, err
	}
	if len(arr) < 3 {
		return Page{}, fmt.Errorf("unexpected reply of %d elements", len(arr))
	}
	var p Page
	if p.Epoch, err = arr[0].ToString(); err != nil {
		return Page{}, err
	}
	if p.Last, err = arr[1].AsUint64(); err != nil {
		return Page{}, err
	}
	if p.First, err = arr[2].AsUint64(); err != nil {
		return Page{}, err
	}
	arr = arr[3:]
	if len(arr) > limit {
		arr, p.More = arr[:limit], true
	}
	raw := make([]string, len(arr))
	for i := range arr {
		if raw[i], err = arr[i].ToString(); err != nil {
			return Page{}, err
		}
	}
	if n := cutBytes(len(raw), maxBytes, func(i int) int { return len(raw[i]) }); n < len(raw) {
		raw, p.More = raw[:n], true
	}
	if len(raw) > 0 {
		p.Messages = make([]*corralv1.Message, len(raw))
	}
	for i, s := range raw {
		m := new(corralv1.Message)
		if err := proto.Unmarshal([]byte(s), m); err != nil {
			return Page{}, fmt.Errorf("decode message: %w", err)
		}
		p.Messages[i] = m
	}
	return p, nil
}

// parseFolded decodes a read.lua reply to a folding read
// ([Query].Assembled): the script cut the page and says whether there is
// more.
func parseFolded(resp rueidis.RedisResult) (Page, error) {
	arr, err := resp.ToArray()
	if err != nil {
		return Page{}, err
	}
	if len(arr) == 3 { // peek of a room without history
		return Page{}, nil
	}
	if len(arr) < 5 {
		return Page{}, fmt.Errorf("unexpected reply of %d elements", len(arr))
	}
	var p Page
	var more int64
	p.Epoch, err = arr[0].ToString()
	var errs [4]error
	p.Last, errs[0] = arr[1].AsUint64()
	p.First, errs[1] = arr[2].AsUint64()
	p.Next, errs[2] = arr[3].AsUint64()
	more, errs[3] = arr[4].AsInt64()
	if err := errors.Join(err, errs[0], errs[1], errs[2], errs[3]); err != nil {
		return Page{}, err
	}
	p.More = more == 1
	for _, v := range arr[5:] {
		s, err := v.ToString()
		if err != nil {
			return Page{}, err
		}
		m := new(corralv1.Message)
		if err := proto.Unmarshal([]byte(s), m); err != nil {
			return Page{}, fmt.Errorf("decode message: %w", err)
		}
		p.Messages = append(p.Messages, m)
	}
	return p, nil
}

// evalMulti runs script once per exec in one pipeline, by EVALSHA, and
// again by EVAL for those the server did not have loaded (NOSCRIPT). Those
// answered TRYAGAIN (a slot in migration) run again until ctx ends.
func evalMulti(ctx context.Context, c rueidis.Client, src, sha string, execs []rueidis.LuaExec) []rueidis.RedisResult {
	resps := make([]rueidis.RedisResult, len(execs))
	todo := make([]int, len(execs))
	for i := range todo {
		todo[i] = i
	}
	b := tryagain.Backoff()
	for {
		evalOnce(ctx, c, src, sha, execs, todo, resps)
		var again []int
		for _, i := range todo {
			if tryagain.Is(resps[i].Error()) {
				again = append(again, i)
			}
		}
		if len(again) == 0 || !b.Wait(ctx) {
			return resps
		}
		todo = again
	}
}

// evalOnce runs execs[i] for each i in todo into resps[i].
func evalOnce(ctx context.Context, c rueidis.Client, src, sha string, execs []rueidis.LuaExec, todo []int, resps []rueidis.RedisResult) {
	cmds := make(rueidis.Commands, len(todo))
	for j, i := range todo {
		e := execs[i]
		cmds[j] = c.B().Evalsha().Sha1(sha).Numkeys(int64(len(e.Keys))).Key(e.Keys...).Arg(e.Args...).Build()
	}
	var retry []int
	for j, resp := range c.DoMulti(ctx, cmds...) {
		resps[todo[j]] = resp
		if err, ok := rueidis.IsRedisErr(resp.Error()); ok && err.IsNoScript() {
			retry = append(retry, todo[j])
		}
	}
	if len(retry) == 0 {
		return
	}
	cmds = cmds[:0]
	for _, i := range retry {
		e := execs[i]
		cmds = append(cmds, c.B().Eval().Script(src).Numkeys(int64(len(e.Keys))).Key(e.Keys...).Arg(e.Args...).Build())
	}
	for j, resp := range c.DoMulti(ctx, cmds...) {
		resps[retry[j]] = resp
	}
}

func sha1Hex(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}

// Close implements [Store.Close]: it closes the store's subscriptions and
// makes further calls fail. It does not close the client.
func (r *Redis) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	r.mu.Lock()
	subs := make([]*Subscription, 0, len(r.subs))
	for s := range r.subs {
		subs = append(subs, s)
	}
	r.mu.Unlock()
	var errs []error
	for _, s := range subs {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

var _ LossFence = (*Redis)(nil)
