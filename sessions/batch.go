package sessions

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// maxBatch bounds the ops of one write.lua call, so that one call stays
// short and Redis serves other clients between batches.
const maxBatch = 128

// Codes of write.lua's ops.
const (
	opCreate = "c"
	opUpdate = "u"
	opTouch  = "t"
	opResume = "r"
)

// writeOp is one session write waiting for, or in, a batch.
type writeOp struct {
	ctx  context.Context
	key  string
	code string
	args []string
	done chan struct{} // closed when resp and err are set
	resp rueidis.RedisMessage
	err  error
}

var errNoReply = errors.New("sessions: batch reply is missing an op")

// write runs one op of write.lua on key in the next batch and returns its
// reply. A lone caller's batch starts at once; callers that arrive while a
// batch is in flight wait for the next one, which carries all of them (up
// to maxBatch). Each op holds an in-flight slot from here until its batch
// answers, so the queue is bounded by MaxInFlight: past it write fails at
// once with ErrBusy. When ctx ends first, write returns ctx.Err(); the op
// is dropped if its batch has not been sent yet.
func (r *Redis) write(ctx context.Context, key, code string, args ...string) (rueidis.RedisMessage, error) {
	if err := r.acquire(); err != nil {
		return rueidis.RedisMessage{}, err
	}
	op := &writeOp{ctx: ctx, key: key, code: code, args: args, done: make(chan struct{})}
	r.bmu.Lock()
	if r.closed.Load() {
		// Close has waited for the batches already: start none.
		r.bmu.Unlock()
		r.release()
		return rueidis.RedisMessage{}, errClosed
	}
	r.queue = append(r.queue, op)
	start := !r.running
	r.running = true
	r.bmu.Unlock()
	if start {
		go r.runBatches()
	}
	select {
	case <-op.done:
		return op.resp, op.err
	case <-ctx.Done():
		return rueidis.RedisMessage{}, ctx.Err()
	}
}

// runBatches sends batches until the queue is empty.
func (r *Redis) runBatches() {
	for {
		r.bmu.Lock()
		n := min(len(r.queue), maxBatch)
		if n == 0 {
			r.running = false
			r.queue = nil
			if r.idle != nil {
				close(r.idle)
				r.idle = nil
			}
			r.bmu.Unlock()
			return
		}
		batch := make([]*writeOp, n)
		copy(batch, r.queue)
		r.queue = append(r.queue[:0], r.queue[n:]...)
		r.bmu.Unlock()
		r.sendBatch(batch)
	}
}

// sendBatch sends ops (those whose caller still waits) and hands each its
// reply. On a cluster each op is its own call, since sessions hash to
// different slots; they still share one pipeline.
func (r *Redis) sendBatch(ops []*writeOp) {
	live := ops[:0]
	for _, op := range ops {
		if err := op.ctx.Err(); err != nil {
			r.finish(op, rueidis.RedisMessage{}, err)
			continue
		}
		live = append(live, op)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := batchContext(live)
	defer cancel()
	var groups [][]*writeOp
	if r.cluster {
		for i := range live {
			groups = append(groups, live[i:i+1])
		}
	} else {
		groups = [][]*writeOp{live}
	}
	r.batches.Add(int64(len(groups)))
	resps := r.client.DoMulti(ctx, r.writeCmds(writeSHA, groups)...)
	var retry [][]*writeOp
	var at []int
	for i, resp := range resps {
		if err, ok := rueidis.IsRedisErr(resp.Error()); ok && err.IsNoScript() {
			retry = append(retry, groups[i])
			at = append(at, i)
		}
	}
	if len(retry) > 0 {
		for j, resp := range r.client.DoMulti(ctx, r.writeCmds("", retry)...) {
			resps[at[j]] = resp
		}
	}
	for i, resp := range resps {
		g := groups[i]
		replies, err := resp.ToArray()
		if err == nil && len(replies) != len(g) {
			err = errNoReply
		}
		for j, op := range g {
			if err != nil {
				r.finish(op, rueidis.RedisMessage{}, err)
				continue
			}
			r.finish(op, replies[j], replies[j].Error())
		}
	}
}

func (r *Redis) finish(op *writeOp, resp rueidis.RedisMessage, err error) {
	op.resp, op.err = resp, err
	close(op.done)
	r.release()
}

// batchContext bounds a batch by the latest deadline of its callers, or
// by none when one of them has none: a batch serves all of them.
func batchContext(ops []*writeOp) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, op := range ops {
		d, ok := op.ctx.Deadline()
		if !ok {
			return context.Background(), func() {}
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.Background(), latest)
}

// writeCmds builds one write.lua call per group, by EVALSHA when sha is
// set, else by EVAL. sendBatch retries a NOSCRIPT answer by EVAL itself
// rather than through rueidis' Lua.ExecMulti, which sends SCRIPT LOAD to
// every node before each multi call: a round trip per node per batch,
// where the batch exists to save round trips.
func (r *Redis) writeCmds(sha string, groups [][]*writeOp) rueidis.Commands {
	cmds := make(rueidis.Commands, 0, len(groups))
	for _, g := range groups {
		keys := make([]string, len(g))
		n := 0
		for i, op := range g {
			keys[i] = op.key
			n += 2 + len(op.args)
		}
		args := make([]string, 0, n)
		for _, op := range g {
			args = append(args, op.code, strconv.Itoa(len(op.args)))
			args = append(args, op.args...)
		}
		if sha != "" {
			cmds = append(cmds, r.client.B().Evalsha().Sha1(sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
		} else {
			cmds = append(cmds, r.client.B().Eval().Script(writeLua).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
		}
	}
	return cmds
}

// waitBatches waits until no batch is queued or in flight. Call it after
// closed is set: no batch starts after that.
func (r *Redis) waitBatches() {
	r.bmu.Lock()
	var idle chan struct{}
	if r.running {
		if r.idle == nil {
			r.idle = make(chan struct{})
		}
		idle = r.idle
	}
	r.bmu.Unlock()
	if idle != nil {
		<-idle
	}
}
