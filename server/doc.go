// Package server assembles corral's processes from the core and edge
// packages, with their HTTP endpoints: the one-binary mode (edge and core in
// one process, linked in-process), an edge alone (linked to a core over
// h2c), and a core alone. cmd/corral only parses flags into Options; tests
// start the same nodes in-process.
//
// HTTP endpoints of an edge: /ws (WebSocket: a connection whose first
// request is an upgrade to /ws is answered by the listener itself, without
// net/http, see upgrade.go), /healthz, /readyz, the demo
// page at / (package web), and /metrics unless there is an internal
// listener (Options.InternalAddr), which then serves /metrics and POST
// /admin/drain. A core serves corral.v1.RoomService (Connect, gRPC and
// gRPC-Web, over HTTP/1.1 and h2c) with gRPC server reflection behind the
// same key, plus /healthz, /readyz and /metrics.
// Admin and debug endpoints are served on internal listeners only, behind
// the API key (admin.go states the rule, mountAdmin applies it).
//
// RoomService over HTTP requires a bearer API key on every call, Link
// included ([RequireAPIKey], Options.APIKeys), unless Options.APIInsecure
// disables it for local development; a split edge presents
// Options.CoreAPIKey. The edge of Serve is linked in-process and needs
// none. An insecure node logs one warning naming every open endpoint.
package server
