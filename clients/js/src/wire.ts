// The shapes of corral.v1.json frames, derived from the generated protobuf
// types so that a change to proto/ that the codec does not follow fails to
// compile. See protocol/doc.go in the server for the format.

import type * as pb from "./gen/corral/v1/client_pb.js";

/** Any JSON value: what a payload is, inline, in corral.v1.json. */
export type JsonValue =
  | null
  | boolean
  | number
  | string
  | JsonValue[]
  | { [key: string]: JsonValue };

/**
 * A payload as the SDK hands it over: the inline JSON value, or the bytes
 * of a payload that was not JSON (sent as "payloadBase64" by the server,
 * for example when a protobuf client published binary data).
 */
export type Payload = JsonValue | Uint8Array;

/** One oneof case of a protobuf-es message, as a one-member JSON object. */
type OneofJSON<O> = O extends { case: infer C extends string; value: infer V }
  ? { [P in C]: Fields<V> }
  : never;

/** The fields of message M in corral.v1.json: 64-bit integers as numbers,
 * bytes as an inline payload, nested messages the same way. */
export type Fields<M> = {
  -readonly [K in keyof M as K extends `$${string}` ? never : K]: JSONOf<M[K]>;
};

type JSONOf<V> = V extends bigint
  ? number
  : V extends Uint8Array
    ? Payload | undefined
    : V extends readonly (infer E)[]
      ? JSONOf<E>[]
      : V extends { $typeName: string }
        ? Partial<Fields<V>>
        : V;

/** A client frame as the encoder takes it: {"publish": {...}} and so on.
 * Omitted fields are zero. */
export type ClientFrameJSON = OneofJSON<pb.ClientFrame["kind"]> extends infer U
  ? U extends { [k: string]: infer F }
    ? { [P in keyof U]: Partial<F> }
    : never
  : never;

/** The kinds of server frame the decoder knows, by their JSON names. */
export type ServerKinds = {
  [O in pb.ServerFrame["kind"] as O extends { case: infer C extends string }
    ? C extends "batch"
      ? never
      : C
    : never]: O extends { value: infer V } ? Fields<V> : never;
};

/** One decoded server frame, every field present (zero when omitted on the
 * wire), batches already flattened. Mirrors protobuf-es's oneof shape. */
export type ServerFrame = {
  [C in keyof ServerKinds]: { case: C; value: ServerKinds[C] };
}[keyof ServerKinds];

export type Welcome = ServerKinds["welcome"];
export type Joined = ServerKinds["joined"];
export type Left = ServerKinds["left"];
export type Message = ServerKinds["message"];
export type SignalEvent = ServerKinds["signal"];
export type Published = ServerKinds["published"];
export type Pong = ServerKinds["pong"];
export type ReconnectHint = ServerKinds["reconnect"];
export type ErrorFrame = ServerKinds["error"];
export type Reset = ServerKinds["reset"];
export type Presence = ServerKinds["presence"];
export type PresencePage = ServerKinds["presencePage"];
export type ReplayEnd = ServerKinds["replayEnd"];
export type Refreshed = ServerKinds["refreshed"];
export type PresenceMember = Presence["joins"][number];

/** A room position as sent in Hello.resume. */
export type RoomPosition = Fields<pb.RoomPosition>;
