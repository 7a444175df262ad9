package tracing

import (
	"context"

	"go.opentelemetry.io/otel/trace"
)

// SpanEdgePublish is the edge's span of a client's publish: from the
// frame's arrival to its place in the Link's queue. Its trace context
// travels in the frame (EdgeFrame.traceparent), so the core's
// corral.publish is its child.
const SpanEdgePublish = "corral.edge.publish"

// StartCarried opens a span named name for room at the start of a new
// trace and returns it with its traceparent, to carry to the next process
// with the frame. Off, it returns a span that records nothing and "",
// without allocating.
func StartCarried(name, room string) (trace.Span, string) {
	if !on.Load() {
		return noSpan, ""
	}
	ctx, span := tracer().Start(context.Background(), name, trace.WithAttributes(AttrRoom.String(room)))
	var c traceparent
	propagator.Inject(ctx, &c)
	return span, c.v
}

// Continue returns ctx carrying the remote span context of tp, a
// traceparent from StartCarried, so that the spans Start opens under it
// are its children. With tracing off, or tp empty or malformed, it
// returns ctx as is.
func Continue(ctx context.Context, tp string) context.Context {
	if tp == "" || !on.Load() {
		return ctx
	}
	return propagator.Extract(ctx, &traceparent{tp})
}

// traceparent is a carrier of the traceparent header alone (the frame has
// no room for tracestate; corral sets none).
type traceparent struct{ v string }

const traceparentKey = "traceparent"

func (c traceparent) Get(key string) string {
	if key == traceparentKey {
		return c.v
	}
	return ""
}

func (c *traceparent) Set(key, value string) {
	if key == traceparentKey {
		c.v = value
	}
}

func (c traceparent) Keys() []string { return []string{traceparentKey} }
