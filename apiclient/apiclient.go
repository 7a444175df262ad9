// Package apiclient is a thin client for corral's internal API, the
// RoomService methods for application backends (Publish, Broadcast,
// Batch, History, Members, Disconnect, Events, Grant, Revoke, Subscribe,
// Unsubscribe, Rooms, Info), over Connect, gRPC or gRPC-Web.
//
// It returns the generated corralv1connect.RoomServiceClient, with the
// bearer API key on every call; see proto/corral/v1/room_service.proto for
// the methods' contracts and docs/API.md for the guarantees.
package apiclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connecthttp"
	"github.com/corral-rt/corral/gen/corral/v1/corralv1connect"
	"github.com/corral-rt/corral/internal/bearer"
	"google.golang.org/protobuf/types/known/emptypb"
)

// Protocol is the wire protocol a client speaks.
type Protocol int

const (
	// Connect is the Connect protocol (HTTP/1.1 or HTTP/2), the default.
	Connect Protocol = iota
	// GRPC is gRPC (HTTP/2 only).
	GRPC
	// GRPCWeb is gRPC-Web.
	GRPCWeb
)

// Options configure [New]. The zero value (or nil) uses the Connect
// protocol over HTTP/2 (h2c for http:// URLs).
type Options struct {
	Protocol Protocol
	// HTTPClient sends the requests. Nil: for "http://" base URLs a client
	// speaking HTTP/2 without TLS (h2c, which corral serves), for
	// "https://" http.DefaultClient.
	HTTPClient connecthttp.HTTPClient
	// Transport, when set, carries the calls instead of HTTP; the base URL,
	// Protocol and HTTPClient are then ignored. For example
	// connectinprocess.New(node.APIServer()) calls a server in the same
	// process, through its auth.
	Transport connect.Transport
	// Interceptors run after the one that adds the key.
	Interceptors []connect.ClientInterceptor
}

// New returns a client for the internal API at baseURL, for example
// "http://127.0.0.1:8091" (corral serve --internal-addr) or the core's
// address (corral core), presenting key as a bearer token on every call.
// An empty key sends none, for a server run with api-insecure.
func New(baseURL, key string, opts *Options) corralv1connect.RoomServiceClient {
	var o Options
	if opts != nil {
		o = *opts
	}
	t := o.Transport
	if t == nil {
		hc := o.HTTPClient
		if hc == nil {
			hc = defaultHTTPClient(baseURL)
		}
		var topts []connecthttp.Option
		switch o.Protocol {
		case GRPC:
			topts = append(topts, connecthttp.WithGRPC())
		case GRPCWeb:
			topts = append(topts, connecthttp.WithGRPCWeb())
		}
		t = connecthttp.NewTransport(hc, baseURL, topts...)
	}
	ics := make([]connect.ClientInterceptor, 0, 2+len(o.Interceptors))
	ics = append(ics, sendErrors)
	if key != "" {
		ics = append(ics, Bearer(key))
	}
	ics = append(ics, o.Interceptors...)
	return corralv1connect.NewRoomServiceClient(connect.NewClient(t, ics...))
}

// Bearer returns a client interceptor that presents key on every call as
// "Authorization: Bearer <key>", the header corral's internal API checks.
func Bearer(key string) connect.ClientInterceptor { return bearer.Interceptor(key) }

// sendErrors makes a server stream refused at once (for example for a
// missing key) report the server's error rather than io.EOF: when sending
// the request finds the call already over, the error is read from the
// stream. (The in-process transport reports such a refusal only to
// Receive.)
func sendErrors(next connect.ClientFunc) connect.ClientFunc {
	return func(ctx context.Context, spec connect.Spec) (connect.ClientStream, error) {
		s, err := next(ctx, spec)
		if err != nil || spec.StreamType != connect.StreamTypeServer {
			return s, err
		}
		return sendErrorStream{s}, nil
	}
}

type sendErrorStream struct{ connect.ClientStream }

func (s sendErrorStream) Send(msg any) error {
	err := s.ClientStream.Send(msg)
	if errors.Is(err, io.EOF) {
		var discard emptypb.Empty
		if rerr := s.ClientStream.Receive(&discard); rerr != nil && !errors.Is(rerr, io.EOF) {
			return rerr
		}
	}
	return err
}

// H2CClient returns an HTTP client that speaks HTTP/2 without TLS (h2c)
// only, as corral's internal listeners do; gRPC needs HTTP/2.
func H2CClient() *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{
		Protocols:       p,
		MaxIdleConns:    16,
		IdleConnTimeout: 90 * time.Second,
	}}
}

func defaultHTTPClient(baseURL string) connecthttp.HTTPClient {
	if strings.HasPrefix(baseURL, "https://") {
		return http.DefaultClient
	}
	return H2CClient()
}
