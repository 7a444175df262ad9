package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"

	"connectrpc.com/connect/v2"
	"github.com/corral-rt/corral/internal/reasons"
	"github.com/prometheus/client_golang/prometheus"
)

// endOnClose returns a server interceptor that ends the server-streaming
// calls (RoomService.Events) when closing is done, with CodeUnavailable so
// that their clients resume elsewhere or later. Without it a graceful
// shutdown would wait for streams that never end by themselves.
func endOnClose(closing context.Context) connect.ServerInterceptor {
	return func(next connect.ServerFunc) connect.ServerFunc {
		return func(ctx context.Context, spec connect.Spec, stream connect.ServerStream) error {
			if spec.StreamType != connect.StreamTypeServer {
				return next(ctx, spec, stream)
			}
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			defer context.AfterFunc(closing, cancel)()
			err := next(ctx, spec, stream)
			if err != nil && closing.Err() != nil {
				return connect.NewError(connect.CodeUnavailable, "server: shutting down").WithCause(err)
			}
			return err
		}
	}
}

// errTooManyStreams refuses an Events stream past the per-key bound.
var errTooManyStreams = errors.New("server: too many open Events streams for this API key; close one first")

// limitStreams returns a server interceptor that bounds the server-streaming
// calls (RoomService.Events) open at once per API key (per Authorization
// header; the calls without one share a count) to max, refusing more with
// CodeResourceExhausted. refused, if not nil, counts them by reason
// "streams_per_key".
func limitStreams(max int, refused *prometheus.CounterVec) connect.ServerInterceptor {
	counters := reasons.Counters("server", refused, apiRefusalNames[:])
	var mu sync.Mutex
	open := make(map[[sha256.Size]byte]int) // guarded by mu
	return func(next connect.ServerFunc) connect.ServerFunc {
		return func(ctx context.Context, spec connect.Spec, stream connect.ServerStream) error {
			if spec.StreamType != connect.StreamTypeServer {
				return next(ctx, spec, stream)
			}
			var h string
			if info, ok := connect.CallInfoForServerContext(ctx); ok && info != nil {
				h = info.RequestHeader().Get("Authorization")
			}
			key := sha256.Sum256([]byte(h))
			mu.Lock()
			if open[key] >= max {
				mu.Unlock()
				if counters != nil {
					counters[apiStreamsPerKey].Inc()
				}
				return connect.NewError(connect.CodeResourceExhausted, errTooManyStreams.Error()).WithCause(errTooManyStreams)
			}
			open[key]++
			mu.Unlock()
			defer func() {
				mu.Lock()
				if open[key]--; open[key] == 0 {
					delete(open, key)
				}
				mu.Unlock()
			}()
			return next(ctx, spec, stream)
		}
	}
}
