package presence

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/corral-rt/corral/internal/pubsub"
	"github.com/corral-rt/corral/internal/tryagain"
)

//go:embed change.lua
var changeLua string

//go:embed sweep.lua
var sweepLua string

//go:embed list.lua
var listLua string

//go:embed heartbeat.lua
var heartbeatLua string

var (
	changeScript    = rueidis.NewLuaScript(changeLua)
	sweepScript     = rueidis.NewLuaScript(sweepLua)
	listScript      = rueidis.NewLuaScriptReadOnly(listLua)
	heartbeatScript = rueidis.NewLuaScript(heartbeatLua)
)

// versionTTL is how long a room's presence version outlives its last
// change. A reader never keeps a view of a room that long without a change.
const versionTTL = 7 * 24 * time.Hour

// RedisOptions configures [NewRedis]. Zero fields mean defaults.
type RedisOptions struct {
	Options
	// Prefix starts every key and channel name; default "corral".
	Prefix string
	// CoreID names this core; default random. Two live cores must never
	// share one.
	CoreID string
	// Heartbeat is how often this core says it is alive and sweeps dead
	// cores. Default 3s.
	Heartbeat time.Duration
	// DeadAfter is how long a core may go without a heartbeat before
	// other cores remove its connections. A dead core's members leave
	// within DeadAfter + Heartbeat. Default 20s.
	DeadAfter time.Duration
}

// Redis is a [Store] in Redis, shared by every core that uses the same
// Redis and Prefix. Keys of a room are hash-tagged by room:
//
//	{prefix}:{room}:pres:m        hash user -> connections (all cores)
//	{prefix}:{room}:pres:s        hash user -> state
//	{prefix}:{room}:pres:i        hash user -> member info (absent: none;
//	                              rooms written before info existed have none)
//	{prefix}:{room}:pres:c:{core} hash user -> connections on that core
//	{prefix}:{room}:pres:v        the room's presence version
//	{prefix}:{room}:pres:ch       the pub/sub channel of its changes
//
// and two keys name the cores: {prefix}:pres:cores (sorted set of
// heartbeats) and {prefix}:pres:core:{core}:rooms (the rooms a core
// counted connections in, for the sweep).
type Redis struct {
	client rueidis.Client
	opts   RedisOptions
	verTTL string
	// spublish is "1" on Redis Cluster: the scripts publish with SPUBLISH
	// and sub subscribes with SSUBSCRIBE, per node.
	spublish string
	sub      *pubsub.Subscriber

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex // guards closed
	closed bool
}

// NewRedis starts a store on client (which the caller closes after the
// store): it heartbeats at once, then every Heartbeat, and opens a
// dedicated connection for pub/sub.
func NewRedis(ctx context.Context, client rueidis.Client, opts RedisOptions) (*Redis, error) {
	if opts.Prefix == "" {
		opts.Prefix = "corral"
	}
	if opts.CoreID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		opts.CoreID = hex.EncodeToString(b[:])
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 3 * time.Second
	}
	if opts.DeadAfter <= 0 {
		opts.DeadAfter = 20 * time.Second
	}
	r := &Redis{
		client:   client,
		opts:     opts,
		verTTL:   strconv.FormatInt(versionTTL.Milliseconds(), 10),
		spublish: "0",
	}
	if pubsub.Sharded(client) {
		r.spublish = "1"
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	if _, err := r.heartbeat(ctx); err != nil {
		r.cancel()
		return nil, fmt.Errorf("presence: heartbeat: %w", err)
	}
	sub, err := pubsub.New(ctx, client, pubsub.Options{
		OnMessage: r.onMessage,
		OnResubscribed: func(channel string) {
			// Changes may have been missed: OnChange reads the room again.
			if room, ok := r.room(channel); ok && r.opts.OnChange != nil {
				r.opts.OnChange(Change{Room: room})
			}
		},
	})
	if err != nil {
		r.cancel()
		return nil, fmt.Errorf("presence: subscribe: %w", err)
	}
	r.sub = sub
	r.wg.Add(1)
	go r.heartbeatLoop()
	return r, nil
}

// CoreID is the id this store heartbeats as.
func (r *Redis) CoreID() string { return r.opts.CoreID }

func (r *Redis) key(room, suffix string) string {
	return r.opts.Prefix + ":{" + room + "}:pres:" + suffix
}

func (r *Redis) channel(room string) string { return r.key(room, "ch") }

func (r *Redis) coresKey() string { return r.opts.Prefix + ":pres:cores" }

func (r *Redis) roomsKey(core string) string {
	return r.opts.Prefix + ":pres:core:" + core + ":rooms"
}

func (r *Redis) changeKeys(room, core string) []string {
	return []string{r.key(room, "m"), r.key(room, "s"), r.key(room, "c:"+core), r.key(room, "v"), r.key(room, "i")}
}

func (r *Redis) change(ctx context.Context, op, room, user, delta string, state, info []byte) error {
	if r.isClosed() {
		return fmt.Errorf("presence: %s: %w", op, ErrClosed)
	}
	setState, setInfo := "0", "0"
	if state != nil {
		setState = "1"
	}
	if info != nil {
		setInfo = "1"
	}
	args := []string{user, delta, setState, string(state), r.channel(room), r.verTTL, r.spublish, setInfo, string(info)}
	var res []rueidis.RedisMessage
	err := tryagain.Do(ctx, func() (err error) {
		res, err = changeScript.Exec(ctx, r.client, r.changeKeys(room, r.opts.CoreID), args).ToArray()
		return err
	})
	if err != nil {
		return fmt.Errorf("presence: %s %q: %w", op, room, err)
	}
	if len(res) == 0 {
		return nil
	}
	ch, err := parseChange(room, user, res)
	if err != nil {
		return fmt.Errorf("presence: %s %q: %w", op, room, err)
	}
	if r.opts.OnCommit != nil {
		r.opts.OnCommit(ch)
	}
	return nil
}

// parseChange reads {kind, version, connections, state, info}.
func parseChange(room, user string, res []rueidis.RedisMessage) (Change, error) {
	if len(res) != 5 {
		return Change{}, fmt.Errorf("unexpected reply of %d elements", len(res))
	}
	kind, err := res[0].AsInt64()
	if err != nil {
		return Change{}, err
	}
	ver, err := res[1].AsUint64()
	if err != nil {
		return Change{}, err
	}
	conns, err := res[2].AsInt64()
	if err != nil {
		return Change{}, err
	}
	state, err := res[3].ToString()
	if err != nil {
		return Change{}, err
	}
	info, err := res[4].ToString()
	if err != nil {
		return Change{}, err
	}
	ch := Change{Room: room, Kind: Kind(kind), Version: ver, Member: Member{User: user, Conns: int(conns)}}
	if state != "" {
		ch.Member.State = []byte(state)
	}
	if info != "" {
		ch.Member.Info = []byte(info)
	}
	return ch, nil
}

// Add implements [Store.Add].
func (r *Redis) Add(ctx context.Context, room, user string, state, info []byte) error {
	// The room is recorded for the sweep before anything is counted in it.
	if err := r.client.Do(ctx, r.client.B().Sadd().Key(r.roomsKey(r.opts.CoreID)).Member(room).Build()).Error(); err != nil {
		return fmt.Errorf("presence: add %q: %w", room, err)
	}
	return r.change(ctx, "add", room, user, "1", state, info)
}

// Remove implements [Store.Remove].
func (r *Redis) Remove(ctx context.Context, room, user string) error {
	return r.change(ctx, "remove", room, user, "-1", nil, nil)
}

// SetState implements [Store.SetState].
func (r *Redis) SetState(ctx context.Context, room, user string, state []byte) error {
	if state == nil {
		state = []byte{} // nil would mean "keep": SetState always replaces
	}
	return r.change(ctx, "set state", room, user, "0", state, nil)
}

// List implements [Store.List].
func (r *Redis) List(ctx context.Context, room string) (Snapshot, error) {
	if r.isClosed() {
		return Snapshot{}, fmt.Errorf("presence: list: %w", ErrClosed)
	}
	keys := []string{r.key(room, "m"), r.key(room, "s"), r.key(room, "v"), r.key(room, "i")}
	var res []rueidis.RedisMessage
	err := tryagain.Do(ctx, func() (err error) {
		res, err = listScript.Exec(ctx, r.client, keys, nil).ToArray()
		return err
	})
	if err == nil && len(res) != 4 {
		err = fmt.Errorf("unexpected reply of %d elements", len(res))
	}
	var out Snapshot
	var conns, states, infos []string
	if err == nil {
		out.Version, err = res[0].AsUint64()
	}
	if err == nil {
		conns, err = res[1].AsStrSlice()
	}
	if err == nil {
		states, err = res[2].AsStrSlice()
	}
	if err == nil {
		infos, err = res[3].AsStrSlice()
	}
	if err != nil {
		return Snapshot{}, fmt.Errorf("presence: list %q: %w", room, err)
	}
	byUser := make(map[string]string, len(states)/2)
	for i := 0; i+1 < len(states); i += 2 {
		byUser[states[i]] = states[i+1]
	}
	infoOf := make(map[string]string, len(infos)/2)
	for i := 0; i+1 < len(infos); i += 2 {
		infoOf[infos[i]] = infos[i+1]
	}
	out.Members = make([]Member, 0, len(conns)/2)
	for i := 0; i+1 < len(conns); i += 2 {
		n, _ := strconv.Atoi(conns[i+1])
		m := Member{User: conns[i], Conns: n}
		if s := byUser[conns[i]]; s != "" {
			m.State = []byte(s)
		}
		if s := infoOf[conns[i]]; s != "" {
			m.Info = []byte(s)
		}
		out.Members = append(out.Members, m)
	}
	sortMembers(out.Members)
	return out, nil
}

func (r *Redis) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// heartbeatLoop heartbeats and sweeps dead cores until Close.
func (r *Redis) heartbeatLoop() {
	defer r.wg.Done()
	t := time.NewTicker(r.opts.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(r.ctx, r.opts.DeadAfter/2)
		added, err := r.heartbeat(ctx)
		cancel()
		if err == nil && added && r.opts.OnLost != nil {
			r.opts.OnLost()
		}
	}
}

// heartbeat records this core as alive and sweeps the dead ones. It
// reports whether this core had been removed from the set (swept).
func (r *Redis) heartbeat(ctx context.Context) (bool, error) {
	dl := strconv.FormatInt(r.opts.DeadAfter.Milliseconds(), 10)
	res, err := heartbeatScript.Exec(ctx, r.client, []string{r.coresKey()}, []string{r.opts.CoreID, dl}).ToArray()
	if err != nil {
		return false, err
	}
	if len(res) == 0 {
		return false, errors.New("empty heartbeat reply")
	}
	added, _ := res[0].AsInt64()
	for _, m := range res[1:] {
		id, err := m.ToString()
		if err != nil {
			continue
		}
		if err := r.Sweep(ctx, id); err != nil {
			return added == 1, err
		}
	}
	return added == 1, nil
}

// Sweep removes the connections core counted, in every room, emitting
// each resulting change once (OnCommit here, OnChange wherever the room is
// watched), and forgets core. Any core may sweep any dead core, even
// concurrently.
func (r *Redis) Sweep(ctx context.Context, core string) error {
	rooms, err := r.client.Do(ctx, r.client.B().Smembers().Key(r.roomsKey(core)).Build()).AsStrSlice()
	if err != nil {
		return fmt.Errorf("presence: sweep %s: %w", core, err)
	}
	for _, room := range rooms {
		var res []rueidis.RedisMessage
		err := tryagain.Do(ctx, func() (err error) {
			res, err = sweepScript.Exec(ctx, r.client, r.changeKeys(room, core), []string{r.channel(room), r.verTTL, r.spublish}).ToArray()
			return err
		})
		if err != nil {
			return fmt.Errorf("presence: sweep %s in %q: %w", core, room, err)
		}
		for i := 0; i+5 < len(res); i += 6 {
			user, err := res[i+3].ToString()
			if err != nil {
				continue
			}
			ch, err := parseChange(room, user, []rueidis.RedisMessage{res[i], res[i+1], res[i+2], res[i+4], res[i+5]})
			if err == nil && r.opts.OnCommit != nil {
				r.opts.OnCommit(ch)
			}
		}
	}
	cmds := rueidis.Commands{
		r.client.B().Del().Key(r.roomsKey(core)).Build(),
		r.client.B().Zrem().Key(r.coresKey()).Member(core).Build(),
	}
	for _, res := range r.client.DoMulti(ctx, cmds...) {
		if err := res.Error(); err != nil {
			return fmt.Errorf("presence: sweep %s: %w", core, err)
		}
	}
	return nil
}

// Watch implements [Store.Watch]. It returns once Redis confirmed the
// subscription, so changes committed afterwards are delivered.
func (r *Redis) Watch(ctx context.Context, room string) error {
	if err := r.sub.Add(ctx, r.channel(room)); err != nil {
		if errors.Is(err, pubsub.ErrClosed) {
			err = ErrClosed
		}
		return fmt.Errorf("presence: watch %q: %w", room, err)
	}
	return nil
}

// Unwatch implements [Store.Unwatch]. The UNSUBSCRIBE is sent in the
// background; changes are no longer delivered once it returns.
func (r *Redis) Unwatch(ctx context.Context, rooms ...string) error {
	chs := make([]string, len(rooms))
	for i, room := range rooms {
		chs[i] = r.channel(room)
	}
	_ = r.sub.Remove(chs...) // closed: nothing is watched any more
	return nil
}

// room returns the room of a presence channel name.
func (r *Redis) room(channel string) (string, bool) {
	room, ok := strings.CutPrefix(channel, r.opts.Prefix+":{")
	if ok {
		room, ok = strings.CutSuffix(room, "}:pres:ch")
	}
	return room, ok
}

// onMessage hands a change heard on pub/sub to OnChange. The subscriber
// calls it one at a time, for watched rooms only.
func (r *Redis) onMessage(channel, msg string) {
	if r.opts.OnChange == nil {
		return
	}
	room, ok := r.room(channel)
	if !ok {
		return
	}
	if ch, ok := decodeChange(room, msg); ok {
		r.opts.OnChange(ch)
	}
}

// decodeChange reads "kind|version|connections|len(user)|user state", or
// with member info "i|kind|version|connections|len(user)|len(info)|user
// info state" (change.lua).
func decodeChange(room, msg string) (Change, bool) {
	var f [5]int64
	n := 4
	rest := msg
	if after, ok := strings.CutPrefix(msg, "i|"); ok {
		n, rest = 5, after
	}
	for i := range n {
		head, tail, ok := strings.Cut(rest, "|")
		if !ok {
			return Change{}, false
		}
		n, err := strconv.ParseInt(head, 10, 64)
		if err != nil || n < 0 {
			return Change{}, false
		}
		f[i], rest = n, tail
	}
	if int64(len(rest)) < f[3] || int64(len(rest))-f[3] < f[4] || f[0] < 1 || f[0] > 3 {
		return Change{}, false
	}
	ch := Change{Room: room, Kind: Kind(f[0]), Version: uint64(f[1]), Member: Member{User: rest[:f[3]], Conns: int(f[2])}}
	rest = rest[f[3]:]
	if f[4] > 0 {
		ch.Member.Info = []byte(rest[:f[4]])
		rest = rest[f[4]:]
	}
	if rest != "" {
		ch.Member.State = []byte(rest)
	}
	return ch, true
}

// Close stops heartbeating (other cores sweep this core's connections
// after DeadAfter unless they were removed) and closes the pub/sub
// connections. Safe to call twice.
func (r *Redis) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	return r.sub.Close()
}
