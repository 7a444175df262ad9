package history

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"
	"google.golang.org/protobuf/proto"

	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/internal/tryagain"
)

//go:embed grow.lua
var growLua string

//go:embed assembled.lua
var assembledLua string

//go:embed open.lua
var openLua string

var (
	growScript      = rueidis.NewLuaScript(varintLua + growLua)
	assembledScript = rueidis.NewLuaScript(varintLua + assembledLua)
	openScript      = rueidis.NewLuaScript(varintLua + openLua)
	growSHA         = sha1Hex(varintLua + growLua)
)

// Growing messages (docs/MESSAGES.md): a message written in chunks, such
// as an AI's token stream. Each chunk is a Message in the room's log with
// its own seq (so chunks interleave with the room's other messages in
// room order, and a replay after a position returns them) and Chunk set;
// the store also keeps the message as assembled so far, updated in the
// same atomic step as the chunk's append.

// Grower is implemented by the stores that keep growing messages
// ([Memory] and [Redis]).
type Grower interface {
	// Grow appends one chunk to the growing message msg.Id in room and
	// returns its place. msg carries the room, id, sender and time, and
	// Chunk with Data, Replace and Final, and Version: 0, or the version
	// the chunk makes, which makes a retry idempotent (a chunk whose
	// version the message has is not stored again: the result has
	// Duplicate set and the seq of the message's last chunk; one more
	// than one version ahead wraps [ErrOutOfOrder]). The store takes the room's next
	// seq for it (sets msg.Seq) and sets Chunk.MessageSeq (the seq of the
	// message's first chunk) and Chunk.Version (1 for the first chunk, one
	// more for each), stores and publishes it, and updates the assembled
	// message: one atomic step. The first chunk of an id in an epoch
	// opens the message. A message that has its final chunk refuses more
	// (the error wraps [ErrFinal]); a chunk that would make the assembled
	// body longer than limits.MaxBytes is refused ([ErrTooLarge]); nothing
	// is stored then. With Events, the final chunk commits the assembled
	// message (see [Grower.Assembled]) as the message's event.
	Grow(ctx context.Context, room string, msg *corralv1.Message, limits GrowLimits) (AppendResult, error)
	// Assembled reads a growing message as assembled so far: a Message
	// at the seq of its last chunk whose Chunk holds the whole body as
	// Data with Replace set, and its version and final mark; with the
	// room's state, read in the same atomic step. A member that joins
	// mid-stream takes it as the prefix and then applies the chunks with
	// a seq above Message.Seq, exactly once: the store updates the
	// assembled message and appends the chunk in one step, so the prefix
	// covers exactly the chunks up to its seq. An id the room does not
	// hold (in its current epoch) wraps [ErrNotFound].
	Assembled(ctx context.Context, room, id string) (*corralv1.Message, State, error)
	// Open reads the room's open growing messages (those without their
	// final chunk), each as [Grower.Assembled] gives it, at most
	// MaxOpen of them, with the room's state, in one atomic step: every
	// chunk up to State.Last is in them, none after. A member that joins
	// live at a position at or after State.Last takes them as its
	// prefixes.
	Open(ctx context.Context, room string) ([]*corralv1.Message, State, error)
}

// MaxOpen bounds the open growing messages [Grower.Open] returns.
const MaxOpen = 64

// GrowLimits bounds one growing message.
type GrowLimits struct {
	// MaxBytes is the longest assembled body; <= 0 means
	// DefaultMaxMessage.
	MaxBytes int
}

// DefaultMaxMessage is the longest assembled body without a limit.
const DefaultMaxMessage = 1 << 20

var (
	// ErrFinal is returned (wrapped) by [Grower.Grow] for a message that
	// already has its final chunk.
	ErrFinal = errors.New("history: message is final")
	// ErrTooLarge is returned (wrapped) by [Grower.Grow] for a chunk that
	// would make the message longer than its bound.
	ErrTooLarge = errors.New("history: message too large")
	// ErrNotFound is returned (wrapped) by [Grower.Assembled] for a
	// message the room does not hold.
	ErrNotFound = errors.New("history: message not found")
)

func checkGrow(room string, msg *corralv1.Message) error {
	if err := checkAppend(room, msg); err != nil {
		return err
	}
	if msg.GetId() == "" {
		return fmt.Errorf("history: grow in %q: a growing message needs an id", room)
	}
	if msg.GetChunk() == nil {
		return fmt.Errorf("history: grow %q in %q: no chunk", msg.GetId(), room)
	}
	if len(msg.GetChunk().GetDelta()) > 0 {
		return fmt.Errorf("history: grow %q in %q: a stored chunk holds data, not a delta", msg.GetId(), room)
	}
	return nil
}

func (l GrowLimits) max() int {
	if l.MaxBytes <= 0 {
		return DefaultMaxMessage
	}
	return l.MaxBytes
}

// growing is a growing message as Memory keeps it.
type growing struct {
	base    *corralv1.Message // the first chunk, without its data
	body    []byte
	version uint64
	last    uint64 // seq of the last chunk
	final   bool
}

// assembled is g as a Message (see [Grower.Assembled]).
func (g *growing) assembled() *corralv1.Message {
	m := proto.CloneOf(g.base)
	m.Seq = g.last
	m.Chunk = &corralv1.MessageChunk{MessageSeq: g.base.GetSeq(), Version: g.version,
		Data: g.body, Replace: true, Final: g.final}
	return m
}

// Grow implements [Grower.Grow].
func (m *Memory) Grow(_ context.Context, room string, msg *corralv1.Message, limits GrowLimits) (AppendResult, error) {
	if err := checkGrow(room, msg); err != nil {
		return AppendResult{}, err
	}
	m.maybeSweep()
	r := m.lockLive(room)
	res, err := m.growLocked(r, room, msg, limits)
	r.mu.Unlock()
	if m.total.Load() > m.maxBytes {
		m.shed(room)
	}
	return res, err
}

func (m *Memory) growLocked(r *memRoom, room string, msg *corralv1.Message, limits GrowLimits) (AppendResult, error) {
	c := msg.GetChunk()
	g := r.growing[msg.GetId()]
	var have uint64
	if g != nil {
		have = g.version
	}
	if want := c.GetVersion(); want > 0 && want <= have {
		return AppendResult{Seq: g.last, Epoch: r.epoch, Duplicate: true}, nil
	} else if want > have+1 {
		return AppendResult{}, fmt.Errorf("history: grow %q in %q: version %d after %d: %w", msg.GetId(), room, want, have, ErrOutOfOrder)
	}
	size := len(c.GetData())
	if g != nil {
		if g.final {
			return AppendResult{}, fmt.Errorf("history: grow %q in %q: %w", msg.GetId(), room, ErrFinal)
		}
		if !c.GetReplace() {
			size += len(g.body)
		}
	}
	if size > limits.max() {
		return AppendResult{}, fmt.Errorf("history: grow %q in %q: %d bytes, at most %d: %w", msg.GetId(), room, size, limits.max(), ErrTooLarge)
	}
	if g == nil {
		g = &growing{base: proto.CloneOf(msg)}
		g.base.Chunk = nil
		if r.growing == nil {
			r.growing = make(map[string]*growing)
		}
		r.growing[msg.GetId()] = g
		m.forgetGrownLocked(r)
	}
	c.Version = g.version + 1
	c.MessageSeq = r.last + 1 // this chunk's seq when it opens the message
	if g.version > 0 {
		c.MessageSeq = g.base.GetSeq()
	}
	// Not the chunk's event: the final chunk commits the assembled
	// message below.
	res, err := m.appendEventLocked(r, room, msg, "", Sender{}, nil)
	if err != nil {
		return res, err
	}
	if g.version == 0 {
		g.base.Seq = msg.GetSeq()
	}
	before := int64(len(g.body))
	if c.GetReplace() {
		g.body = append([]byte(nil), c.GetData()...)
	} else {
		g.body = append(g.body, c.GetData()...)
	}
	grown := int64(len(g.body)) - before
	r.bytes += grown
	m.total.Add(grown)
	g.version, g.last, g.final = c.GetVersion(), msg.GetSeq(), c.GetFinal()
	if g.final && m.events != nil {
		m.events.CommitMessage(g.assembled())
	}
	return res, nil
}

// forgetGrownLocked bounds the growing messages a room keeps: past its
// MaxLen of them, those whose last chunk is no longer retained are
// forgotten (their chunks are gone from the history anyway). Lock must be
// held.
func (m *Memory) forgetGrownLocked(r *memRoom) {
	if len(r.growing) <= r.maxLen {
		return
	}
	first := r.last - uint64(r.n) + 1
	for id, g := range r.growing {
		if g.last < first {
			r.bytes -= int64(len(g.body))
			m.total.Add(-int64(len(g.body)))
			delete(r.growing, id)
		}
	}
}

// Assembled implements [Grower.Assembled].
func (m *Memory) Assembled(_ context.Context, room, id string) (*corralv1.Message, State, error) {
	r := m.lockIfAny(room)
	if r == nil {
		return nil, State{}, fmt.Errorf("history: message %q in %q: %w", id, room, ErrNotFound)
	}
	defer r.mu.Unlock()
	st := State{Epoch: r.epoch, Last: r.last}
	if r.n > 0 {
		st.First = r.last - uint64(r.n) + 1
	}
	g := r.growing[id]
	if g == nil || g.version == 0 {
		return nil, st, fmt.Errorf("history: message %q in %q: %w", id, room, ErrNotFound)
	}
	return g.assembled(), st, nil
}

// Open implements [Grower.Open].
func (m *Memory) Open(_ context.Context, room string) ([]*corralv1.Message, State, error) {
	r := m.lockIfAny(room)
	if r == nil {
		return nil, State{}, nil
	}
	defer r.mu.Unlock()
	st := State{Epoch: r.epoch, Last: r.last}
	if r.n > 0 {
		st.First = r.last - uint64(r.n) + 1
	}
	var out []*corralv1.Message
	for _, g := range r.growing {
		if g.version > 0 && !g.final && len(out) < MaxOpen {
			out = append(out, g.assembled())
		}
	}
	return out, st, nil
}

// Grow implements [Grower.Grow]: grow.lua, one script.
func (r *Redis) Grow(ctx context.Context, room string, msg *corralv1.Message, limits GrowLimits) (AppendResult, error) {
	return r.GrowKnown(ctx, room, msg, limits, State{})
}

// GrowKnown is [Redis.Grow] by a caller that knows the room's position
// (see [LossFence.AppendKnown]): a chunk is fenced as a message is.
func (r *Redis) GrowKnown(ctx context.Context, room string, msg *corralv1.Message, limits GrowLimits, known State) (AppendResult, error) {
	if err := checkGrow(room, msg); err != nil {
		return AppendResult{}, err
	}
	fail := func(err error) (AppendResult, error) {
		return AppendResult{}, fmt.Errorf("history: grow %q in %q: %w", msg.GetId(), room, err)
	}
	if err := r.acquire(); err != nil {
		return fail(err)
	}
	defer r.release()
	c := msg.Chunk
	msg.Chunk = nil
	head, tail, err := encodeWithoutSeq(msg)
	msg.Chunk = c
	if err != nil {
		return fail(err)
	}
	keys := append(r.roomKeys(room, 3), r.growKey(room, msg.GetId()), r.openKey(room))
	if r.evKey != "" {
		keys = append(keys, r.evKey)
	}
	replicated := "1"
	if r.replicas > 0 {
		replicated = "0"
	}
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return "0"
	}
	maxLen, ttl := r.limitsOf(room)
	args := []string{head, tail, r.channel(room), maxLen, ttl, candidateEpoch(), r.evMaxLen, r.spublish(),
		known.Epoch, strconv.FormatUint(known.Last, 10), replicated,
		string(c.GetData()), flag(c.GetReplace()), flag(c.GetFinal()), strconv.Itoa(limits.max()),
		strconv.FormatUint(c.GetVersion(), 10), msg.GetId()}
	var res []rueidis.RedisMessage
	acked := int64(-1)
	err = tryagain.Do(ctx, func() error {
		if r.replicas > 0 {
			res, acked, err = r.evalWait(ctx, growSHA, varintLua+growLua, keys, args)
		} else {
			res, err = growScript.Exec(ctx, r.client, keys, args).ToArray()
		}
		return err
	})
	if err == nil && len(res) < 3 {
		err = fmt.Errorf("unexpected reply of %d elements", len(res))
	}
	if err != nil {
		return fail(err)
	}
	status, _ := res[2].AsInt64()
	switch status {
	case 1:
		return fail(ErrFinal)
	case 2:
		size, _ := res[3].AsInt64()
		return fail(fmt.Errorf("%d bytes, at most %d: %w", size, limits.max(), ErrTooLarge))
	case 3:
		last, _ := res[0].AsUint64()
		epoch, _ := res[1].ToString()
		return AppendResult{Seq: last, Epoch: epoch, Duplicate: true}, nil
	case 4:
		have, _ := res[3].AsInt64()
		return fail(fmt.Errorf("version %d after %d: %w", c.GetVersion(), have, ErrOutOfOrder))
	}
	if len(res) != 6 {
		return fail(fmt.Errorf("unexpected reply of %d elements", len(res)))
	}
	var out AppendResult
	seq, err1 := res[0].AsUint64()
	epoch, err2 := res[1].ToString()
	lost, _ := res[3].AsInt64()
	version, err3 := res[4].AsUint64()
	mseq, err4 := res[5].AsUint64()
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return fail(err)
	}
	out.Seq, out.Epoch = seq, epoch
	if lost == 1 && r.onLoss != nil {
		r.onLoss(room)
	}
	if lost == 2 && r.onReplicated != nil {
		r.onReplicated(room)
	}
	msg.Seq = seq
	c.Version, c.MessageSeq = version, mseq
	if acked >= 0 && acked < r.replicas {
		if r.onWaitTimeout != nil {
			r.onWaitTimeout(room)
		}
		return out, fmt.Errorf("history: grow %q in %q: seq %d: %d of %d replicas: %w", msg.GetId(), room, seq, acked, r.replicas, ErrNotReplicated)
	}
	if c.GetFinal() && r.events != nil && r.evKey == "" {
		// Redis Cluster: the event log is in another slot.
		a, _, err := r.Assembled(ctx, room, msg.GetId())
		var b []byte
		if err == nil {
			b, err = proto.MarshalOptions{Deterministic: true}.Marshal(a)
		}
		if err == nil {
			err = r.events.AppendMessage(ctx, b)
		}
		if err != nil && r.onEvErr != nil {
			r.onEvErr(room, err)
		}
	}
	return out, nil
}

func (r *Redis) growKey(room, id string) string {
	return r.prefix + ":{" + room + "}:grow:" + id
}

func (r *Redis) openKey(room string) string {
	return r.prefix + ":{" + room + "}:open"
}

// Open implements [Grower.Open]: open.lua, one script.
func (r *Redis) Open(ctx context.Context, room string) ([]*corralv1.Message, State, error) {
	fail := func(err error) ([]*corralv1.Message, State, error) {
		return nil, State{}, fmt.Errorf("history: open messages in %q: %w", room, err)
	}
	if room == "" {
		return fail(errEmptyRoom)
	}
	base := r.prefix + ":{" + room + "}:"
	keys := []string{base + "seq", base + "epoch", base + "log", r.openKey(room)}
	res, err := openScript.Exec(ctx, r.client, keys, []string{base + "grow:", strconv.Itoa(MaxOpen)}).ToArray()
	if err == nil && len(res) < 3 {
		err = fmt.Errorf("unexpected reply of %d elements", len(res))
	}
	if err != nil {
		return fail(err)
	}
	var st State
	st.Epoch, _ = res[0].ToString()
	st.Last, _ = res[1].AsUint64()
	st.First, _ = res[2].AsUint64()
	out := make([]*corralv1.Message, 0, len(res)-3)
	for _, v := range res[3:] {
		b, _ := v.ToString()
		m := new(corralv1.Message)
		if err := proto.Unmarshal([]byte(b), m); err != nil {
			return fail(err)
		}
		out = append(out, m)
	}
	return out, st, nil
}

// Assembled implements [Grower.Assembled]: assembled.lua, one script.
func (r *Redis) Assembled(ctx context.Context, room, id string) (*corralv1.Message, State, error) {
	fail := func(err error) (*corralv1.Message, State, error) {
		return nil, State{}, fmt.Errorf("history: message %q in %q: %w", id, room, err)
	}
	if room == "" {
		return fail(errEmptyRoom)
	}
	base := r.prefix + ":{" + room + "}:"
	keys := []string{base + "seq", base + "epoch", r.growKey(room, id), base + "log"}
	res, err := assembledScript.Exec(ctx, r.client, keys, nil).ToArray()
	if err == nil && len(res) != 4 {
		err = fmt.Errorf("unexpected reply of %d elements", len(res))
	}
	if err != nil {
		return fail(err)
	}
	var st State
	st.Epoch, _ = res[0].ToString()
	st.Last, _ = res[1].AsUint64()
	st.First, _ = res[2].AsUint64()
	b, _ := res[3].ToString()
	if b == "" {
		return nil, st, fmt.Errorf("history: message %q in %q: %w", id, room, ErrNotFound)
	}
	m := new(corralv1.Message)
	if err := proto.Unmarshal([]byte(b), m); err != nil {
		return fail(err)
	}
	return m, st, nil
}
