package sessions

import (
	"context"
	"errors"
	"strconv"

	"github.com/corral-rt/corral/internal/batch"
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

// writeArg is one session write: an op of write.lua on key.
type writeArg struct {
	key  string
	code string
	args []string
}

type writeOp = batch.Op[writeArg, rueidis.RedisMessage]

var errNoReply = errors.New("sessions: batch reply is missing an op")

// newWriter returns the batcher of r's writes (up to maxBatch ops per
// write.lua call), bounded by r.limit.
func (r *Redis) newWriter() *batch.Batcher[writeArg, rueidis.RedisMessage] {
	return batch.New(batch.Options[writeArg, rueidis.RedisMessage]{
		Max: maxBatch, Limit: r.limit, Busy: ErrBusy, Closed: errClosed, Send: r.sendBatch,
	})
}

// write runs one op of write.lua on key in the next batch and returns its
// reply (batch.Batcher.Do: past MaxInFlight it fails at once with
// ErrBusy; when ctx ends first it returns ctx.Err()).
func (r *Redis) write(ctx context.Context, key, code string, args ...string) (rueidis.RedisMessage, error) {
	return r.writer.Do(ctx, writeArg{key: key, code: code, args: args})
}

// sendBatch sends ops and hands each its reply. On a cluster each op is
// its own call, since sessions hash to different slots; they still share
// one pipeline.
func (r *Redis) sendBatch(live []*writeOp) {
	ctx, cancel := batch.Context(live)
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
				op.Finish(rueidis.RedisMessage{}, err)
				continue
			}
			op.Finish(replies[j], replies[j].Error())
		}
	}
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
			keys[i] = op.Arg.key
			n += 2 + len(op.Arg.args)
		}
		args := make([]string, 0, n)
		for _, op := range g {
			args = append(args, op.Arg.code, strconv.Itoa(len(op.Arg.args)))
			args = append(args, op.Arg.args...)
		}
		if sha != "" {
			cmds = append(cmds, r.client.B().Evalsha().Sha1(sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
		} else {
			cmds = append(cmds, r.client.B().Eval().Script(writeLua).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
		}
	}
	return cmds
}
