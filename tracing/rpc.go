package tracing

import (
	"context"
	"errors"
	"io"
	"strings"

	"connectrpc.com/connect/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

var propagator = propagation.TraceContext{}

// ServerInterceptor puts a server span on every call: a child of the
// caller's span when the request carries a traceparent. A bidi stream (the
// Link) lives as long as its edge; its span is not made the parent of the
// publishes it carries (their traces would never end): Start links them
// to it instead.
func ServerInterceptor() connect.ServerInterceptor {
	return func(next connect.ServerFunc) connect.ServerFunc {
		return func(ctx context.Context, spec connect.Spec, stream connect.ServerStream) error {
			if !on.Load() {
				return next(ctx, spec, stream)
			}
			if info, ok := connect.CallInfoForServerContext(ctx); ok {
				ctx = propagator.Extract(ctx, headerCarrier{info.RequestHeader()})
			}
			ctx, span := tracer().Start(ctx, spanName(spec), trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(rpcAttributes(spec)...))
			defer span.End()
			inner := ctx
			if spec.StreamType == connect.StreamTypeBidi {
				inner = context.WithValue(trace.ContextWithSpanContext(ctx, trace.SpanContext{}), streamKey{}, span.SpanContext())
			}
			err := next(inner, spec, stream)
			record(span, err)
			return err
		}
	}
}

// ClientInterceptor puts a client span on every call and sends its
// traceparent with the request.
func ClientInterceptor() connect.ClientInterceptor {
	return func(next connect.ClientFunc) connect.ClientFunc {
		return func(ctx context.Context, spec connect.Spec) (connect.ClientStream, error) {
			if !on.Load() {
				return next(ctx, spec)
			}
			ctx, span := tracer().Start(ctx, spanName(spec), trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(rpcAttributes(spec)...))
			if info, ok := connect.CallInfoForClientContext(ctx); ok {
				propagator.Inject(ctx, headerCarrier{info.RequestHeader()})
			}
			s, err := next(ctx, spec)
			if err != nil {
				record(span, err)
				span.End()
				return nil, err
			}
			return &endingStream{ClientStream: s, span: span, unary: spec.StreamType == connect.StreamTypeUnary}, nil
		}
	}
}

// endingStream ends the client span when the call is done: a unary
// call's response, the error that ends receiving (io.EOF: a clean end),
// or Close. A second End of a span is ignored.
type endingStream struct {
	connect.ClientStream
	span  trace.Span
	unary bool
}

func (s *endingStream) Receive(m any) error {
	err := s.ClientStream.Receive(m)
	switch {
	case err == nil && s.unary, errors.Is(err, io.EOF):
		s.span.End()
	case err != nil:
		record(s.span, err)
		s.span.End()
	}
	return err
}

func (s *endingStream) Close() error {
	err := s.ClientStream.Close()
	s.span.End()
	return err
}

type streamKey struct{}

func spanName(spec connect.Spec) string {
	return strings.TrimPrefix(spec.Procedure, "/")
}

func rpcAttributes(spec connect.Spec) []attribute.KeyValue {
	service, method, _ := strings.Cut(strings.TrimPrefix(spec.Procedure, "/"), "/")
	return []attribute.KeyValue{
		attribute.String("rpc.system", "connect_rpc"),
		attribute.String("rpc.service", service),
		attribute.String("rpc.method", method),
	}
}

// record marks span failed with err and its Connect code.
func record(span trace.Span, err error) {
	if err == nil {
		return
	}
	var ce *connect.Error
	code := connect.CodeUnknown
	if errors.As(err, &ce) {
		code = ce.Code()
	}
	span.SetAttributes(attribute.String("rpc.connect_rpc.error_code", code.String()))
	span.SetStatus(codes.Error, err.Error())
}

// headerCarrier lets the propagator read and write a connect.Header.
type headerCarrier struct{ h *connect.Header }

func (c headerCarrier) Get(key string) string { return c.h.Get(key) }
func (c headerCarrier) Set(key, value string) { c.h.Set(key, value) }
func (c headerCarrier) Keys() []string {
	keys := make([]string, 0, c.h.Len())
	for k := range c.h.All() {
		keys = append(keys, k)
	}
	return keys
}
