package tracing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
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

// consoleOut is where the console exporter writes (tests replace it).
var consoleOut io.Writer = os.Stdout

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

// Setup turns tracing on when the environment asks for it, with the
// standard variables of the OpenTelemetry SDK specification:
//
//   - OTEL_TRACES_EXPORTER: a comma-separated list of otlp, console
//     (spans as JSON on stdout) and none; unset, otlp when an endpoint
//     (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
//     is set, else off. OTEL_SDK_DISABLED=true keeps it off.
//   - OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL:
//     http/protobuf (the default) or grpc. The exporter reads the other
//     OTEL_EXPORTER_OTLP_* variables itself (headers, timeout,
//     certificates).
//   - OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG: always_on,
//     always_off, traceidratio and their parentbased_ forms; unset,
//     parent-based with new traces at DefaultRatio.
//   - OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES name the process
//     (default service name: service).
//
// A value Setup does not know is an error naming the variable, never a
// silent "off". Errors of the exporters at run time (a collector that
// does not answer) go to logger, not to the standard error of the SDK's
// default handler. The returned shutdown flushes what is buffered; with
// tracing off it does nothing.
func Setup(ctx context.Context, service string, logger *slog.Logger) (shutdown func(context.Context) error, err error) {
	none := func(context.Context) error { return nil }
	kinds, err := exporters(os.Getenv)
	if err != nil || len(kinds) == 0 {
		return none, err
	}
	sampler, err := samplerFromEnv(os.Getenv)
	if err != nil {
		return none, err
	}
	var exps []sdktrace.SpanExporter
	for _, k := range kinds {
		exp, err := newExporter(ctx, k, os.Getenv)
		if err != nil {
			return none, err
		}
		exps = append(exps, exp)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(service)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil {
		return none, fmt.Errorf("tracing: resource: %w", err)
	}
	// The batch span processor hands a failed export to otel.Handle.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("tracing: export failed", "err", err)
	}))
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res), sdktrace.WithSampler(sampler)}
	for _, exp := range exps {
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	Enable(tp)
	logger.Info("tracing on", "exporters", strings.Join(kinds, ","), "protocol", protocol(os.Getenv), "sampler", sampler.Description())
	return func(ctx context.Context) error {
		Enable(nil)
		if err := tp.Shutdown(ctx); err != nil {
			return fmt.Errorf("tracing: shutdown: %w", err)
		}
		return nil
	}, nil
}

// exporters reads the environment's choice of exporters: otlp and/or
// console, or none (tracing off).
func exporters(getenv func(string) string) ([]string, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, nil
	}
	e := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))
	if e == "" {
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
			return []string{"otlp"}, nil
		}
		return nil, nil
	}
	var kinds []string
	for _, k := range strings.Split(e, ",") {
		switch k = strings.ToLower(strings.TrimSpace(k)); k {
		case "none":
			return nil, nil // "none" anywhere turns every exporter off
		case "otlp", "console":
			kinds = append(kinds, k)
		case "":
		default:
			return nil, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%q: want otlp, console or none", k)
		}
	}
	return kinds, nil
}

// protocol is the OTLP protocol the environment asks for, its traces
// variable first.
func protocol(getenv func(string) string) string {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := strings.TrimSpace(getenv(v)); p != "" {
			return p
		}
	}
	return "http/protobuf"
}

func newExporter(ctx context.Context, kind string, getenv func(string) string) (sdktrace.SpanExporter, error) {
	if kind == "console" {
		exp, err := stdouttrace.New(stdouttrace.WithWriter(consoleOut))
		if err != nil {
			return nil, fmt.Errorf("tracing: console exporter: %w", err)
		}
		return exp, nil
	}
	var exp sdktrace.SpanExporter
	var err error
	switch p := protocol(getenv); p {
	case "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("tracing: OTEL_EXPORTER_OTLP_PROTOCOL=%q: want http/protobuf or grpc", p)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	return exp, nil
}

// samplerFromEnv builds the sampler OTEL_TRACES_SAMPLER names, refusing
// what the SDK would otherwise replace by its default with only a line on
// standard error.
func samplerFromEnv(getenv func(string) string) (sdktrace.Sampler, error) {
	name := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")))
	arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil // the specification's default
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("tracing: OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1", arg)
		}
		return r, nil
	}
	switch name {
	case "":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(DefaultRatio)), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(r), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	}
	return nil, errors.New("tracing: OTEL_TRACES_SAMPLER=" + strconv.Quote(name) +
		": want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio")
}

func tracer() trace.Tracer {
	return (*tracerProvider.Load()).Tracer("github.com/corral-rt/corral")
}
