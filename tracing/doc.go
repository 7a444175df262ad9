// Package tracing is corral's OpenTelemetry tracing: Setup configures it
// from the standard OTEL_* environment variables (off unless they name an
// exporter or an OTLP endpoint; OTLP over HTTP or gRPC, or the console;
// sampled; export errors in the structured log), the interceptors put a span on every call of
// the internal API and on the Link, and Start opens the spans of a
// publish (core: publish, store append, fan-out). StartCarried opens the
// edge's span of a client publish and gives its traceparent to carry in
// the Link frame; Continue makes the core's spans its children.
//
// Off, every entry point costs one atomic load: no span, no allocation.
//
// connectrpc.com/otelconnect has no release for connect-go v2 (the module
// proxy lists none), so the interceptors are corral's own: W3C
// traceparent in the request headers, one span per call with the rpc.*
// attributes and the Connect code of a failure.
package tracing
