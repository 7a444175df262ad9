package server

import (
	"context"

	"connectrpc.com/connect/v2"
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
