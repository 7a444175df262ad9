// The connection state machine: hello, rooms, publishes with acks, signals,
// heartbeats, and reconnecting with resume.

import { Backoff, type BackoffOptions } from "./backoff.js";
import { CodecError, decodeServer, encodeClient } from "./codec.js";
import { now } from "./clock.js";
import { Code, adviceOf, type Advice } from "./codes.js";
import { Emitter } from "./emitter.js";
import { Picker } from "./fallback.js";
import { Room, type AppendOptions } from "./room.js";
import type { StateUpdated, StateWriteOptions } from "./roomstate.js";
import { utf8 } from "./bytes.js";
import { SSEConn } from "./sse.js";
import { loadState, saveState, type SessionState, type StorageLike } from "./storage.js";
import { StreamConn } from "./stream.js";
import {
  TRANSPORTS,
  httpBase,
  type Conn,
  type EventSourceConstructor,
  type FetchLike,
  type TransportName,
} from "./transport.js";
import type {
  ClientFrameJSON,
  ErrorFrame,
  Joined,
  Left,
  Message,
  Payload,
  Published,
  Presence,
  PresencePage,
  ReplayEnd,
  Refreshed,
  Reset,
  ServerFrame,
  SignalEvent,
  Welcome,
} from "./wire.js";

/** The WebSocket subprotocol this SDK speaks. */
export const SUBPROTOCOL = "corral.v1.json";

/** The Hello.client this SDK sends unless told otherwise. */
export const CLIENT_NAME = "corral-js/0.1.0";

/**
 * ConnectionState is where a Client is:
 * "idle" before connect(); "connecting" on the way to the first Welcome;
 * "open" after Welcome; "reconnecting" after a connection was lost, while
 * it waits and tries again; "closed" after close() or a code that says stop.
 */
export type ConnectionState = "idle" | "connecting" | "open" | "reconnecting" | "closed";

/** StateChange is the "state" event. */
export interface StateChange {
  state: ConnectionState;
  previous: ConnectionState;
  /** The close code (corral's or WebSocket's) that caused the change, if any. */
  code?: number;
  reason?: string;
  /** For "reconnecting": how long until the next attempt. */
  delayMs?: number;
  /** For "open": the transport the connection runs on. */
  transport?: TransportName;
}

/** TransportChange is the "transport" event. */
export interface TransportChange {
  /** The transport of the connection that just opened. */
  transport: TransportName;
  /** The one the previous connection ran on ("" for the first). */
  previous: TransportName | "";
  /** The transports that failed before this one in this round of
   * attempts, and why (a refused or stalled WebSocket, say). */
  failed: { transport: TransportName; code: number; reason: string }[];
}

/** The events a Client emits; listen with client.on(type, fn). */
export interface ClientEvents {
  state: StateChange;
  /** The server accepted a hello; resumed says whether the session continued. */
  welcome: Welcome;
  /** A room was joined, or restored by a resume (resumed: true). With
   * replay: true the messages that follow are replayed history, up to the
   * room's "replayEnd"; without, every message after it is live. */
  joined: Joined;
  /** The replay a "joined" with replay: true announced has ended: the
   * room's messages from now on are live. */
  replayEnd: ReplayEnd;
  /** A room was left, or the server removed the client from it. */
  left: Left;
  /** A reliable message, in the room's order, each seq once. */
  message: Message;
  /** The latest value of a signal key (or its removal, clear: true). */
  signal: SignalEvent;
  /** History the client asked for is gone: refetch the room's state; live
   * messages continue after seq. */
  reset: Reset;
  /** A room's presence (rooms joined with presence): a snapshot (replace
   * the list), then diffs (add joins, replace updates, drop leaves); or
   * counts only in large rooms. See docs/PRESENCE.md. */
  presence: Presence;
  /** A page of a room's members, answering queryPresence. */
  presencePage: PresencePage;
  /** The server took a refreshed token (see getToken); expiresUnix is its
   * expiry. */
  refreshed: Refreshed;
  /** An error frame not tied to a pending call, or why the client stopped. */
  error: CorralError;
  /** A connection opened on another transport than the previous one (or
   * the first connection opened): a fallback, or back to the preferred. */
  transport: TransportChange;
}

/** CorralError is a refusal from the server, or why a call failed. */
export class CorralError extends Error {
  override name = "CorralError";
  readonly advice: Advice;
  constructor(
    /** A corral Code, or a WebSocket close code. */
    readonly code: number,
    message: string,
    readonly room = "",
    /** The Publish.id concerned, if any. */
    readonly ref = "",
    readonly retryAfterMs = 0,
    /** The kind of client frame the server refused (Error.frame, as
     * ClientFrame's JSON name: "join", "publish", "signal", "setState"...);
     * "" when it named none (an older server) or for a client-side error. */
    readonly frame = "",
  ) {
    super(message);
    this.advice = adviceOf(code);
  }

  static from(e: ErrorFrame): CorralError {
    return new CorralError(e.code, e.message || `error ${e.code}`, e.room, e.ref, e.retryAfterMs, e.frame);
  }
}

/** A WebSocket constructor: the browser's, or a test's stand-in. */
export interface WebSocketLike {
  readonly readyState: number;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
}
export type WebSocketConstructor = new (url: string, protocols: string | string[]) => WebSocketLike;

/** ClientOptions configure a Client. Only url is required. */
export interface ClientOptions {
  /** The WebSocket endpoint, e.g. "wss://rooms.example.com/ws". */
  url: string;
  /** The connection token (a JWT; a user id with --insecure-dev), or a
   * function that fetches a fresh one before each connection (as getToken). */
  token?: string | (() => string | Promise<string>);
  /**
   * The token provider: fetches a fresh token from the application's
   * backend. Called before each connection (for the hello) and before the
   * current token expires (Welcome.expiresUnix), to refresh it on the live
   * connection without reconnecting. Without a provider a connection whose
   * token expires is closed (CODE_TOKEN_EXPIRED) and the reconnect, with
   * the same token, is refused. Takes precedence over token.
   */
  getToken?: () => string | Promise<string>;
  /** Hello.client, for the server's logs. */
  clientName?: string;
  /** Where the session and room positions are kept, so that a reload
   * resumes. Default: sessionStorage when there is one; null: nowhere. */
  storage?: StorageLike | null;
  /** The storage key. Default "corral:" + url. */
  storageKey?: string;
  backoff?: BackoffOptions;
  /** Minimum time between two sends of one signal key (latest value wins).
   * Default 33 ms: about once per server tick. */
  signalIntervalMs?: number;
  /** How long after a message to acknowledge the room's position (0: never).
   * Default 1000 ms. */
  ackDelayMs?: number;
  /** How long a connection may take to reach Welcome. Default 10 s. */
  connectTimeoutMs?: number;
  /** A connection that lasted this long resets the backoff. Default 5 s. */
  stableMs?: number;
  /** How often a publish refused with a "retry" code is tried again
   * before its promise rejects. Default 5. */
  publishRetries?: number;
  /** How long a publish waits for its answer on one connection before it
   * is sent again (same id and place, in its room's order): one the edge
   * had queued for a core that went away is never answered. Default 5 s. */
  publishTimeoutMs?: number;
  /** The WebSocket implementation. Default globalThis.WebSocket. */
  WebSocket?: WebSocketConstructor;
  /**
   * The transports to use, in the order to try them (docs/SDKS.md,
   * "Transports"). Default ["websocket", "sse", "stream"]: when a
   * WebSocket is refused, dropped before its Welcome, or stalls, the
   * client falls back to SSE, then to HTTP streaming, at once. One name
   * forces that transport; leaving one out disables it. Those without an
   * implementation here (no EventSource, no fetch) are left out.
   */
  transports?: TransportName[];
  /** How long one transport may take to reach Welcome before the next is
   * tried (the last of a round has connectTimeoutMs). Default 5 s. */
  transportTimeoutMs?: number;
  /** How long the transport that last worked is remembered, to be tried
   * first (across reloads, in transportStorage). 0: not across reloads.
   * Default 1 day. */
  rememberTransportMs?: number;
  /** Where that is remembered. Default localStorage when there is one,
   * else storage. */
  transportStorage?: StorageLike | null;
  /** The HTTP transports' base URL, under which /rt/sse, /rt/stream and
   * /rt/send are served. Default: url with ws(s) made http(s) and its
   * last path segment dropped ("wss://h/ws" → "https://h"). */
  httpUrl?: string;
  /** The fetch implementation (HTTP transports). Default globalThis.fetch. */
  fetch?: FetchLike;
  /** The EventSource implementation (SSE). Default globalThis.EventSource. */
  EventSource?: EventSourceConstructor;
  /** Randomness for jitter and publish ids. Default Math.random. */
  random?: () => number;
}

/** PublishResult is the server's acknowledgement of a publish. */
export type PublishResult = Published;

interface RoomState {
  seq: number;
  epoch: string;
  /** Joined on the current connection. */
  ready: boolean;
  /** A Join was sent on the current connection and not yet answered. */
  joining: boolean;
  waiters: Waiter<Joined>[];
  acked: number;
  /** The places given to publishes in this room (Publish.seq). */
  pubSeq: number;
  /** One of them was stored. Until then one publish at a time is on its
   * way: places start at 1, which the server takes as the sequence
   * starting again (a new instance of the session), so a second must not
   * reach it before the first is stored. */
  pubStarted: boolean;
  /** Joined with presence, with this state; kept for rejoins. */
  presence?: boolean;
  state?: Payload;
  /** Restored from storage (a reload): the position is kept, the bodies
   * of the growing messages open there are not. The resume or rejoin asks
   * for them (RoomPosition.open_prefix); cleared when the room is joined. */
  noBodies?: boolean;
}

interface Waiter<T> {
  resolve(v: T): void;
  reject(e: Error): void;
}

interface PendingPublish extends Waiter<PublishResult> {
  room: string;
  id: string;
  payload: Payload | undefined;
  /** Its place in the session's sequence of publishes to the room, and
   * the place it was last sent with (they differ after an earlier
   * publish was refused for good: settle). */
  seq: number;
  sentSeq: number;
  sent: boolean;
  attempts: number;
  timer: ReturnType<typeof setTimeout> | undefined;
  /** Fires when the answer is late (publishTimeoutMs). */
  answerTimer: ReturnType<typeof setTimeout> | undefined;
}

interface SignalState {
  room: string;
  key: string;
  payload: Payload | undefined;
  clear: boolean;
  /** Not yet sent since it last changed. */
  dirty: boolean;
  lastSent: number;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/**
 * Client is one logical connection to corral that outlives its WebSockets:
 * it reconnects with backoff, resumes its session (kept in sessionStorage),
 * rejoins its rooms from where it left them, and re-sends publishes that
 * were not acknowledged (each id is applied once). Methods may be called in
 * any state; what needs a connection waits for one.
 */
export class Client extends Emitter<ClientEvents> {
  private readonly opts: Required<
    Pick<ClientOptions, "signalIntervalMs" | "ackDelayMs" | "connectTimeoutMs" | "stableMs" | "publishRetries" | "publishTimeoutMs">
  >;
  private readonly WS: WebSocketConstructor | undefined;
  private readonly ES: EventSourceConstructor | undefined;
  private readonly fetchFn: FetchLike | undefined;
  private readonly httpUrl: string;
  private readonly picker: Picker;
  private readonly transportTimeoutMs: number;
  /** The transport of the current attempt or connection ("" when none),
   * and of the last one that opened. */
  private tp: TransportName | "" = "";
  private lastOpened: TransportName | "" = "";
  /** This round's failures, for the "transport" event. */
  private failed: TransportChange["failed"] = [];
  private readonly random: () => number;
  private readonly storage: StorageLike | null;
  private readonly storageKey: string;
  private readonly backoff: Backoff;

  private st: ConnectionState = "idle";
  private ws: Conn | null = null;
  private gen = 0; // the current socket's generation; older sockets' events are ignored
  private session: SessionState["session"] = null;
  private welcomeFrame: Welcome | null = null;
  private hint: { code: number; reason: string; delayMs: number } | null = null;
  /** The error frame (no room, no ref) of the stop class that may come
   * before a stop-class close: the server sends one instead of a
   * reconnect hint (docs/CODES.md). Already emitted as "error". */
  private refusal: ErrorFrame | null = null;
  private openedAt = 0;
  private lastSent = -Infinity; // now(); monotonic, see clock.ts
  private lastReceived = 0;
  private heartbeatMs = 25_000;
  private pingId = 0;
  private dirty = false;

  private readonly rooms = new Map<string, RoomState>();
  /** Rooms left that the server may still have us in; sent: a Leave went
   * out on the current connection. */
  private readonly leaving = new Map<string, { sent: boolean; waiters: Waiter<void>[] }>();
  /** The rooms named in the current connection's resume hello. */
  private resumeRooms = new Set<string>();
  /** Unresolved publishes by id, in the order they were made (a Map
   * iterates in insertion order): per room, the outbox. A publish is sent
   * again only after every earlier one of its room was sent again or
   * resolved, and carries its place (Publish.seq), so that the server
   * refuses it (OUT_OF_ORDER) rather than store it before an earlier one:
   * a sender's publishes enter the room in the order they were made
   * (docs/GUARANTEES.md). */
  private readonly outbox = new Map<string, PendingPublish>();
  private readonly signals = new Map<string, SignalState>();
  private readonly idPrefix: string;
  /** Resume attempts made by this Client (Resume.attempt). */
  private dials = 0;
  private nextId = 0;

  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private connectTimer: ReturnType<typeof setTimeout> | undefined;
  private heartbeatTimer: ReturnType<typeof setInterval> | undefined;
  private ackTimer: ReturnType<typeof setTimeout> | undefined;
  private refreshTimer: ReturnType<typeof setTimeout> | undefined;
  /** The current token's expiry (unix seconds; 0: never). */
  private expiresUnix = 0;
  /** A Refresh was sent and not yet answered. */
  private refreshing = false;
  /** Calls waiting for their callResult, by id. */
  private calls = new Map<number, Waiter<Payload | undefined>>();
  /** Room handles (room()), by name. */
  private readonly handles = new Map<string, Room>();
  /** Unanswered setState/deleteState by ref, and appends by room and id:
   * like calls, not sent again after a lost connection. */
  private readonly stateWaits = new Map<string, Waiter<StateUpdated>>();
  /** By room and id, oldest first: appends of one id may be pipelined,
   * and the server answers a connection's frames in order. */
  private readonly appendWaits = new Map<string, Waiter<Published>[]>();
  private stateRef = 0;
  private callId = 0;

  constructor(private readonly options: ClientOptions) {
    super();
    this.opts = {
      signalIntervalMs: options.signalIntervalMs ?? 33,
      ackDelayMs: options.ackDelayMs ?? 1000,
      connectTimeoutMs: options.connectTimeoutMs ?? 10_000,
      stableMs: options.stableMs ?? 5000,
      publishRetries: options.publishRetries ?? 5,
      publishTimeoutMs: options.publishTimeoutMs ?? 5000,
    };
    const g = globalThis as {
      WebSocket?: WebSocketConstructor;
      EventSource?: EventSourceConstructor;
      fetch?: FetchLike;
      localStorage?: StorageLike;
    };
    this.WS = options.WebSocket ?? g.WebSocket;
    this.ES = options.EventSource ?? g.EventSource;
    this.fetchFn = options.fetch ?? (g.fetch ? (input, init) => g.fetch!(input, init) : undefined);
    const has: Record<TransportName, boolean> = {
      websocket: !!this.WS,
      sse: !!this.ES && !!this.fetchFn,
      stream: !!this.fetchFn && typeof ReadableStream !== "undefined",
    };
    const wanted = options.transports ?? [...TRANSPORTS];
    const order = [...new Set(wanted)].filter((t) => TRANSPORTS.includes(t) && has[t]);
    if (order.length === 0) {
      throw new Error(
        `corral: none of the transports ${JSON.stringify(wanted)} can run here; pass options.WebSocket (or EventSource and fetch)`,
      );
    }
    this.httpUrl = (options.httpUrl ?? httpBase(options.url)).replace(/\/+$/, "");
    this.transportTimeoutMs = options.transportTimeoutMs ?? 5000;
    this.random = options.random ?? Math.random;
    this.backoff = new Backoff(options.backoff, this.random);
    this.storage =
      options.storage !== undefined
        ? options.storage
        : ((globalThis as { sessionStorage?: StorageLike }).sessionStorage ?? null);
    this.storageKey = options.storageKey ?? `corral:${options.url}`;
    let tstore = options.transportStorage;
    if (tstore === undefined) {
      try {
        tstore = g.localStorage ?? this.storage;
      } catch {
        tstore = this.storage; // localStorage throws where storage is blocked
      }
    }
    this.picker = new Picker(order, tstore, `${this.storageKey}:transport`, options.rememberTransportMs ?? 86_400_000);
    // Publish ids must be unique per session, and a session outlives this
    // object (a reload resumes it): a random prefix per Client.
    this.idPrefix = Math.floor(this.random() * 36 ** 8)
      .toString(36)
      .padStart(8, "0");
    const saved = loadState(this.storage, this.storageKey);
    this.session = saved.session;
    for (const [room, pos] of Object.entries(saved.rooms)) {
      this.rooms.set(room, { ...newRoom(pos.seq, pos.epoch), noBodies: true });
    }
  }

  /** state is where the client is now. */
  get state(): ConnectionState {
    return this.st;
  }

  /** welcome is the current connection's Welcome, or null when not open. */
  get welcome(): Welcome | null {
    return this.welcomeFrame;
  }

  /**
   * transport is the transport of the open connection, or of the attempt
   * under way ("" when there is neither): "websocket", "sse" or "stream".
   */
  get transport(): TransportName | "" {
    return this.tp;
  }

  /** sessionId is the session this client resumes, or "" before the first Welcome. */
  get sessionId(): string {
    return this.session?.sessionId ?? "";
  }

  /** joinedRooms lists the rooms this client is in or is joining. */
  get joinedRooms(): string[] {
    return [...this.rooms.keys()];
  }

  /** position returns the last seq processed in a room and its epoch. */
  position(room: string): { seq: number; epoch: string } | undefined {
    const r = this.rooms.get(room);
    return r && { seq: r.seq, epoch: r.epoch };
  }

  /** connect starts connecting; it does nothing if already started. */
  connect(): void {
    if (this.st !== "idle" && this.st !== "closed") return;
    this.backoff.reset();
    this.setState("connecting");
    void this.open();
  }

  /**
   * close ends the connection and stops reconnecting. Pending publishes
   * and joins reject. The session stays in storage, so a later connect()
   * (or a reload) resumes it.
   */
  close(): void {
    if (this.st === "closed" || this.st === "idle") {
      this.st = "closed";
      return;
    }
    const ws = this.ws;
    this.detach();
    ws?.close(1000, "client closed");
    this.stop(new CorralError(1000, "client closed"));
  }

  /**
   * join enters a room and resolves when the server confirms it. A room
   * the client was in before a reload (or a resume) is restored from where
   * it was left; a room joined for the first time starts at its current end.
   */
  join(room: string, opts?: { presence?: boolean; state?: Payload }): Promise<Joined> {
    if (this.st === "closed") return Promise.reject(new CorralError(1000, "client closed", room));
    this.leaving.delete(room);
    let r = this.rooms.get(room);
    if (r?.ready) return Promise.resolve({ room, seq: r.seq, epoch: r.epoch, resumed: false, replay: false });
    if (!r) {
      r = newRoom(0, "");
      this.rooms.set(room, r);
      this.dirty = true;
      this.persist();
    }
    if (opts?.presence) {
      r.presence = true;
      r.state = opts.state;
    }
    const p = new Promise<Joined>((resolve, reject) => r.waiters.push({ resolve, reject }));
    if (this.st === "open" && !r.joining) this.sendJoin(room, r);
    return p;
  }

  /**
   * setPresence replaces the user's presence state in a room joined with
   * presence ({ presence: true }); the state is kept for rejoins.
   */
  setPresence(room: string, state: Payload): void {
    const r = this.rooms.get(room);
    if (!r?.presence) throw new CorralError(Code.NOT_JOINED, "room not joined with presence", room);
    r.state = state;
    if (this.st === "open" && r.ready) this.send({ setPresence: { room, state } });
  }

  /** queryPresence asks for a page of a joined room's members, ordered by
   * user id after `after`; the answer comes as a "presencePage" event. */
  queryPresence(room: string, after = "", limit = 0): void {
    if (this.st === "open") this.send({ presenceQuery: { room, after, limit } });
  }

  /** leave exits a room; it resolves when the server confirms (at once when offline). */
  leave(room: string): Promise<void> {
    const r = this.rooms.get(room);
    if (!r) return Promise.resolve();
    this.rooms.delete(room);
    this.dirty = true;
    this.persist();
    const err = new CorralError(Code.NOT_JOINED, "left the room", room);
    for (const w of r.waiters) w.reject(err);
    for (const p of [...this.outbox.values()]) {
      if (p.room === room) this.settle(p, err);
    }
    for (const [k, s] of this.signals) {
      if (s.room === room) {
        clearTimeout(s.timer);
        this.signals.delete(k);
      }
    }
    if (this.st !== "open") {
      // A resumed session may still be in the room: leave it on Joined.
      this.leaving.set(room, { sent: false, waiters: [] });
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      this.leaving.set(room, { sent: true, waiters: [{ resolve, reject }] });
      this.send({ leave: { room } });
    });
  }

  /**
   * publish sends a reliable message to a room. It resolves with the seq
   * the server assigned when the server acknowledges it, and rejects with a
   * CorralError when the server refuses it for good. Across a reconnect it
   * is sent again with the same id, which the server applies once.
   * Publishes to one room enter it in the order publish was called.
   */
  publish(room: string, payload: Payload, opts: { id?: string } = {}): Promise<PublishResult> {
    const id = opts.id ?? `${this.idPrefix}-${++this.nextId}`;
    if (this.st === "closed") return Promise.reject(new CorralError(1000, "client closed", room, id));
    if (!this.rooms.has(room)) {
      return Promise.reject(new CorralError(Code.NOT_JOINED, "join the room before publishing", room, id));
    }
    if (this.outbox.has(id)) return Promise.reject(new CorralError(Code.INVALID_ARGUMENT, "publish id in use", room, id));
    const r = this.rooms.get(room)!;
    return new Promise<PublishResult>((resolve, reject) => {
      const seq = ++r.pubSeq;
      const p: PendingPublish = { room, id, payload, seq, sentSeq: 0, resolve, reject, sent: false, attempts: 0, timer: undefined, answerTimer: undefined };
      this.outbox.set(id, p);
      this.pump(room);
    });
  }

  /**
   * signal sets an ephemeral, keyed value in a room, such as a cursor.
   * Calls are coalesced: each key is sent at most once per
   * signalIntervalMs, with its latest value. The value is restored after a
   * reconnect until clearSignal.
   */
  signal(room: string, key: string, payload: Payload): void {
    this.setSignal(room, key, payload, false);
  }

  /** clearSignal removes a signal key: it disappears for everyone. */
  clearSignal(room: string, key: string): void {
    this.setSignal(room, key, undefined, true);
  }

  /**
   * call asks the application's backend something through corral (its Call
   * hook: the server runs with --hooks-call; see docs/HOOKS.md) and
   * resolves with the answer's payload. It rejects with a CorralError
   * carrying the server's code: a refusal, CODE_UNAVAILABLE (retry after
   * retryAfterMs) when the backend could not answer, and also when the
   * connection is lost before the answer (a call is not sent again: it
   * may not be idempotent).
   */
  call(method: string, payload?: Payload): Promise<Payload | undefined> {
    if (this.st !== "open") {
      return Promise.reject(new CorralError(Code.UNAVAILABLE, "not connected: call again once open", "", "", 1000));
    }
    const id = ++this.callId;
    return new Promise<Payload | undefined>((resolve, reject) => {
      this.calls.set(id, { resolve, reject });
      this.send({ call: { id, method, payload } });
    });
  }

  /**
   * room returns the handle of room name (the same one each time): its
   * growing messages (append, message, the "growing" event) and its keyed
   * state (room.state). Chunks and state frames reach it once the room is
   * joined.
   */
  room(name: string): Room {
    let r = this.handles.get(name);
    if (!r) {
      r = new Room(name, {
        append: (room, id, data, opts) => this.appendTo(room, id, data, opts),
        setState: (room, key, value, opts) => this.writeState(room, key, opts, value),
        deleteState: (room, key, opts) => this.writeState(room, key, opts),
      });
      this.handles.set(name, r);
    }
    return r;
  }

  private appendTo(room: string, id: string, data: string | Uint8Array, opts: AppendOptions): Promise<Published> {
    if (this.st !== "open") {
      return Promise.reject(new CorralError(Code.UNAVAILABLE, "not connected: append again once open", room, id, 1000));
    }
    if (!id) return Promise.reject(new CorralError(Code.INVALID_ARGUMENT, "append needs an id", room));
    const key = `${room}\u0000${id}`;
    const bytes = typeof data === "string" ? utf8(data) : data;
    return new Promise<Published>((resolve, reject) => {
      const q = this.appendWaits.get(key);
      if (q) q.push({ resolve, reject });
      else this.appendWaits.set(key, [{ resolve, reject }]);
      this.send({ append: { room, id, data: bytes, replace: opts.replace ?? false, final: opts.final ?? false, version: opts.version ?? 0 } });
    });
  }

  private writeState(room: string, key: string, opts: StateWriteOptions, value?: Payload): Promise<StateUpdated> {
    if (this.st !== "open") {
      return Promise.reject(new CorralError(Code.UNAVAILABLE, "not connected: write the state again once open", room, "", 1000));
    }
    const ref = `~state:${++this.stateRef}`;
    const cas = opts.cas !== undefined;
    const version = opts.cas ?? 0;
    return new Promise<StateUpdated>((resolve, reject) => {
      this.stateWaits.set(ref, { resolve, reject });
      if (value === undefined) this.send({ deleteState: { room, key, cas, version, ref } });
      else this.send({ setState: { room, key, value, cas, version, ttlMs: opts.ttlMs ?? 0, ref } });
    });
  }

  /** ping sends a Ping now (the client also pings by itself when idle). */
  ping(): void {
    if (this.st === "open") this.send({ ping: { id: ++this.pingId } });
  }

  // ---- connection ----

  private async open(): Promise<void> {
    const gen = ++this.gen;
    let token = "";
    try {
      const get = this.tokenProvider();
      token = get ? await get() : ((this.options.token as string | undefined) ?? "");
    } catch (err) {
      if (gen === this.gen) this.lost(gen, 1006, `token: ${(err as Error).message}`);
      return;
    }
    if (gen !== this.gen) return;
    const name = this.picker.current();
    let ws: Conn;
    try {
      ws = this.dial(name);
    } catch (err) {
      this.stop(new CorralError(Code.BAD_FRAME, `connect: ${(err as Error).message}`));
      return;
    }
    this.ws = ws;
    this.tp = name;
    // The bounded time of one attempt: a stalled transport (an upgrade a
    // proxy holds, an event stream a proxy buffers) gives way to the next.
    const timeout = this.picker.hasNext()
      ? Math.min(this.transportTimeoutMs, this.opts.connectTimeoutMs)
      : this.opts.connectTimeoutMs;
    this.connectTimer = setTimeout(() => this.lost(gen, 1006, `no welcome within ${timeout} ms over ${name}`), timeout);
    ws.onopen = () => {
      if (gen !== this.gen) return;
      // instance and attempt order this client's resume attempts: one
      // given up on (the connect timeout) cannot take the session from a
      // newer one when its hello arrives late. A reload is a new instance.
      const resume = this.session && {
        sessionId: this.session.sessionId,
        resumeToken: this.session.resumeToken,
        instance: this.idPrefix,
        attempt: ++this.dials,
        rooms: [...this.rooms].map(([room, r]) => ({
          room,
          seq: r.seq,
          epoch: r.epoch,
          presence: r.presence ?? false,
          openPrefix: r.noBodies ?? false,
          ...this.statePosition(room),
        })),
      };
      this.resumeRooms = new Set(resume ? this.rooms.keys() : []);
      this.send({ hello: { token, client: this.options.clientName ?? CLIENT_NAME, resume: resume || undefined } });
    };
    ws.onmessage = (ev) => {
      if (gen !== this.gen) return;
      this.lastReceived = now();
      if (typeof ev.data !== "string") return; // corral.v1.json is text only
      let frames: ServerFrame[];
      try {
        frames = decodeServer(ev.data);
      } catch (err) {
        this.emit("error", new CorralError(Code.BAD_FRAME, (err as CodecError).message));
        return;
      }
      for (const f of frames) {
        if (gen !== this.gen) break;
        this.handle(f);
      }
      this.persist();
    };
    ws.onclose = (ev) => this.lost(gen, ev.code, ev.reason);
    ws.onerror = () => {}; // a close event follows
  }

  /** dial opens a connection over the named transport. */
  private dial(name: TransportName): Conn {
    switch (name) {
      case "websocket":
        return new this.WS!(this.options.url, SUBPROTOCOL);
      case "sse":
        return new SSEConn(this.httpUrl, this.ES!, this.fetchFn!, this.random);
      case "stream":
        return new StreamConn(this.httpUrl, this.fetchFn!, this.random);
    }
  }

  /** lost handles the end of socket gen: reconnect, or stop. */
  private lost(gen: number, closeCode: number, closeReason: string): void {
    if (gen !== this.gen || this.st === "closed") return;
    const hint = this.hint;
    const refusal = this.refusal?.code === closeCode ? this.refusal : null;
    const wasOpen = this.st === "open";
    const ws = this.ws;
    const welcomed = this.welcomeFrame !== null;
    this.detach();
    ws?.close();
    const code = hint?.code || closeCode;
    const reason = hint?.reason || refusal?.message || closeReason;
    if (wasOpen && now() - this.openedAt >= this.opts.stableMs) this.backoff.reset();

    if (ws && !welcomed && !hint && !refusal && closeCode < 4000) {
      // The transport failed before its first Welcome (refused, cut, or
      // stalled) and no server said why: the next one, at once.
      if (this.tp) this.failed.push({ transport: this.tp, code: closeCode, reason: closeReason });
      if (this.picker.next()) {
        this.tp = this.picker.current();
        void this.open();
        return;
      }
    } else {
      this.picker.endRound();
    }
    // The next round starts afresh (with the transport that last worked).
    this.failed = [];
    this.tp = "";

    if (code === Code.SESSION_EXPIRED || (code === Code.RESUME_REFUSED && this.session)) {
      // The session is gone (or not ours): start a new one and rejoin the
      // rooms from their positions, so history still fills the gap.
      this.session = null;
      this.dirty = true;
      this.persist();
    } else if (adviceOf(code) === "stop" || code === Code.SESSION_TAKEN_OVER) {
      this.stop(new CorralError(code, reason || `closed with ${code}`), refusal !== null);
      return;
    }
    const delayMs = this.backoff.next(hint?.delayMs);
    this.setState("reconnecting", { code, reason, delayMs });
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.open();
    }, delayMs);
  }

  /** tokenProvider is getToken, or token when it is a function. */
  private tokenProvider(): (() => string | Promise<string>) | undefined {
    const t = this.options.token;
    return this.options.getToken ?? (typeof t === "function" ? t : undefined);
  }

  /** scheduleRefresh plans the refresh of a token expiring at expiresUnix:
   * when a quarter of the time left remains, at most a minute ahead. */
  private scheduleRefresh(expiresUnix: number): void {
    clearTimeout(this.refreshTimer);
    this.refreshTimer = undefined;
    this.expiresUnix = expiresUnix;
    if (expiresUnix <= 0 || !this.tokenProvider()) return;
    const left = expiresUnix * 1000 - Date.now();
    this.refreshIn(left - Math.min(left / 4, 60_000));
  }

  private refreshIn(ms: number): void {
    const gen = this.gen;
    this.refreshTimer = setTimeout(() => {
      this.refreshTimer = undefined;
      if (gen === this.gen) void this.refresh(gen);
    }, Math.max(0, ms));
  }

  /** refresh sends a fresh token on the open connection. */
  private async refresh(gen: number): Promise<void> {
    const get = this.tokenProvider();
    if (!get) return;
    let token: string;
    try {
      token = await get();
    } catch (err) {
      if (gen !== this.gen) return;
      this.emit("error", new CorralError(Code.UNAUTHENTICATED, `token: ${(err as Error).message}`));
      this.refreshFailed();
      return;
    }
    if (gen !== this.gen || this.st !== "open") return;
    this.refreshing = true;
    this.send({ refresh: { token } });
  }

  /** refreshFailed tries again halfway to the expiry; past it the server
   * closes the connection and the reconnect fetches a new token. */
  private refreshFailed(): void {
    this.refreshing = false;
    const left = this.expiresUnix * 1000 - Date.now();
    if (left > 1000) this.refreshIn(left / 2);
  }

  /** detach forgets the current socket: its events are ignored from now on. */
  private detach(): void {
    this.gen++;
    if (this.ws) {
      this.ws.onopen = this.ws.onmessage = this.ws.onclose = this.ws.onerror = null;
    }
    this.ws = null;
    this.hint = null;
    this.refusal = null;
    this.welcomeFrame = null;
    clearTimeout(this.connectTimer);
    clearTimeout(this.retryTimer);
    clearInterval(this.heartbeatTimer);
    clearTimeout(this.ackTimer);
    clearTimeout(this.refreshTimer);
    this.connectTimer = this.retryTimer = this.heartbeatTimer = this.ackTimer = this.refreshTimer = undefined;
    this.refreshing = false;
    this.rejectCalls(new CorralError(Code.UNAVAILABLE, "connection lost before the call was answered", "", "", 1000));
    for (const l of this.leaving.values()) l.sent = false;
    for (const r of this.rooms.values()) r.ready = r.joining = false;
    for (const p of this.outbox.values()) {
      p.sent = false;
      clearTimeout(p.timer);
      clearTimeout(p.answerTimer);
      p.timer = p.answerTimer = undefined;
    }
  }

  /** stop ends for good: everything pending rejects with err, which is
   * emitted as "error" unless it was already (emitted). */
  private stop(err: CorralError, emitted = false): void {
    this.rejectCalls(err);
    this.detach();
    for (const r of this.rooms.values()) {
      for (const w of r.waiters.splice(0)) w.reject(err);
    }
    for (const l of this.leaving.values()) for (const w of l.waiters) w.resolve();
    this.leaving.clear();
    for (const p of [...this.outbox.values()]) this.settle(p, err);
    for (const s of this.signals.values()) clearTimeout(s.timer);
    this.tp = "";
    this.picker.endRound();
    this.failed = [];
    this.setState("closed", { code: err.code, reason: err.message });
    if (err.code !== 1000 && !emitted) this.emit("error", err);
  }

  private rejectCalls(err: CorralError): void {
    const calls = [...this.calls.values(), ...this.stateWaits.values(), ...[...this.appendWaits.values()].flat()];
    this.calls.clear();
    this.stateWaits.clear();
    this.appendWaits.clear();
    for (const w of calls) w.reject(err);
  }

  private setState(state: ConnectionState, extra: Omit<StateChange, "state" | "previous"> = {}): void {
    const previous = this.st;
    this.st = state;
    this.emit("state", { state, previous, ...extra });
  }

  private send(frame: ClientFrameJSON): void {
    if (!this.ws) return;
    this.ws.send(encodeClient(frame));
    this.lastSent = now();
  }

  // ---- frames from the server ----

  private handle(f: ServerFrame): void {
    switch (f.case) {
      case "welcome":
        if (this.welcomeFrame && f.value.sessionId === this.session?.sessionId) {
          // The edge resumed the session for us: only the (rotated) resume
          // token is new. Keep it, or the next resume is refused.
          this.session = { ...this.session, resumeToken: f.value.resumeToken };
          this.welcomeFrame = { ...this.welcomeFrame, resumeToken: f.value.resumeToken };
          this.dirty = true;
          return;
        }
        return this.onWelcome(f.value);
      case "joined":
        return this.onJoined(f.value);
      case "left":
        return this.onLeft(f.value);
      case "message":
        return this.onMessage(f.value);
      case "signal":
        return this.emit("signal", f.value);
      case "published":
        return this.onPublished(f.value);
      case "pong":
        return;
      case "reconnect":
        this.hint = f.value;
        return;
      case "error":
        if (!f.value.ref && !f.value.room && adviceOf(f.value.code) === "stop") this.refusal = f.value;
        return this.onError(f.value);
      case "reset":
        return this.onReset(f.value);
      case "presence":
        return this.emit("presence", f.value);
      case "presencePage":
        return this.emit("presencePage", f.value);
      case "replayEnd":
        return this.emit("replayEnd", f.value);
      case "callResult": {
        const id = Number(f.value.id);
        const w = this.calls.get(id);
        if (!w) return;
        this.calls.delete(id);
        const e = f.value.error;
        if (e) return w.reject(new CorralError(e.code ?? 0, e.message ?? "", "", "", e.retryAfterMs ?? 0));
        return w.resolve(f.value.payload);
      }
      case "stateSnapshot":
        if (this.rooms.has(f.value.room)) this.room(f.value.room).state.applySnapshot(f.value);
        return;
      case "stateChange":
        if (this.rooms.has(f.value.room)) this.room(f.value.room).state.applyChange(f.value);
        return;
      case "stateUpdated": {
        const w = this.stateWaits.get(f.value.ref);
        if (!w) return;
        this.stateWaits.delete(f.value.ref);
        return w.resolve(f.value);
      }
      case "refreshed":
        this.refreshing = false;
        this.scheduleRefresh(f.value.expiresUnix);
        return this.emit("refreshed", f.value);
    }
  }

  private onWelcome(w: Welcome): void {
    clearTimeout(this.connectTimer);
    this.connectTimer = undefined;
    this.welcomeFrame = w;
    this.session = { sessionId: w.sessionId, resumeToken: w.resumeToken, userId: w.userId };
    this.dirty = true;
    this.openedAt = this.lastReceived = now();
    this.heartbeatMs = w.heartbeatMs > 0 ? w.heartbeatMs : 25_000;
    const gen = this.gen;
    this.heartbeatTimer = setInterval(() => this.heartbeat(gen), Math.max(250, this.heartbeatMs / 4));
    this.scheduleRefresh(w.expiresUnix);
    const transport = this.tp || this.picker.current();
    this.picker.succeeded(transport);
    this.picker.endRound();
    const failed = this.failed;
    this.failed = [];
    const previous = this.lastOpened;
    this.lastOpened = transport;
    this.setState("open", { transport });
    if (gen !== this.gen) return;
    if (transport !== previous) this.emit("transport", { transport, previous, failed });
    if (gen !== this.gen) return;
    this.emit("welcome", w);
    if (gen !== this.gen) return;
    // A resumed session rejoins the rooms named in the hello by itself.
    // Otherwise join each room from its position, so that history fills
    // the gap if it still can.
    if (!w.resumed) {
      for (const l of this.leaving.values()) for (const x of l.waiters) x.resolve();
      this.leaving.clear();
    }
    for (const [room, r] of this.rooms) {
      if (w.resumed && this.resumeRooms.has(room)) r.joining = true;
      else this.sendJoin(room, r);
    }
  }

  private sendJoin(room: string, r: RoomState): void {
    r.joining = true;
    // A room with a known epoch continues from its position, even from
    // seq 0 (joined while empty): the server replays or says reset.
    this.send({
      join: {
        room,
        sinceSeq: r.seq,
        epoch: r.epoch,
        presence: r.presence ?? false,
        presenceState: r.state,
        fromPosition: r.epoch !== "",
        openPrefix: r.noBodies ?? false,
        ...this.statePosition(room),
      },
    });
  }

  // statePosition is where the room's keyed-state view is (docs/STATE.md),
  // sent with a resume or rejoin so that the server sends only the changes
  // after it (or a snapshot when they are no longer kept).
  private statePosition(room: string): { statePosition?: number; stateEpoch?: string } {
    const st = this.handles.get(room)?.state;
    return st?.ready ? { statePosition: st.position, stateEpoch: st.epoch } : {};
  }

  private onJoined(j: Joined): void {
    let r = this.rooms.get(j.room);
    if (!r) {
      const l = this.leaving.get(j.room);
      if (l) {
        // Left while offline; the resumed session was still in the room.
        if (!l.sent) this.send({ leave: { room: j.room } });
        l.sent = true;
        return;
      }
      // The server restored a room this client had forgotten.
      r = newRoom(0, "");
      this.rooms.set(j.room, r);
    }
    r.ready = true;
    r.noBodies = false; // the prefixes asked for follow on this connection
    r.joining = false;
    r.seq = j.seq;
    r.epoch = j.epoch;
    r.acked = Math.min(r.acked, j.seq);
    this.dirty = true;
    for (const w of r.waiters.splice(0)) w.resolve(j);
    this.emit("joined", j);
    // Publishes and signals wait for their room.
    this.pump(j.room);
    for (const s of this.signals.values()) {
      if (s.room === j.room) {
        // The server dropped this connection's signals when it went: set
        // them again.
        s.dirty = true;
        this.pumpSignal(s);
      }
    }
  }

  private onLeft(l: Left): void {
    const waiters = this.leaving.get(l.room)?.waiters;
    this.leaving.delete(l.room);
    for (const w of waiters ?? []) w.resolve();
    const r = this.rooms.get(l.room);
    if (r && !waiters && r.joining && !r.ready && adviceOf(l.code) === "retry") {
      // A resumed room the server could not rejoin now (its store did not
      // answer): the session keeps it; join it again later, like a join
      // refused with a retry code.
      this.askAgain(0, () => this.rooms.get(l.room) === r && !r.ready, () => this.sendJoin(l.room, r));
      return;
    }
    if (r) {
      // The server removed us (for example the token no longer grants it).
      this.rooms.delete(l.room);
      this.dirty = true;
      const err = new CorralError(l.code || Code.NOT_JOINED, l.reason || "removed from the room", l.room);
      for (const w of r.waiters) w.reject(err);
      for (const p of [...this.outbox.values()]) if (p.room === l.room) this.settle(p, err);
    }
    if (waiters || r) this.emit("left", l);
  }

  private onMessage(m: Message): void {
    const r = this.rooms.get(m.room);
    // A chunk goes to its growing message before the seq check: the
    // prefix a joiner gets is at the seq the message reached, which may be
    // at or below the joined seq; the message applies each version once.
    if (r && m.chunk) this.room(m.room).onChunk(m);
    if (!r || m.seq <= r.seq) return; // not ours any more, or seen already
    r.seq = m.seq;
    this.dirty = true;
    this.scheduleAck();
    this.emit("message", m);
  }

  private onReset(x: Reset): void {
    const r = this.rooms.get(x.room);
    if (!r) return;
    r.seq = x.seq;
    r.epoch = x.epoch;
    r.acked = 0;
    this.dirty = true;
    this.emit("reset", x);
  }

  /** nextAppend takes the oldest unanswered append of id in room. */
  private nextAppend(room: string, id: string): Waiter<Published> | undefined {
    const key = `${room}\u0000${id}`;
    const q = this.appendWaits.get(key);
    const w = q?.shift();
    if (q && q.length === 0) this.appendWaits.delete(key);
    return w;
  }

  private onPublished(p: Published): void {
    const a = this.outbox.has(p.id) ? undefined : this.nextAppend(p.room, p.id);
    if (a) return a.resolve(p);
    const pending = this.outbox.get(p.id);
    if (pending && pending.room === p.room) {
      clearTimeout(pending.answerTimer);
      this.outbox.delete(p.id);
      const r = this.rooms.get(p.room);
      if (r) r.pubStarted = true;
      pending.resolve(p);
      this.pump(p.room);
    }
  }

  /** onError settles the pending call that e refuses, if any: the one of
   * the kind of frame e names (Error.frame) with its room or ref, so that
   * a signal's or a presence query's refusal never fails a join of the same
   * room, nor an append's a publish of the same id. An Error that names no
   * frame (a server older than the field) is matched by ref and room
   * alone, as before. One that refuses no pending call is emitted as
   * "error". */
  private onError(e: ErrorFrame): void {
    const err = CorralError.from(e);
    const kind = e.frame ?? "";
    const is = (...kinds: string[]) => kind === "" || kinds.includes(kind);
    const sw = e.ref && is("setState", "deleteState") ? this.stateWaits.get(e.ref) : undefined;
    if (sw) {
      this.stateWaits.delete(e.ref);
      return sw.reject(err);
    }
    // Without a frame named, a ref of the outbox is the publish's.
    const aw = e.ref && (kind === "append" || (kind === "" && !this.outbox.has(e.ref))) ? this.nextAppend(e.room, e.ref) : undefined;
    if (aw) return aw.reject(err);
    const p = e.ref && is("publish") ? this.outbox.get(e.ref) : undefined;
    if (p) {
      p.sent = false;
      clearTimeout(p.answerTimer);
      p.answerTimer = undefined;
      if (e.code === Code.OUT_OF_ORDER && (!this.isHead(p) || p.sentSeq !== p.seq)) {
        // An earlier publish of the room is not stored yet (or was
        // refused for good, and this one took its place): this one goes
        // again right after it (pump), without a try of its own.
        p.attempts--;
        this.pump(p.room);
        return;
      }
      if (err.advice === "retry" && p.attempts <= this.opts.publishRetries) {
        // Busy store or rate limit: try the same publish again later;
        // the later ones of its room wait behind it (pump).
        const wait = Math.max(e.retryAfterMs, Math.round(this.random() * 250 * 2 ** p.attempts));
        p.timer = setTimeout(() => {
          p.timer = undefined;
          this.pump(p.room);
        }, wait);
        return;
      }
      this.settle(p, err);
      return;
    }
    if (this.refreshing && (kind === "refresh" || (kind === "" && !e.room && !e.ref &&
      (e.code === Code.UNAUTHENTICATED || e.code === Code.RATE_LIMITED || e.code === Code.UNAVAILABLE)))) {
      // The refresh was refused; the connection goes on until the expiry.
      this.refreshFailed();
      this.emit("error", err);
      return;
    }
    const l = e.room && is("leave") ? this.leaving.get(e.room) : undefined;
    if (l && e.code === Code.NOT_JOINED) {
      // Left a room the server had already let go.
      this.leaving.delete(e.room);
      for (const w of l.waiters) w.resolve();
      return;
    }
    if (l) {
      // A refused leave: the server may still hold the room.
      if (err.advice === "retry") {
        // Busy or rate limited: ask again later on this connection (a
        // new connection sends it again anyway, on Joined).
        this.askAgain(e.retryAfterMs, () => this.st === "open" && this.leaving.get(e.room) === l,
          () => this.send({ leave: { room: e.room } }));
        return;
      }
      this.leaving.delete(e.room);
      for (const w of l.waiters) w.reject(err);
    }
    const r = e.room && is("join") ? this.rooms.get(e.room) : undefined;
    if (r && r.joining && !r.ready) {
      // A refused join.
      if (err.advice === "retry") {
        this.askAgain(e.retryAfterMs, () => this.rooms.get(e.room) === r && !r.ready, () => this.sendJoin(e.room, r));
        return;
      }
      this.rooms.delete(e.room);
      this.dirty = true;
      for (const w of r.waiters) w.reject(err);
      for (const p of [...this.outbox.values()]) if (p.room === e.room) this.settle(p, err);
    }
    this.emit("error", err);
  }

  /** askAgain sends a refused join or leave again after the refusal's
   * retry_after_ms (at least 500 ms), on the same connection, if still()
   * holds then; a new connection sends what is pending anyway. */
  private askAgain(retryAfterMs: number, still: () => boolean, send: () => void): void {
    const gen = this.gen;
    setTimeout(() => {
      if (gen === this.gen && still()) send();
    }, Math.max(retryAfterMs, 500));
  }

  // ---- publishes, signals, acks, heartbeats ----

  /** pump sends room's unsent publishes in their order, up to the first
   * that waits for its retry timer: none overtakes an earlier one. On a
   * connection the server handles frames in order, so those sent here
   * reach it after every earlier one that is in flight. */
  private pump(room: string): void {
    const r = this.rooms.get(room);
    if (this.st !== "open" || !r?.ready) return; // sent on Joined
    for (const p of this.outbox.values()) {
      if (p.room !== room) continue;
      if (p.timer || (p.sent && !r.pubStarted)) return;
      if (p.sent) continue;
      p.sent = true;
      p.attempts++;
      p.sentSeq = p.seq;
      const gen = this.gen;
      p.answerTimer = setTimeout(() => {
        // No answer: lost on its way. Send it again in its turn; a copy
        // that was stored is answered as a duplicate.
        p.answerTimer = undefined;
        if (gen !== this.gen || !p.sent) return;
        p.sent = false;
        this.pump(p.room);
      }, this.opts.publishTimeoutMs);
      this.send({ publish: { room: p.room, id: p.id, payload: p.payload, seq: p.seq } });
      if (!r.pubStarted) return;
    }
  }

  /** isHead: no publish made before p to its room is unresolved. */
  private isHead(p: PendingPublish): boolean {
    for (const q of this.outbox.values()) {
      if (q.room === p.room) return q === p;
    }
    return false;
  }

  /** settle rejects p, which was not stored: the later publishes of its
   * room move down one place, so that they do not wait for a place nobody
   * fills (if p was stored after all, its answer lost, the next one's
   * place is at or below the server's under a new id, which the server
   * takes as the sequence starting again: the order still holds). */
  private settle(p: PendingPublish, err: Error): void {
    clearTimeout(p.timer);
    clearTimeout(p.answerTimer);
    if (this.outbox.delete(p.id)) {
      let after = false;
      for (const q of this.outbox.values()) {
        if (q === p || q.room !== p.room) continue;
        if (q.seq > p.seq) {
          q.seq--;
          after = true;
        }
      }
      const r = this.rooms.get(p.room);
      if (r) r.pubSeq--;
      p.reject(err);
      if (after) this.pump(p.room);
      return;
    }
    p.reject(err);
  }

  private setSignal(room: string, key: string, payload: Payload | undefined, clear: boolean): void {
    if (this.st === "closed" || !this.rooms.has(room)) return;
    const k = `${room}\n${key}`;
    let s = this.signals.get(k);
    if (!s) {
      if (clear) {
        // Nothing set here; still tell the server (it may hold an old value).
        if (this.st === "open" && this.rooms.get(room)?.ready) this.send({ signal: { room, key, clear: true } });
        return;
      }
      s = { room, key, payload, clear, dirty: true, lastSent: -Infinity, timer: undefined };
      this.signals.set(k, s);
    }
    s.payload = payload;
    s.clear = clear;
    s.dirty = true;
    this.pumpSignal(s);
  }

  private pumpSignal(s: SignalState): void {
    if (!s.dirty || s.timer) return;
    if (this.st !== "open" || !this.rooms.get(s.room)?.ready) return; // sent on Joined
    const wait = s.lastSent + this.opts.signalIntervalMs - now();
    if (wait > 0) {
      s.timer = setTimeout(() => {
        s.timer = undefined;
        this.pumpSignal(s);
      }, wait);
      return;
    }
    s.dirty = false;
    s.lastSent = now();
    if (s.clear) {
      this.signals.delete(`${s.room}\n${s.key}`);
      this.send({ signal: { room: s.room, key: s.key, clear: true } });
    } else {
      this.send({ signal: { room: s.room, key: s.key, payload: s.payload } });
    }
  }

  private scheduleAck(): void {
    if (this.opts.ackDelayMs <= 0 || this.ackTimer) return;
    this.ackTimer = setTimeout(() => {
      this.ackTimer = undefined;
      if (this.st !== "open") return;
      for (const [room, r] of this.rooms) {
        if (r.ready && r.seq > r.acked) {
          r.acked = r.seq;
          this.send({ ack: { room, seq: r.seq } });
        }
      }
    }, this.opts.ackDelayMs);
  }

  private heartbeat(gen: number): void {
    if (gen !== this.gen) return;
    const t = now();
    if (t - this.lastReceived > 2 * this.heartbeatMs) {
      // Nothing, not even a Pong, for two heartbeats: the connection is dead
      // even if the socket has not noticed.
      this.lost(gen, Code.HEARTBEAT_TIMEOUT, "no frame from the server within two heartbeats");
      return;
    }
    if (t - this.lastSent >= this.heartbeatMs / 2) this.ping();
  }

  /** persist saves the session and room positions if they changed. */
  private persist(): void {
    if (!this.dirty) return;
    this.dirty = false;
    const rooms: SessionState["rooms"] = {};
    for (const [room, r] of this.rooms) rooms[room] = { seq: r.seq, epoch: r.epoch };
    saveState(this.storage, this.storageKey, { session: this.session, rooms });
  }
}

function newRoom(seq: number, epoch: string): RoomState {
  return { seq, epoch, ready: false, joining: false, waiters: [], acked: seq, pubSeq: 0, pubStarted: false };
}
