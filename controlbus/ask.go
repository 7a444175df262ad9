package controlbus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/corral-rt/corral/internal/pubsub"
	"github.com/corral-rt/corral/internal/retry"
	"github.com/redis/rueidis"
)

// Queries: a core asks every other core a question (RoomService.Info,
// Rooms, Connections with every_core) and gathers their answers. A query
// goes on "{prefix}:control:ask" as "origin\nid\nquery"; each core that
// hears it answers on the asker's own channel,
// "{prefix}:control:reply:{origin}", as "id\nanswer". The asker knows how
// many cores to wait for: PUBLISH returns how many heard the query.

// maxAnswering bounds the queries a core answers at once; past it a
// query is not answered (the asker counts that core missing).
const maxAnswering = 16

// maxAnswers bounds the answers one Ask gathers (the cores it hears
// from); past it the others are counted as not answering.
const maxAnswers = 64

// ErrNotListening is returned by Ask while the bus's own subscriptions
// are down (Redis restarting): no answer could reach it.
var ErrNotListening = errors.New("controlbus: not subscribed yet")

// Answer sets the function that answers other cores' queries. Each query
// gets a call of its own, at most 16 at once; ctx ends after the asker's
// patience (AnswerTimeout).
func (r *Redis) Answer(fn func(ctx context.Context, query []byte) []byte) {
	r.mu.Lock()
	r.answer = fn
	r.mu.Unlock()
}

// AnswerTimeout bounds how long a core works on another core's query.
const AnswerTimeout = 2 * time.Second

// Ask sends query to every other core and returns the answers that came
// before ctx ended, and how many cores heard the query (asked minus
// len(answers) did not answer in time).
func (r *Redis) Ask(ctx context.Context, query []byte) (answers [][]byte, asked int, err error) {
	r.mu.Lock()
	up := r.askSubscribed && r.replySubscribed
	r.mu.Unlock()
	if !up {
		return nil, 0, ErrNotListening
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	replies := make(chan []byte, maxAnswers)
	r.mu.Lock()
	r.pending[id] = replies
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.pending, id)
		r.mu.Unlock()
	}()
	msg := r.origin + "\n" + id + "\n" + string(query)
	n, err := r.client.Do(ctx, r.client.B().Publish().Channel(r.askChannel).Message(msg).Build()).AsInt64()
	if err != nil {
		return nil, 0, fmt.Errorf("controlbus: ask: %w", err)
	}
	asked = max(int(n)-1, 0) // this core's own subscription heard it
	for len(answers) < asked && len(answers) < cap(replies) {
		select {
		case a := <-replies:
			answers = append(answers, a)
		case <-ctx.Done():
			return answers, asked, nil
		}
	}
	return answers, asked, nil
}

// onAsk answers another core's query, on a goroutine of its own.
func (r *Redis) onAsk(ctx context.Context, msg string) {
	origin, rest, ok := strings.Cut(msg, "\n")
	if !ok || origin == r.origin || origin == "" {
		return
	}
	id, query, ok := strings.Cut(rest, "\n")
	if !ok || id == "" {
		return
	}
	r.mu.Lock()
	fn := r.answer
	r.mu.Unlock()
	if fn == nil {
		return
	}
	select {
	case r.answering <- struct{}{}:
	default:
		return // too many at once: this core is counted missing
	}
	r.answers.Add(1)
	go func() {
		defer r.answers.Done()
		defer func() { <-r.answering }()
		actx, cancel := context.WithTimeout(ctx, AnswerTimeout)
		defer cancel()
		a := fn(actx, []byte(query))
		ch := r.replyPrefix + origin
		_ = r.client.Do(actx, r.client.B().Publish().Channel(ch).Message(id+"\n"+string(a)).Build()).Error()
	}()
}

// onReply hands an answer to the Ask waiting for it, if still waiting.
func (r *Redis) onReply(msg string) {
	id, answer, ok := strings.Cut(msg, "\n")
	if !ok {
		return
	}
	r.mu.Lock()
	replies := r.pending[id]
	r.mu.Unlock()
	if replies == nil {
		return
	}
	select {
	case replies <- []byte(answer):
	default: // past maxAnswers: dropped, that core counted missing
	}
}

// follow keeps a subscription to channel until ctx ends, subscribing
// again after a failure; up reports whether it is subscribed.
func (r *Redis) follow(ctx context.Context, channel string, up func(bool), fn func(string)) {
	b := retry.Backoff{Base: 50 * time.Millisecond, Cap: 5 * time.Second, ResetAfter: 10 * time.Second}
	rctx := rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) { up(s.Kind == "subscribe") })
	for ctx.Err() == nil {
		b.Start()
		_ = pubsub.Receive(rctx, r.client, channel, func(m rueidis.PubSubMessage) { fn(m.Message) })
		up(false)
		b.Wait(ctx)
	}
}
