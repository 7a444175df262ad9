package sessions

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral-rt/corral/internal/batch"
	"github.com/corral-rt/corral/internal/inflight"
	"github.com/redis/rueidis"
)

var (
	//go:embed write.lua
	writeLua string
	//go:embed ack.lua
	ackLua string

	writeSHA = sha1Hex(writeLua)
	ackSHA   = sha1Hex(ackLua)
)

// Redis is a [Store] in Redis, shared by every process that uses the same
// Redis and Prefix. Creates, resumes, touches and room changes that arrive
// together are written together: one write.lua call per batch (one per op
// on a cluster, in one pipeline), so a rejoin storm costs Redis round
// trips per batch, not per call. Acks are buffered and written every
// FlushInterval by a goroutine that Close stops. All methods may be called
// concurrently.
type Redis struct {
	client  rueidis.Client
	prefix  string
	ttl     time.Duration
	ttlMS   string
	limit   *inflight.Limit
	closed  atomic.Bool
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	writes  atomic.Int64 // ack commands sent, for tests
	batches atomic.Int64 // write.lua calls sent, for tests
	cluster bool         // one write.lua call per op

	writer *batch.Batcher[writeArg, rueidis.RedisMessage]

	mu      sync.Mutex                   // guards the following fields
	pending map[string]map[string]uint64 // session id → room → seq
	touches map[string]struct{}          // session ids to touch (TouchLater)
}

// NewRedis returns a store using client, which the caller keeps and closes
// after the store, and starts its flush goroutine.
func NewRedis(client rueidis.Client, opts Options) *Redis {
	opts = opts.withDefaults()
	r := &Redis{
		client:  client,
		prefix:  opts.Prefix + ":session:",
		ttl:     opts.TTL,
		ttlMS:   strconv.FormatInt(max(opts.TTL.Milliseconds(), 1), 10),
		limit:   inflight.New(opts.MaxInFlight),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		pending: make(map[string]map[string]uint64),
		touches: make(map[string]struct{}),
		cluster: client.Mode() == rueidis.ClientModeCluster,
	}
	r.writer = r.newWriter()
	go r.flushLoop(opts.FlushInterval)
	return r
}

func (r *Redis) key(id string) string { return r.prefix + id }

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

// Create implements [Store.Create].
func (r *Redis) Create(ctx context.Context, userID string) (*Session, error) {
	created := time.Now().UnixMilli()
	for {
		id, token := newSecrets()
		h := tokenHash(token)
		resp, err := r.write(ctx, r.key(id), opCreate,
			hex.EncodeToString(h[:]), userID, strconv.FormatInt(created, 10), r.ttlMS)
		var ok int64
		if err == nil {
			ok, err = resp.AsInt64()
		}
		if err != nil {
			return nil, fmt.Errorf("sessions: create: %w", err)
		}
		if ok == 1 {
			return &Session{ID: id, Token: token, UserID: userID, Rooms: map[string]Position{}, Created: time.UnixMilli(created)}, nil
		}
		// An id collision: 128 random bits make this unreachable in
		// practice, but never overwrite someone's session.
	}
}

// Resume implements [Store.Resume]: write.lua checks and changes the
// session in one step, so two resumes with one token cannot both succeed.
func (r *Redis) Resume(ctx context.Context, id, token, userID string, at Attempt) (*Session, error) {
	if r.closed.Load() {
		return nil, fmt.Errorf("sessions: resume: %w", errClosed)
	}
	if id == "" {
		return nil, fmt.Errorf("sessions: resume: %w", ErrNotFound)
	}
	n := "0"
	if at.ordered() {
		n = strconv.FormatUint(uint64(at.N), 10)
	}
	h := tokenHash(token)
	_, next := newSecrets()
	nh := tokenHash(next)
	resp, err := r.write(ctx, r.key(id), opResume,
		hex.EncodeToString(h[:]), userID, r.ttlMS, at.Instance, n, hex.EncodeToString(nh[:]))
	if err != nil {
		return nil, fmt.Errorf("sessions: resume: %w", err)
	}
	if code, err := resp.AsInt64(); err == nil {
		switch code {
		case -1:
			err = ErrStale
		case -2:
			err = ErrTokenMismatch
		case -3:
			err = ErrUserMismatch
		default:
			err = ErrNotFound
		}
		return nil, fmt.Errorf("sessions: resume: %w", err)
	}
	fields, err := resp.AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("sessions: resume: %w", err)
	}
	s := &Session{ID: id, Token: next, UserID: fields["uid"], Rooms: make(map[string]Position)}
	if ms, err := strconv.ParseInt(fields["ct"], 10, 64); err == nil {
		s.Created = time.UnixMilli(ms)
	}
	for f, v := range fields {
		room, ok := strings.CutPrefix(f, "s:")
		if !ok {
			continue
		}
		seq, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("sessions: resume: bad seq %q of room %q", v, room)
		}
		s.Rooms[room] = Position{Seq: seq, Epoch: fields["e:"+room]}
	}
	return s, nil
}

// Touch implements [Store.Touch].
func (r *Redis) Touch(ctx context.Context, id string) error {
	if err := r.update(ctx, id, opTouch, r.ttlMS); err != nil {
		return fmt.Errorf("sessions: touch: %w", err)
	}
	return nil
}

// TouchLater implements [Store.TouchLater]: the touch is written with the
// next Flush, beside the acks, as one PEXPIRE in the same pipeline. After
// Close it is dropped.
func (r *Redis) TouchLater(id string) {
	if r.closed.Load() {
		return
	}
	r.mu.Lock()
	r.touches[id] = struct{}{}
	r.mu.Unlock()
}

// SetRoom implements [Store.SetRoom].
func (r *Redis) SetRoom(ctx context.Context, id, room string, pos Position) error {
	r.dropPending(id, room)
	err := r.update(ctx, id, opUpdate, "2", "s:"+room, strconv.FormatUint(pos.Seq, 10), "e:"+room, pos.Epoch)
	if err != nil {
		return fmt.Errorf("sessions: set room %q: %w", room, err)
	}
	return nil
}

// maxRoomsPerOp bounds the rooms of one write.lua update op (4 of its
// arguments each).
const maxRoomsPerOp = 1024

// SetRooms implements [Store.SetRooms]: one write.lua update op that sets
// every room's seq and epoch fields.
func (r *Redis) SetRooms(ctx context.Context, id string, rooms map[string]Position) error {
	if len(rooms) == 0 {
		return nil
	}
	if len(rooms) > maxRoomsPerOp {
		// write.lua unpacks the fields onto Lua's stack (8,000 slots).
		part := make(map[string]Position, maxRoomsPerOp)
		for room, pos := range rooms {
			part[room] = pos
			if len(part) == maxRoomsPerOp {
				if err := r.SetRooms(ctx, id, part); err != nil {
					return err
				}
				clear(part)
			}
		}
		return r.SetRooms(ctx, id, part)
	}
	args := make([]string, 1, 1+4*len(rooms))
	args[0] = strconv.Itoa(2 * len(rooms))
	r.mu.Lock()
	pending := r.pending[id]
	for room, pos := range rooms {
		delete(pending, room)
		args = append(args, "s:"+room, strconv.FormatUint(pos.Seq, 10), "e:"+room, pos.Epoch)
	}
	if pending != nil && len(pending) == 0 {
		delete(r.pending, id)
	}
	r.mu.Unlock()
	if err := r.update(ctx, id, opUpdate, args...); err != nil {
		return fmt.Errorf("sessions: set %d rooms: %w", len(rooms), err)
	}
	return nil
}

// DeleteRoom implements [Store.DeleteRoom].
func (r *Redis) DeleteRoom(ctx context.Context, id, room string) error {
	r.dropPending(id, room)
	if err := r.update(ctx, id, opUpdate, "0", "s:"+room, "e:"+room); err != nil {
		return fmt.Errorf("sessions: delete room %q: %w", room, err)
	}
	return nil
}

// update runs an op of write.lua that answers 1, or 0 for an unknown
// session.
func (r *Redis) update(ctx context.Context, id, code string, args ...string) error {
	resp, err := r.write(ctx, r.key(id), code, args...)
	if err != nil {
		return err
	}
	ok, err := resp.AsInt64()
	if err != nil {
		return err
	}
	if ok != 1 {
		return ErrNotFound
	}
	return nil
}

// dropPending forgets a buffered ack, which a new position or leaving the
// room supersedes.
func (r *Redis) dropPending(id, room string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rooms, ok := r.pending[id]; ok {
		delete(rooms, room)
		if len(rooms) == 0 {
			delete(r.pending, id)
		}
	}
}

// Ack implements [Store.Ack]: it buffers the ack for the next flush. An
// ack already being written when SetRoom runs may land after it; the
// position's seq then ends at the higher of the two.
func (r *Redis) Ack(_ context.Context, id, room string, seq uint64) error {
	if r.closed.Load() {
		return fmt.Errorf("sessions: ack: %w", errClosed)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rooms := r.pending[id]
	if rooms == nil {
		rooms = make(map[string]uint64)
		r.pending[id] = rooms
	}
	if seq > rooms[room] {
		rooms[room] = seq
	}
	return nil
}

// Flush implements [Store.Flush]: one command per session with buffered
// acks, and one PEXPIRE per buffered touch, all in one pipeline. Acks and
// touches that fail to be written for a connection error are buffered
// again for the next flush.
func (r *Redis) Flush(ctx context.Context) error {
	r.mu.Lock()
	batch, touches := r.pending, r.touches
	if len(batch) == 0 && len(touches) == 0 {
		r.mu.Unlock()
		return nil
	}
	if len(batch) > 0 {
		r.pending = make(map[string]map[string]uint64, len(batch))
	}
	if len(touches) > 0 {
		r.touches = make(map[string]struct{})
	}
	r.mu.Unlock()

	ids := make([]string, 0, len(batch))
	cmds := make(rueidis.Commands, 0, len(batch)+len(touches))
	for id, rooms := range batch {
		ids = append(ids, id)
		cmds = append(cmds, r.ackCmd(ackSHA, id, rooms))
	}
	r.writes.Add(int64(len(cmds)))
	touched := make([]string, 0, len(touches))
	for id := range touches {
		touched = append(touched, id)
		cmds = append(cmds, r.client.B().Pexpire().Key(r.key(id)).Milliseconds(max(r.ttl.Milliseconds(), 1)).Build())
	}
	all := r.client.DoMulti(ctx, cmds...)
	resps := all[:len(ids)]
	var errs []error
	for i, resp := range all[len(ids):] {
		err := resp.Error()
		if err == nil {
			continue
		}
		errs = append(errs, err)
		if _, isRedis := rueidis.IsRedisErr(err); !isRedis {
			r.mu.Lock()
			r.touches[touched[i]] = struct{}{}
			r.mu.Unlock()
		}
	}
	var retry []int
	for i, resp := range resps {
		if err, ok := rueidis.IsRedisErr(resp.Error()); ok && err.IsNoScript() {
			retry = append(retry, i)
		}
	}
	if len(retry) > 0 {
		cmds = cmds[:0]
		for _, i := range retry {
			cmds = append(cmds, r.ackCmd("", ids[i], batch[ids[i]]))
		}
		for j, resp := range r.client.DoMulti(ctx, cmds...) {
			resps[retry[j]] = resp
		}
	}
	for i, resp := range resps {
		err := resp.Error()
		if err == nil {
			continue
		}
		errs = append(errs, err)
		if _, isRedis := rueidis.IsRedisErr(err); !isRedis {
			r.requeue(ids[i], batch[ids[i]])
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sessions: flush %d of %d sessions: %w", len(errs), len(ids)+len(touched), err)
	}
	return nil
}

// ackCmd builds ack.lua for one session, by EVALSHA when sha is set, else
// by EVAL.
func (r *Redis) ackCmd(sha, id string, rooms map[string]uint64) rueidis.Completed {
	args := make([]string, 0, 2*len(rooms))
	for room, seq := range rooms {
		args = append(args, room, strconv.FormatUint(seq, 10))
	}
	if sha != "" {
		return r.client.B().Evalsha().Sha1(sha).Numkeys(1).Key(r.key(id)).Arg(args...).Build()
	}
	return r.client.B().Eval().Script(ackLua).Numkeys(1).Key(r.key(id)).Arg(args...).Build()
}

func (r *Redis) requeue(id string, rooms map[string]uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.pending[id]
	if cur == nil {
		r.pending[id] = rooms
		return
	}
	for room, seq := range rooms {
		if seq > cur[room] {
			cur[room] = seq
		}
	}
}

func (r *Redis) flushLoop(every time.Duration) {
	defer close(r.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), max(every, 5*time.Second))
			// A failed flush is requeued and retried on the next tick.
			_ = r.Flush(ctx)
			cancel()
		}
	}
}

// Delete implements [Store.Delete].
func (r *Redis) Delete(ctx context.Context, id string) error {
	if err := r.acquire(); err != nil {
		return fmt.Errorf("sessions: delete: %w", err)
	}
	defer r.release()
	r.mu.Lock()
	delete(r.pending, id)
	delete(r.touches, id)
	r.mu.Unlock()
	if err := r.client.Do(ctx, r.client.B().Del().Key(r.key(id)).Build()).Error(); err != nil {
		return fmt.Errorf("sessions: delete: %w", err)
	}
	return nil
}

// Close implements [Store.Close]: it waits for the write batches in
// flight, stops the flush goroutine and writes the acks still buffered. It does not close the client.
func (r *Redis) Close() error {
	var err error
	r.once.Do(func() {
		r.closed.Store(true)
		r.writer.Close() // waits for the write batches in flight
		close(r.stop)
		<-r.done
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = r.Flush(ctx)
	})
	return err
}

func sha1Hex(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}
