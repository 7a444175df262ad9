/**
 * corral's browser SDK: one logical connection to a corral server that
 * joins rooms, publishes ordered messages with acknowledgements, sets
 * ephemeral signals, and survives reconnects by resuming its session.
 *
 * ```ts
 * import { Client } from "@corral-rt/client";
 * const client = new Client({ url: "wss://example.com/ws", token });
 * client.on("message", (m) => console.log(m.room, m.seq, m.sender, m.payload));
 * client.connect();
 * await client.join("lobby");
 * await client.publish("lobby", { text: "hi" });
 * client.signal("lobby", "cursor:alice", { x: 0.5, y: 0.5 });
 * ```
 *
 * @module
 */

export {
  Client,
  CorralError,
  SUBPROTOCOL,
  CLIENT_NAME,
  type ClientEvents,
  type ClientOptions,
  type ConnectionState,
  type PublishResult,
  type StateChange,
  type TransportChange,
  type WebSocketConstructor,
  type WebSocketLike,
} from "./client.js";
export { Backoff, type BackoffOptions } from "./backoff.js";
export { Code, adviceOf, type Advice } from "./codes.js";
export { CodecError, decodeServer, encodeClient } from "./codec.js";
export { DeltaError, applyDelta } from "./delta.js";
export { GapError, GrowingMessage, type GrowingChunk, type GrowingEvents } from "./growing.js";
export { Room, type AppendOptions, type RoomEvents } from "./room.js";
export {
  RoomState,
  type KeyChange,
  type RoomStateEvents,
  type StateChangeFrame,
  type StateEntry,
  type StateSnapshot,
  type StateUpdated,
  type StateWriteOptions,
} from "./roomstate.js";
export type { StorageLike } from "./storage.js";
export {
  TRANSPORTS,
  type Conn,
  type EventSourceConstructor,
  type EventSourceLike,
  type FetchLike,
  type TransportName,
} from "./transport.js";
export type {
  ClientFrameJSON,
  ErrorFrame,
  Joined,
  JsonValue,
  Left,
  Message,
  Payload,
  Pong,
  Presence,
  PresenceMember,
  PresencePage,
  Published,
  ReconnectHint,
  ReplayEnd,
  Reset,
  ServerFrame,
  SignalEvent,
  Welcome,
} from "./wire.js";
