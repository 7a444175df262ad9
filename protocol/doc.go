// Package protocol encodes and decodes the frames of corral's client
// protocol, in both WebSocket subprotocols, and holds the table of
// close/error codes.
//
// The frames are [corralv1.ClientFrame] (client to server) and
// [corralv1.ServerFrame] (server to client), defined in
// proto/corral/v1/client.proto. Each WebSocket message carries exactly one
// frame; several server frames may travel together in one Batch frame. All
// functions are safe for concurrent use and keep no reference to the bytes
// they are given.
//
// # Subprotocols
//
// [SubprotocolProto] ("corral.v1.proto") sends binary WebSocket messages,
// each the plain protobuf encoding of one frame.
//
// [SubprotocolJSON] ("corral.v1.json") sends text WebSocket messages, each
// one frame in the protojson mapping of the messages: the oneof field name is
// the key of a one-member object, fields use their lowerCamelCase JSON
// names, and zero values are omitted:
//
//	{"publish":{"room":"a","id":"c1","payload":{"text":"hi"}}}
//	{"message":{"room":"a","seq":7,"sender":"u1","payload":{"text":"hi"},"timeMs":1700000000000,"id":"c1"}}
//	{"error":{"code":4403,"message":"forbidden","room":"a"}}
//
// It differs from protojson on purpose, for browsers:
//
//  1. A payload (a bytes field) is an inline JSON value, not base64. A
//     decoded payload must be valid JSON and is kept byte for byte as
//     sent. A payload that would not read back the same inline (binary
//     bytes published by a protobuf client, JSON with white space around
//     it, the JSON null) is written as "payloadBase64" (standard base64)
//     instead, and decoders accept "payloadBase64" from clients too. An
//     empty payload is omitted; a null payload is the same as none.
//  2. 64-bit and 32-bit integers (seq, timeMs, heartbeatMs, ...) are JSON
//     numbers. Decoders also accept numeric strings and integral numbers in
//     exponent form, as protojson does. Seqs stay below 2^53, so
//     JavaScript numbers hold them exactly.
//  3. A Code is written as its number ("code":4001); decoders accept the
//     number or the enum value's name ("CODE_SLOW_CONSUMER").
//
// Like protojson, decoders also accept the proto field names
// ("session_id"), treat null as the zero value, and ignore unknown fields
// inside a kind and unknown members next to it. A message must be valid UTF-8 (RFC 6455 requires it
// of text messages); strings are written with invalid UTF-8 replaced by
// U+FFFD.
//
// # Generated code
//
// The per-message code of the corral.v1.json codec (client_json.pb.go: an
// append function and a decode method for every message reachable from
// ClientFrame and ServerFrame) is generated from proto/corral/v1/client.proto
// by cmd/protoc-gen-corral-json, which also writes the browser SDK's field
// tables (clients/js/src/gen/corral/v1/client_json.ts). The field options in
// proto/corral/v1/options.proto mark where the format departs from protojson
// ((corral.v1.inline_json) payloads, (corral.v1.json_last) order). The
// runtime it calls is hand-written: json.go (append helpers, strings),
// jsonscan.go (the decoder's scanning of values) and jsonvalid.go (the
// one-pass validator). Regenerate with `make generate`; `make check` fails
// when the generated file is stale. docs/BENCHMARKS.md ("JSON codec") has
// the measurements that chose this over protojson.
//
// # Errors
//
// Decoders return errors that wrap [ErrBadFrame] (the message is not valid
// JSON or protobuf, a field has the wrong type, a JSON object names more
// than one kind) or [ErrUnknownFrame] (the message is well formed but sets
// no kind this version knows, for example a frame from a newer peer). Inside
// a Batch, a frame of an unknown kind does not fail the batch: it is kept as
// a ServerFrame with no kind set, and callers skip it.
//
// # Encoding once
//
// The server encodes a room's message once per encoding with
// [AppendServer] and splices the same bytes into the batch of every
// recipient with [AppendBatch], which neither decodes nor re-encodes them.
//
// # Codes
//
// [corralv1.Code] is the one table of WebSocket close codes and error-frame
// codes; [AdviceOf] tells from a code's range whether a client should
// resume, retry later, or stop.
package protocol
