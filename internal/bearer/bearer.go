// Package bearer is the one client interceptor that presents a key as
// "Authorization: Bearer <key>" on every Connect call: the internal API's
// client (apiclient) and the hooks caller (hooks) both send it.
package bearer

import (
	"context"

	"connectrpc.com/connect/v2"
)

// Interceptor returns a client interceptor that sets the Authorization
// header of every call, unary and streaming, to "Bearer " + key.
func Interceptor(key string) connect.ClientInterceptor {
	value := "Bearer " + key
	return func(next connect.ClientFunc) connect.ClientFunc {
		return func(ctx context.Context, spec connect.Spec) (connect.ClientStream, error) {
			if info, ok := connect.CallInfoForClientContext(ctx); ok {
				info.RequestHeader().Set("Authorization", value)
			}
			return next(ctx, spec)
		}
	}
}
