package tracing

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// DefaultRatio is the share of traces sampled when OTEL_TRACES_SAMPLER is
// not set: a trace continues its parent's decision, and a new one is
// sampled at this ratio.
const DefaultRatio = 0.01

// on is whether Setup or Enable turned tracing on; everything else reads
// only this while it is off.
var on atomic.Bool

var tracerProvider atomic.Pointer[trace.TracerProvider]

// Enabled reports whether tracing is on.
func Enabled() bool { return on.Load() }

// Enable turns tracing on with tp (tests pass one with an in-memory
// exporter) and the W3C trace-context propagator. Enable(nil) turns it off.
func Enable(tp trace.TracerProvider) {
	if tp == nil {
		on.Store(false)
		return
	}
	tracerProvider.Store(&tp)
	on.Store(true)
}

// Setup turns tracing on when the environment asks for it: an OTLP
// endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or OTEL_TRACES_EXPORTER=otlp, unless
// OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER names another exporter
// (none). The exporter is OTLP over HTTP and reads the
// other OTEL_EXPORTER_OTLP_* variables itself (headers, timeout,
// certificates); OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES name the
// process (default service name: service); OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG pick the sampler (default: parent-based, new
// traces at DefaultRatio). The returned shutdown flushes what is buffered;
// with tracing off it does nothing.
func Setup(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	none := func(context.Context) error { return nil }
	if !wanted(os.Getenv) {
		return none, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return none, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(service)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil {
		return none, fmt.Errorf("tracing: resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if os.Getenv("OTEL_TRACES_SAMPLER") == "" {
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(DefaultRatio))))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	Enable(tp)
	return func(ctx context.Context) error {
		Enable(nil)
		if err := tp.Shutdown(ctx); err != nil {
			return fmt.Errorf("tracing: shutdown: %w", err)
		}
		return nil
	}, nil
}

// wanted reads the environment's choice: on with an endpoint, unless
// disabled.
func wanted(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch e := getenv("OTEL_TRACES_EXPORTER"); {
	case strings.Contains(e, "otlp"):
		return true // to the endpoint given, or OTLP's default, localhost:4318
	case e != "":
		return false // none, or an exporter corral does not have
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

func tracer() trace.Tracer {
	return (*tracerProvider.Load()).Tracer("github.com/corral-rt/corral")
}
