package bench

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connectproto"
	"github.com/corral-rt/corral/client"
	corralv1 "github.com/corral-rt/corral/gen/corral/v1"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
)

// ledger collects acknowledged publishes: what the delivery check holds
// members to.
type ledger struct {
	mu   sync.Mutex // guards the following fields
	acks []ack
	upto map[string]uint64
}

func newLedger() *ledger { return &ledger{upto: make(map[string]uint64)} }

func (l *ledger) add(a ack) {
	l.mu.Lock()
	l.acks = append(l.acks, a)
	l.upto[a.room] = max(l.upto[a.room], a.seq)
	l.mu.Unlock()
}

// snapshot returns the acks and the highest acknowledged seq per room.
func (l *ledger) snapshot() ([]ack, map[string]uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	upto := make(map[string]uint64, len(l.upto))
	for k, v := range l.upto {
		upto[k] = v
	}
	return append([]ack(nil), l.acks...), upto
}

// apiPublish publishes server-side through the internal API: the events of
// p, round-robin over rooms, from a bounded pool of workers.
func apiPublish(ctx context.Context, r *run, api corralv1connect.RoomServiceClient, l *ledger,
	rooms func(int) string, start time.Time, p profile, workers, size int, timeout time.Duration) {
	apiPublishUntil(ctx, ctx, r, api, l, rooms, start, p, workers, size, timeout)
}

// apiPublishUntil is apiPublish that stops scheduling publishes when stop
// is done, while those already scheduled complete under ctx.
func apiPublishUntil(ctx, stop context.Context, r *run, api corralv1connect.RoomServiceClient, l *ledger,
	rooms func(int) string, start time.Time, p profile, workers, size int, timeout time.Duration) {
	type job struct {
		k  int
		at time.Time
	}
	jobs := make(chan job, 4096)
	// pausedUntil (unix nanos) honours the server's overload hint: the
	// publishes scheduled before it are not sent (counted as
	// "publish:backed_off"), so the generator builds no backlog of its own.
	var pausedUntil atomic.Int64
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if time.Now().UnixNano() < pausedUntil.Load() {
					r.fail("publish:backed_off", j.at.UnixNano())
					continue
				}
				room := rooms(j.k)
				st := r.stepOf(j.at.UnixNano())
				r.sentOne(j.at)
				cctx, cancel := context.WithTimeout(ctx, timeout)
				res, err := api.Publish(cctx, &corralv1.PublishRequest{Room: room, Payload: payload(nil, j.at, j.k, size)})
				cancel()
				if err != nil {
					if d, ok := overloadHint(err); ok {
						until := time.Now().Add(d).UnixNano()
						for {
							old := pausedUntil.Load()
							if old >= until || pausedUntil.CompareAndSwap(old, until) {
								break
							}
						}
						r.fail("publish:overloaded", j.at.UnixNano())
						continue
					}
					r.fail("publish:"+connect.CodeOf(err).String(), j.at.UnixNano())
					continue
				}
				r.acked(st, time.Since(j.at))
				l.add(ack{room: room, seq: res.GetSeq(), step: st})
			}
		}()
	}
	pace(stop, start, p, 0, func(k int, at time.Time) bool {
		select {
		case jobs <- job{k, at}:
			return true
		case <-stop.Done():
			return false
		}
	})
	close(jobs)
	wg.Wait()
}

// overloadHint reports the retry hint of an internal API call refused
// because the server's queues toward its members are backed up
// (docs/API.md, "Overload push-back"): resource_exhausted with a
// corral.v1.Error detail of code CODE_OVERLOADED.
func overloadHint(err error) (time.Duration, bool) {
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeResourceExhausted {
		return 0, false
	}
	for _, d := range ce.Details() {
		m, derr := connectproto.UnmarshalErrorDetail(d)
		if e, ok := m.(*corralv1.Error); derr == nil && ok && e.GetCode() == corralv1.Code_CODE_OVERLOADED {
			return time.Duration(e.GetRetryAfterMs()) * time.Millisecond, true
		}
	}
	return 0, false
}

// clientPublish publishes from the members given as senders, each waiting
// for its Published before its next publish: the events of p, round-robin
// over senders. An event whose sender still has a full queue is counted as
// "sender-busy" and skipped.
func clientPublish(ctx context.Context, r *run, l *ledger, senders []*member,
	start time.Time, p profile, size int, timeout time.Duration) {
	if len(senders) == 0 {
		return
	}
	type job struct {
		k  int
		at time.Time
	}
	queues := make([]chan job, len(senders))
	var wg sync.WaitGroup
	for i, m := range senders {
		q := make(chan job, 16)
		queues[i] = q
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range q {
				st := r.stepOf(j.at.UnixNano())
				r.sentOne(j.at)
				id := m.name + "-" + strconv.Itoa(j.k)
				cctx, cancel := context.WithTimeout(ctx, timeout)
				res, err := m.conn.Publish(cctx, m.room, id, payload(nil, j.at, j.k, size))
				cancel()
				if err != nil {
					r.fail(publishErrorKind(err), j.at.UnixNano())
					continue
				}
				r.acked(st, time.Since(j.at))
				l.add(ack{room: m.room, seq: res.GetSeq(), id: id, step: st})
			}
		}()
	}
	pace(ctx, start, p, 0, func(k int, at time.Time) bool {
		select {
		case queues[k%len(queues)] <- job{k, at}:
		default:
			r.fail("sender-busy", at.UnixNano())
		}
		return true
	})
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
}

func publishErrorKind(err error) string {
	var se *client.ServerError
	var ce *client.CloseError
	switch {
	case errors.As(err, &se):
		return "publish:" + codeName(se.Err.GetCode())
	case errors.Is(err, context.DeadlineExceeded):
		return "ack-timeout"
	case errors.As(err, &ce):
		return "publish:closed"
	}
	return "publish:" + dialErrorKind(err)
}
