package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Span names of a publish: the core's publish, with its store append and
// its fan-out to the room's members as children.
const (
	SpanPublish = "corral.publish"
	SpanAppend  = "corral.store.append"
	SpanFanout  = "corral.fanout"
)

// Attribute keys of corral's spans.
const (
	AttrRoom = attribute.Key("corral.room")
	AttrSeq  = attribute.Key("corral.seq")
)

// noSpan is what Start returns while tracing is off.
var noSpan = trace.SpanFromContext(context.Background())

// Start opens a span named name under ctx's span, for room and, when
// known (not 0), seq. In a call of the Link (whose span lasts as long as
// the edge), it starts a new trace linked to the Link's span instead. Off,
// it returns ctx and a span that records nothing, without allocating.
func Start(ctx context.Context, name, room string, seq uint64) (context.Context, trace.Span) {
	if !on.Load() {
		return ctx, noSpan
	}
	attrs := []attribute.KeyValue{AttrRoom.String(room)}
	if seq != 0 {
		attrs = append(attrs, AttrSeq.Int64(int64(seq)))
	}
	opts := []trace.SpanStartOption{trace.WithAttributes(attrs...)}
	if link, ok := ctx.Value(streamKey{}).(trace.SpanContext); ok && !trace.SpanContextFromContext(ctx).IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: link}))
	}
	return tracer().Start(ctx, name, opts...)
}

// SetSeq records the seq a publish got.
func SetSeq(span trace.Span, seq uint64) {
	if span.IsRecording() {
		span.SetAttributes(AttrSeq.Int64(int64(seq)))
	}
}

// End records err (if any) on span and ends it.
func End(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
