// @corral-rt/client 0.1.0: corral's browser SDK. Built from clients/js by
// `npm run build`; do not edit.

// src/backoff.ts
var Backoff = class {
  constructor(opts = {}, random = Math.random) {
    this.random = random;
    this.attempt = 0;
    this.baseMs = opts.baseMs ?? 500;
    this.capMs = opts.capMs ?? 3e4;
    this.firstJitterMs = opts.firstJitterMs ?? 250;
    this.hintJitterMs = opts.hintJitterMs ?? 250;
  }
  /** attempts is how many delays were taken since the last reset. */
  get attempts() {
    return this.attempt;
  }
  /**
   * next returns the delay before the next attempt and counts it. hintMs,
   * when given, is the server's ReconnectHint.delay_ms or retry_after_ms.
   */
  next(hintMs) {
    const n = this.attempt++;
    const bound = n === 0 ? this.firstJitterMs : Math.min(this.capMs, this.baseMs * 2 ** Math.min(n - 1, 30));
    const d = this.random() * bound;
    if (hintMs !== void 0 && hintMs > 0) {
      return Math.round(Math.max(hintMs + this.random() * this.hintJitterMs, d));
    }
    return Math.round(d);
  }
  /** reset starts over, for example after a connection that lasted. */
  reset() {
    this.attempt = 0;
  }
};

// src/gen/corral/v1/client_json.ts
var messageFields = {
  Hello: { token: "string", client: "string", resume: { message: "Resume", list: false } },
  Resume: { sessionId: "string", resumeToken: "string", instance: "string", attempt: "number", rooms: { message: "RoomPosition", list: true } },
  RoomPosition: { room: "string", seq: "number", epoch: "string", presence: "bool", statePosition: "number", stateEpoch: "string", openPrefix: "bool" },
  Join: { room: "string", sinceSeq: "number", epoch: "string", presence: "bool", presenceState: "payload", fromPosition: "bool", statePosition: "number", stateEpoch: "string", openPrefix: "bool" },
  Leave: { room: "string" },
  Publish: { room: "string", id: "string", payload: "payload", seq: "number" },
  Signal: { room: "string", key: "string", payload: "payload", clear: "bool" },
  Ack: { room: "string", seq: "number" },
  Ping: { id: "number" },
  SetPresence: { room: "string", state: "payload" },
  PresenceQuery: { room: "string", after: "string", limit: "number" },
  Refresh: { token: "string" },
  Call: { id: "number", method: "string", payload: "payload" },
  Append: { room: "string", id: "string", data: "payload", replace: "bool", final: "bool", version: "number" },
  SetState: { room: "string", key: "string", value: "payload", cas: "bool", version: "number", ttlMs: "number", ref: "string" },
  DeleteState: { room: "string", key: "string", cas: "bool", version: "number", ref: "string" },
  Welcome: { sessionId: "string", resumeToken: "string", userId: "string", resumed: "bool", heartbeatMs: "number", sessionTtlMs: "number", expiresUnix: "number" },
  Joined: { room: "string", seq: "number", epoch: "string", resumed: "bool", replay: "bool" },
  Left: { room: "string", code: "code", reason: "string" },
  Message: { room: "string", seq: "number", sender: "string", payload: "payload", timeMs: "number", id: "string", senderInfo: "payload", chunk: { message: "MessageChunk", list: false } },
  MessageChunk: { messageSeq: "number", version: "number", data: "payload", replace: "bool", final: "bool", delta: "payload" },
  SignalEvent: { room: "string", key: "string", sender: "string", payload: "payload", clear: "bool" },
  Published: { room: "string", id: "string", seq: "number", duplicate: "bool" },
  Pong: { id: "number", timeMs: "number" },
  ReconnectHint: { code: "code", reason: "string", delayMs: "number" },
  Error: { code: "code", message: "string", room: "string", ref: "string", retryAfterMs: "number", frame: "string" },
  Reset: { room: "string", seq: "number", epoch: "string" },
  Batch: { frames: { message: "ServerFrame", list: true } },
  Presence: { room: "string", snapshot: "bool", joins: { message: "PresenceMember", list: true }, updates: { message: "PresenceMember", list: true }, leaves: "strings", members: "number", connections: "number", countsOnly: "bool" },
  PresenceMember: { userId: "string", state: "payload", connections: "number", info: "payload" },
  PresencePage: { room: "string", members: { message: "PresenceMember", list: true }, next: "string", total: "number" },
  Refreshed: { expiresUnix: "number" },
  ReplayEnd: { room: "string", seq: "number" },
  CallResult: { id: "number", payload: "payload", error: { message: "Error", list: false } },
  StateSnapshot: { room: "string", entries: { message: "StateEntry", list: true }, position: "number", epoch: "string" },
  StateEntry: { key: "string", value: "payload", version: "number", expiresMs: "number" },
  StateChange: { room: "string", key: "string", value: "payload", version: "number", deleted: "bool", expired: "bool", position: "number", epoch: "string", delta: "payload", expiresMs: "number" },
  StateUpdated: { room: "string", key: "string", ref: "string", version: "number", position: "number", deleted: "bool" }
};
var clientKinds = {
  hello: "Hello",
  join: "Join",
  leave: "Leave",
  publish: "Publish",
  signal: "Signal",
  ack: "Ack",
  ping: "Ping",
  setPresence: "SetPresence",
  presenceQuery: "PresenceQuery",
  refresh: "Refresh",
  call: "Call",
  append: "Append",
  setState: "SetState",
  deleteState: "DeleteState"
};
var serverKinds = {
  welcome: "Welcome",
  joined: "Joined",
  left: "Left",
  message: "Message",
  signal: "SignalEvent",
  published: "Published",
  pong: "Pong",
  reconnect: "ReconnectHint",
  error: "Error",
  reset: "Reset",
  batch: "Batch",
  presence: "Presence",
  presencePage: "PresencePage",
  refreshed: "Refreshed",
  replayEnd: "ReplayEnd",
  callResult: "CallResult",
  stateSnapshot: "StateSnapshot",
  stateChange: "StateChange",
  stateUpdated: "StateUpdated"
};

// src/gen/corral/v1/codes_pb.ts
var Code = /* @__PURE__ */ ((Code2) => {
  Code2[Code2["UNSPECIFIED"] = 0] = "UNSPECIFIED";
  Code2[Code2["GOING_AWAY"] = 4e3] = "GOING_AWAY";
  Code2[Code2["SLOW_CONSUMER"] = 4001] = "SLOW_CONSUMER";
  Code2[Code2["CORE_UNAVAILABLE"] = 4002] = "CORE_UNAVAILABLE";
  Code2[Code2["HEARTBEAT_TIMEOUT"] = 4003] = "HEARTBEAT_TIMEOUT";
  Code2[Code2["SESSION_TAKEN_OVER"] = 4004] = "SESSION_TAKEN_OVER";
  Code2[Code2["OVERLOADED"] = 4100] = "OVERLOADED";
  Code2[Code2["RATE_LIMITED"] = 4101] = "RATE_LIMITED";
  Code2[Code2["SESSION_EXPIRED"] = 4102] = "SESSION_EXPIRED";
  Code2[Code2["UNAVAILABLE"] = 4103] = "UNAVAILABLE";
  Code2[Code2["TOKEN_EXPIRED"] = 4104] = "TOKEN_EXPIRED";
  Code2[Code2["BACKLOG_FULL"] = 4105] = "BACKLOG_FULL";
  Code2[Code2["OUT_OF_ORDER"] = 4106] = "OUT_OF_ORDER";
  Code2[Code2["BAD_FRAME"] = 4400] = "BAD_FRAME";
  Code2[Code2["UNAUTHENTICATED"] = 4401] = "UNAUTHENTICATED";
  Code2[Code2["RESUME_REFUSED"] = 4402] = "RESUME_REFUSED";
  Code2[Code2["FORBIDDEN"] = 4403] = "FORBIDDEN";
  Code2[Code2["NOT_JOINED"] = 4404] = "NOT_JOINED";
  Code2[Code2["HELLO_REQUIRED"] = 4405] = "HELLO_REQUIRED";
  Code2[Code2["UNKNOWN_FRAME"] = 4406] = "UNKNOWN_FRAME";
  Code2[Code2["INVALID_ARGUMENT"] = 4407] = "INVALID_ARGUMENT";
  Code2[Code2["LIMIT_EXCEEDED"] = 4408] = "LIMIT_EXCEEDED";
  Code2[Code2["UNSUBSCRIBED"] = 4409] = "UNSUBSCRIBED";
  Code2[Code2["UNIMPLEMENTED"] = 4410] = "UNIMPLEMENTED";
  Code2[Code2["VERSION_CONFLICT"] = 4411] = "VERSION_CONFLICT";
  Code2[Code2["MESSAGE_FINAL"] = 4412] = "MESSAGE_FINAL";
  Code2[Code2["TOO_LARGE"] = 4413] = "TOO_LARGE";
  Code2[Code2["TOO_MANY_KEYS"] = 4414] = "TOO_MANY_KEYS";
  return Code2;
})(Code || {});

// src/codec.ts
var CodecError = class extends Error {
  constructor() {
    super(...arguments);
    this.name = "CodecError";
  }
};
function fieldsOf(name) {
  const f = messageFields[name];
  if (!f) throw new CodecError(`${name}: a frame inside a message`);
  return f;
}
function encodeClient(frame) {
  const kinds = Object.keys(frame);
  if (kinds.length !== 1 || !(kinds[0] in clientKinds)) {
    throw new CodecError(`encode: want one client frame kind, got ${JSON.stringify(kinds)}`);
  }
  const kind = kinds[0];
  const body = frame[kind] ?? {};
  return `{${quote(kind)}:${encodeObject(clientKinds[kind], body, kind)}}`;
}
function encodeObject(name, v, path) {
  const spec = fieldsOf(name);
  const out = [];
  for (const key in spec) {
    const x = v[key];
    const at = `${path}.${key}`;
    const t = spec[key];
    if (typeof t === "object") {
      if (t.list) {
        const list = x;
        if (list && list.length > 0) {
          out.push(`"${key}":[${list.map((e, i) => encodeObject(t.message, e, `${at}[${i}]`)).join(",")}]`);
        }
      } else if (x) {
        out.push(`"${key}":${encodeObject(t.message, x, at)}`);
      }
      continue;
    }
    switch (t) {
      case "string":
        if (x !== void 0 && x !== "") out.push(`"${key}":${quote(str(x, at))}`);
        break;
      case "number":
      case "code":
        if (x !== void 0 && x !== 0) out.push(`"${key}":${int(x, at)}`);
        break;
      case "bool":
        if (x) out.push(`"${key}":true`);
        break;
      case "payload": {
        const p = encodePayload(x, at, key);
        if (p) out.push(p);
        break;
      }
      case "strings": {
        const list = x;
        if (list && list.length > 0) {
          out.push(`"${key}":[${list.map((e, i) => quote(str(e, `${at}[${i}]`))).join(",")}]`);
        }
        break;
      }
    }
  }
  return `{${out.join(",")}}`;
}
function encodePayload(x, path, key) {
  if (x === void 0 || x === null) return "";
  if (x instanceof Uint8Array) {
    return x.length === 0 ? "" : `"${key}Base64":"${toBase64(x)}"`;
  }
  const json = JSON.stringify(x);
  if (json === void 0) throw new CodecError(`encode: ${path}: not a JSON value`);
  return `"${key}":${escapeLineSeparators(json)}`;
}
function str(x, path) {
  if (typeof x !== "string") throw new CodecError(`encode: ${path}: want a string`);
  return x;
}
function int(x, path) {
  if (typeof x !== "number" || !Number.isSafeInteger(x) || x < 0) {
    throw new CodecError(`encode: ${path}: want a non-negative integer`);
  }
  return String(x);
}
function quote(s) {
  return escapeLineSeparators(JSON.stringify(s));
}
function escapeLineSeparators(s) {
  return s.replace(/[\u2028\u2029]/g, (c) => c === "\u2028" ? "\\u2028" : "\\u2029");
}
function decodeServer(text2) {
  let v;
  try {
    v = JSON.parse(text2);
  } catch (e) {
    throw new CodecError(`decode: not JSON: ${e.message}`);
  }
  const out = [];
  decodeInto(v, out, "");
  return out;
}
function decodeInto(v, out, path) {
  if (!isObject(v)) throw new CodecError(`decode: ${path || "frame"}: want an object`);
  let kind = "";
  for (const k2 in v) {
    if (k2 in serverKinds) {
      if (kind) throw new CodecError(`decode: ${path || "frame"}: more than one kind (${kind}, ${k2})`);
      kind = k2;
    }
  }
  if (!kind) return;
  const body = v[kind];
  if (kind === "batch") {
    if (body === null) return;
    if (!isObject(body)) throw new CodecError(`decode: ${path}batch: want an object`);
    const frames = body["frames"] ?? [];
    if (!Array.isArray(frames)) throw new CodecError(`decode: ${path}batch.frames: want an array`);
    frames.forEach((f, i) => decodeInto(f, out, `${path}batch.frames[${i}].`));
    return;
  }
  const k = kind;
  out.push({ case: k, value: decodeObject(serverKinds[k], body, path + kind) });
}
function decodeObject(name, body, path) {
  if (body !== null && !isObject(body)) throw new CodecError(`decode: ${path}: want an object`);
  const src = {};
  if (body) {
    for (const k in body) src[k.includes("_") ? camel(k) : k] = body[k];
  }
  const spec = fieldsOf(name);
  const out = {};
  for (const key in spec) {
    const x = src[key];
    const at = `${path}.${key}`;
    const t = spec[key];
    if (typeof t === "object") {
      if (t.list) {
        out[key] = decodeList(x, at).map((m, i) => decodeObject(t.message, m, `${at}[${i}]`));
      } else {
        out[key] = x === void 0 || x === null ? void 0 : decodeObject(t.message, x, at);
      }
      continue;
    }
    switch (t) {
      case "string":
        if (x !== void 0 && x !== null && typeof x !== "string") {
          throw new CodecError(`decode: ${at}: want a string`);
        }
        out[key] = x ?? "";
        break;
      case "number":
        out[key] = decodeNumber(x, at);
        break;
      case "code":
        out[key] = decodeCode(x, at);
        break;
      case "bool":
        if (x !== void 0 && x !== null && typeof x !== "boolean") {
          throw new CodecError(`decode: ${at}: want a boolean`);
        }
        out[key] = x === true;
        break;
      case "payload":
        out[key] = decodePayload(x, src[key + "Base64"], at);
        break;
      case "strings":
        out[key] = decodeList(x, at).map((s, i) => {
          if (typeof s !== "string") throw new CodecError(`decode: ${at}[${i}]: want a string`);
          return s;
        });
        break;
    }
  }
  return out;
}
function decodeList(x, path) {
  if (x === void 0 || x === null) return [];
  if (!Array.isArray(x)) throw new CodecError(`decode: ${path}: want an array`);
  return x;
}
function decodeNumber(x, path) {
  if (x === void 0 || x === null) return 0;
  const n = typeof x === "string" && x.trim() !== "" ? Number(x) : x;
  if (typeof n !== "number" || !Number.isInteger(n)) {
    throw new CodecError(`decode: ${path}: want an integer`);
  }
  return n;
}
function decodeCode(x, path) {
  if (typeof x === "string" && x.startsWith("CODE_")) {
    const n = Code[x.slice(5)];
    if (n !== void 0) return n;
  }
  return decodeNumber(x, path);
}
function decodePayload(inline, b64, path) {
  if (inline !== void 0 && inline !== null) return inline;
  if (typeof b64 === "string" && b64 !== "") {
    try {
      return fromBase64(b64);
    } catch {
      throw new CodecError(`decode: ${path}Base64: not base64`);
    }
  }
  return void 0;
}
function isObject(v) {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
function camel(s) {
  return s.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());
}
function toBase64(b) {
  let s = "";
  for (let i = 0; i < b.length; i++) s += String.fromCharCode(b[i]);
  return btoa(s);
}
function fromBase64(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

// src/clock.ts
function now() {
  return performance.now();
}

// src/codes.ts
function adviceOf(code) {
  if (code >= 4100 && code <= 4199) return "retry";
  if (code >= 4400 && code <= 4499) return "stop";
  return "resume";
}

// src/emitter.ts
var Emitter = class {
  constructor() {
    this.listeners = /* @__PURE__ */ new Map();
  }
  /** on adds a listener and returns a function that removes it. */
  on(type, fn) {
    let set = this.listeners.get(type);
    if (!set) this.listeners.set(type, set = /* @__PURE__ */ new Set());
    set.add(fn);
    return () => this.off(type, fn);
  }
  /** off removes a listener added with on. */
  off(type, fn) {
    this.listeners.get(type)?.delete(fn);
  }
  emit(type, event) {
    const set = this.listeners.get(type);
    if (!set) return;
    for (const fn of [...set]) {
      try {
        fn(event);
      } catch (err) {
        queueMicrotask(() => {
          throw err;
        });
      }
    }
  }
};

// src/transport.ts
var TRANSPORTS = ["websocket", "sse", "stream"];
function isTransportName(s) {
  return typeof s === "string" && TRANSPORTS.includes(s);
}
function httpBase(wsUrl) {
  const u = new URL(wsUrl);
  if (u.protocol === "ws:") u.protocol = "http:";
  else if (u.protocol === "wss:") u.protocol = "https:";
  const path = u.pathname.replace(/\/[^/]*$/, "");
  return `${u.protocol}//${u.host}${path}`;
}

// src/storage.ts
function loadState(storage, key) {
  const empty = { session: null, rooms: {} };
  if (!storage) return empty;
  try {
    const raw = storage.getItem(key);
    if (!raw) return empty;
    const v = JSON.parse(raw);
    const s = v.session;
    const session = s && typeof s.sessionId === "string" && typeof s.resumeToken === "string" ? { sessionId: s.sessionId, resumeToken: s.resumeToken, userId: String(s.userId ?? "") } : null;
    const rooms = {};
    for (const [room, p] of Object.entries(v.rooms ?? {})) {
      if (p && Number.isSafeInteger(p.seq) && p.seq >= 0) rooms[room] = { seq: p.seq, epoch: String(p.epoch ?? "") };
    }
    return { session, rooms };
  } catch {
    return empty;
  }
}
function saveState(storage, key, state) {
  if (!storage) return;
  try {
    if (!state.session && Object.keys(state.rooms).length === 0) storage.removeItem(key);
    else storage.setItem(key, JSON.stringify(state));
  } catch {
  }
}
function loadTransport(storage, key, nowMs) {
  if (!storage) return null;
  try {
    const raw = storage.getItem(key);
    if (!raw) return null;
    const v = JSON.parse(raw);
    if (!isTransportName(v.transport) || typeof v.until !== "number" || v.until <= nowMs) return null;
    return v.transport;
  } catch {
    return null;
  }
}
function saveTransport(storage, key, transport, until) {
  if (!storage) return;
  try {
    storage.setItem(key, JSON.stringify({ transport, until }));
  } catch {
  }
}

// src/fallback.ts
var Picker = class {
  constructor(order, storage, key, ttlMs, wallClock = Date.now) {
    this.order = order;
    this.storage = storage;
    this.key = key;
    this.ttlMs = ttlMs;
    this.wallClock = wallClock;
    this.round = [];
    this.at = 0;
    this.worked = null;
    const saved = ttlMs > 0 ? loadTransport(storage, key, wallClock()) : null;
    if (saved && order.includes(saved)) this.worked = saved;
  }
  /** current is the transport of the current (or next) attempt. */
  current() {
    if (this.at >= this.round.length) this.newRound();
    return this.round[this.at];
  }
  /** hasNext says whether the current round has a transport after this one. */
  hasNext() {
    return this.at + 1 < this.round.length;
  }
  /** next moves to the round's next transport; false at the round's end
   * (the next current() starts a new round). */
  next() {
    this.at++;
    return this.at < this.round.length;
  }
  /** endRound makes the next current() start a new round. */
  endRound() {
    this.at = this.round.length;
  }
  /** worked records that name reached a Welcome: it leads the next round
   * and is remembered. */
  succeeded(name) {
    this.worked = name;
    if (this.ttlMs > 0) saveTransport(this.storage, this.key, name, this.wallClock() + this.ttlMs);
  }
  newRound() {
    const first = this.worked;
    this.round = first ? [first, ...this.order.filter((t) => t !== first)] : [...this.order];
    this.at = 0;
  }
};

// src/delta.ts
var DeltaError = class extends Error {
  constructor(message) {
    super(`delta: ${message}`);
    this.name = "DeltaError";
  }
};
var DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz~";
var VALUE = (() => {
  const v = new Int8Array(256).fill(-1);
  for (let i = 0; i < DIGITS.length; i++) v[DIGITS.charCodeAt(i)] = i;
  return v;
})();
function checksum(z) {
  let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  let i = 0;
  for (; z.length - i >= 4; i += 4) {
    s0 = s0 + z[i] | 0;
    s1 = s1 + z[i + 1] | 0;
    s2 = s2 + z[i + 2] | 0;
    s3 = s3 + z[i + 3] | 0;
  }
  s3 = s3 + (s2 << 8) + (s1 << 16) + (s0 << 24) | 0;
  const rest = z.length - i;
  if (rest >= 3) s3 = s3 + (z[i + 2] << 8) | 0;
  if (rest >= 2) s3 = s3 + (z[i + 1] << 16) | 0;
  if (rest >= 1) s3 = s3 + (z[i] << 24) | 0;
  return s3 >>> 0;
}
function applyDelta(source, delta, maxLength = 16 << 20) {
  let pos = 0;
  const int2 = () => {
    const start = pos;
    let v = 0;
    while (pos < delta.length) {
      const d = VALUE[delta[pos]];
      if (d < 0) break;
      if (pos - start === 8) throw new DeltaError(`number too long at ${start}`);
      v = v * 64 + d;
      pos++;
    }
    if (pos === start) throw new DeltaError(`number expected at ${start}`);
    return v;
  };
  const expect = (c) => {
    if (pos >= delta.length || delta[pos] !== c.charCodeAt(0)) {
      throw new DeltaError(`${JSON.stringify(c)} expected at ${pos}`);
    }
    pos++;
  };
  const n = int2();
  expect("\n");
  if (n > maxLength) throw new DeltaError(`target of ${n} bytes, more than ${maxLength}`);
  const out = new Uint8Array(n);
  let len = 0;
  while (pos < delta.length) {
    const cnt = int2();
    if (pos >= delta.length) break;
    const op = String.fromCharCode(delta[pos++]);
    if (op === "@") {
      const ofst = int2();
      expect(",");
      if (len + cnt > n) throw new DeltaError("copy past the target's length");
      if (ofst + cnt > source.length) {
        throw new DeltaError(`copy of ${cnt} bytes at ${ofst} past the source's ${source.length}`);
      }
      out.set(source.subarray(ofst, ofst + cnt), len);
      len += cnt;
    } else if (op === ":") {
      if (len + cnt > n) throw new DeltaError("insert past the target's length");
      if (cnt > delta.length - pos) throw new DeltaError(`insert of ${cnt} bytes past the delta's end`);
      out.set(delta.subarray(pos, pos + cnt), len);
      len += cnt;
      pos += cnt;
    } else if (op === ";") {
      if (len !== n) throw new DeltaError(`target of ${len} bytes, ${n} declared`);
      if (checksum(out) !== cnt) throw new DeltaError("checksum mismatch");
      if (pos !== delta.length) throw new DeltaError("bytes after the end");
      return out;
    } else {
      throw new DeltaError(`unknown command ${JSON.stringify(op)} at ${pos - 1}`);
    }
  }
  throw new DeltaError("unterminated");
}

// src/bytes.ts
var enc = new TextEncoder();
var dec = new TextDecoder();
function toBytes(p) {
  if (p === void 0 || p === null) return new Uint8Array(0);
  if (p instanceof Uint8Array) return p;
  return enc.encode(JSON.stringify(p));
}
function utf8(s) {
  return enc.encode(s);
}
function text(b) {
  return dec.decode(b);
}
function concat(a, b) {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

// src/growing.ts
var GapError = class extends Error {
  constructor() {
    super(...arguments);
    this.name = "GapError";
  }
};
var GrowingMessage = class extends Emitter {
  constructor(room, id, messageSeq, maxBytes = 1 << 20) {
    super();
    this.room = room;
    this.id = id;
    this.maxBytes = maxBytes;
    /** The seq of the last chunk applied. */
    this.seq = 0;
    this.version = 0;
    this.final = false;
    this.body = new Uint8Array(0);
    this.messageSeq = messageSeq;
  }
  /** The body so far as UTF-8 text. */
  get text() {
    return text(this.body);
  }
  /**
   * apply applies m's chunk and says whether it changed the message
   * (false: a duplicate, such as a resume's replay or a chunk older than
   * the prefix a joiner got). Throws GapError for a chunk that cannot be
   * applied.
   */
  apply(m) {
    const c = m.chunk;
    if (!c) return false;
    const version = c.version ?? 0;
    if (this.version > 0 && (version <= this.version || m.seq <= this.seq)) return false;
    if (this.final) throw new GapError(`growing message ${m.id}: version ${version} after its final chunk`);
    if (!c.replace && version !== this.version + 1) {
      throw new GapError(`growing message ${m.id}: version ${version} after version ${this.version}`);
    }
    let data = toBytes(c.data);
    const d = toBytes(c.delta);
    if (d.length > 0) {
      if (this.version === 0 || version !== this.version + 1) {
        throw new GapError(`growing message ${m.id}: a delta to version ${version}, holding version ${this.version}`);
      }
      data = applyDelta(this.body, d, this.maxBytes);
    }
    const body = c.replace ? data : concat(this.body, data);
    if (body.length > this.maxBytes) {
      throw new GapError(`growing message ${m.id}: body of ${body.length} bytes past ${this.maxBytes}`);
    }
    this.body = body;
    this.seq = m.seq;
    this.version = version;
    this.final = c.final ?? false;
    this.emit("chunk", { seq: m.seq, version, data, replace: c.replace ?? false, final: this.final });
    if (this.final) this.emit("final", this);
    return true;
  }
};
var Assembler = class {
  constructor() {
    this.msgs = /* @__PURE__ */ new Map();
  }
  /** feed applies m's chunk to its message, opening it on its first chunk
   * (returned with opened: true, before its first chunk is applied, so a
   * listener added then sees it). */
  feed(m, onOpen) {
    const c = m.chunk;
    if (!c) return void 0;
    let g = this.msgs.get(m.id);
    if (g && (c.messageSeq ?? 0) > g.messageSeq) g = void 0;
    if (!g) {
      g = new GrowingMessage(m.room, m.id, c.messageSeq ?? 0);
      this.msgs.set(m.id, g);
      onOpen(g);
    }
    return { message: g, applied: g.apply(m) };
  }
  get(id) {
    return this.msgs.get(id);
  }
  /** forget drops a message (after its final chunk). */
  forget(id) {
    this.msgs.delete(id);
  }
};

// src/roomstate.ts
var RoomState = class extends Emitter {
  constructor(room, writer) {
    super();
    this.room = room;
    this.writer = writer;
    this.epoch = "";
    this.position = 0;
    /** A snapshot was applied. */
    this.ready = false;
    this.entriesByKey = /* @__PURE__ */ new Map();
  }
  get(key) {
    return this.entriesByKey.get(key);
  }
  /** entries returns the keys and entries held, sorted by key. */
  entries() {
    return [...this.entriesByKey.entries()].sort((a, b) => a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0);
  }
  set(key, value, opts = {}) {
    return this.writer.setState(this.room, key, value, opts);
  }
  delete(key, opts = {}) {
    return this.writer.deleteState(this.room, key, opts);
  }
  /** applySnapshot replaces the view with s. */
  applySnapshot(s) {
    this.entriesByKey = /* @__PURE__ */ new Map();
    for (const e of s.entries) {
      this.entriesByKey.set(e.key ?? "", { value: e.value ?? null, version: e.version ?? 0, expiresMs: e.expiresMs ?? 0 });
    }
    this.epoch = s.epoch;
    this.position = s.position;
    this.ready = true;
    this.emit("snapshot", this);
  }
  /** applyChange applies c and says whether it changed the view (false:
   * a duplicate, at or below the view's position, as a resume replays).
   * A change that does not follow the view emits "stale" and returns
   * false. */
  applyChange(c) {
    const stale = (why) => {
      this.emit("stale", new Error(`room state ${this.room}: ${why}`));
      return false;
    };
    if (!this.ready && c.position === 1 && this.epoch === "" && this.position === 0) this.ready = true;
    if (!this.ready) return stale(`change at position ${c.position} before a snapshot`);
    const fresh = this.epoch === "" && this.position === 0;
    if (c.epoch !== this.epoch && !fresh) return stale(`change of epoch ${c.epoch}, holding ${this.epoch}`);
    if (c.position <= this.position) return false;
    if (c.position !== this.position + 1) return stale(`change at position ${c.position} after ${this.position}`);
    let entry;
    const d = toBytes(c.delta);
    if (c.deleted) {
      this.entriesByKey.delete(c.key);
    } else if (d.length > 0) {
      const old = this.entriesByKey.get(c.key);
      if (!old || old.version + 1 !== c.version) {
        return stale(`a delta to version ${c.version} of ${c.key}, holding version ${old?.version ?? 0}`);
      }
      let value;
      try {
        value = applyDelta(toBytes(old.value), d);
      } catch (err) {
        return stale(`a delta to version ${c.version} of ${c.key}: ${err.message}`);
      }
      entry = { value: decodeValue(value), version: c.version, expiresMs: c.expiresMs };
      this.entriesByKey.set(c.key, entry);
    } else {
      entry = { value: c.value ?? null, version: c.version, expiresMs: c.expiresMs };
      this.entriesByKey.set(c.key, entry);
    }
    this.epoch = c.epoch;
    this.position = c.position;
    this.emit("change", { key: c.key, entry, deleted: c.deleted, expired: c.expired, position: c.position });
    return true;
  }
};
function decodeValue(b) {
  try {
    return JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(b));
  } catch {
    return b;
  }
}

// src/room.ts
var Room = class extends Emitter {
  constructor(name, writer) {
    super();
    this.name = name;
    this.writer = writer;
    this.assembler = new Assembler();
    this.state = new RoomState(name, writer);
  }
  /**
   * append adds text (sent as its UTF-8 bytes) or bytes to the growing
   * message id, opening it on the first append. It resolves with the
   * server's answer (the chunk's seq) or rejects with a CorralError: 4412
   * after the final chunk, 4106 for a version more than one ahead, 4410
   * from a server that does not serve growing messages yet. Appends of
   * one id may be pipelined: answers settle them oldest first.
   */
  append(id, data, opts = {}) {
    return this.writer.append(this.name, id, data, opts);
  }
  /** message returns the growing message id as received so far. */
  message(id) {
    return this.assembler.get(id);
  }
  /** forget drops a finished growing message the app no longer needs. */
  forget(id) {
    this.assembler.forget(id);
  }
  /** onChunk feeds a chunk message (the Client calls it). */
  onChunk(m) {
    try {
      this.assembler.feed(m, (g) => this.emit("growing", g));
    } catch (err) {
      if (err instanceof GapError) this.emit("gap", err);
      else throw err;
    }
  }
};

// src/poster.ts
var CLOSE_ABNORMAL = 1006;
var CLOSE_GOING_AWAY = 1001;
var CODE_BAD_FRAME = 4400;
var CODE_FORBIDDEN = 4403;
var CODE_TOO_LARGE = 4413;
var PostQueue = class {
  constructor(url, streamId, fetch, onfail, maxBytes = 32 << 10) {
    this.url = url;
    this.streamId = streamId;
    this.fetch = fetch;
    this.onfail = onfail;
    this.maxBytes = maxBytes;
    this.queue = [];
    this.busy = false;
    /** The POST on its way, if any. */
    this.inflight = null;
    this.secret = "";
    this.done = false;
    this.abort = new AbortController();
  }
  /** ready gives the stream's secret: the queued frames go from now on. */
  ready(secret) {
    this.secret = secret;
    void this.flush();
  }
  /** send queues one JSON client frame (it holds no raw line break). */
  send(frame) {
    if (this.done) return;
    this.queue.push(frame);
    void this.flush();
  }
  /** close drops what is queued and abandons the POST on its way. */
  close() {
    this.done = true;
    this.queue = [];
    this.abort.abort();
  }
  /**
   * leave drops what is queued and ends the stream as a normal close
   * (DELETE /rt/send: presence leaves at once, not after a drop's grace),
   * after the POST on its way; then calls after, which may drop the
   * stream's response (before, the edge would see a drop first). The
   * DELETE is a keepalive request: it outlives the page.
   */
  leave(after) {
    if (this.done) return;
    this.done = true;
    this.queue = [];
    if (!this.secret) {
      this.abort.abort();
      after();
      return;
    }
    const del = () => this.fetch(this.url, {
      method: "DELETE",
      headers: { "X-Corral-Stream": this.streamId, "X-Corral-Secret": this.secret },
      keepalive: true,
      cache: "no-store"
    }).then((res) => res.arrayBuffer()).catch(() => void 0).finally(after);
    void (this.inflight ?? Promise.resolve()).then(del);
  }
  async flush() {
    if (this.busy || this.done || !this.secret || this.queue.length === 0) return;
    this.busy = true;
    try {
      while (!this.done && this.queue.length > 0) {
        let n = 1;
        let size = this.queue[0].length;
        while (n < this.queue.length && size + 1 + this.queue[n].length <= this.maxBytes) {
          size += 1 + this.queue[n].length;
          n++;
        }
        const frames = this.queue.slice(0, n);
        this.inflight = this.post(frames.join("\n"));
        const status = await this.inflight;
        this.inflight = null;
        if (this.done) return;
        if (status === 204 || status >= 200 && status < 300) {
          this.queue.splice(0, n);
          continue;
        }
        if (status === 413 && n > 1) {
          this.maxBytes = Math.max(1, Math.floor(size / 2));
          continue;
        }
        this.fail(...failure(status));
        return;
      }
    } finally {
      this.busy = false;
    }
  }
  /** post sends one body and returns its status, 0 when the request failed. */
  async post(body) {
    try {
      const res = await this.fetch(this.url, {
        method: "POST",
        headers: {
          "Content-Type": "application/json",
          "X-Corral-Stream": this.streamId,
          "X-Corral-Secret": this.secret
        },
        body,
        signal: this.abort.signal,
        cache: "no-store"
      });
      await res.arrayBuffer().catch(() => void 0);
      return res.status;
    } catch {
      return 0;
    }
  }
  fail(code, reason) {
    if (this.done) return;
    this.close();
    this.onfail(code, reason);
  }
};
function failure(status) {
  switch (status) {
    case 0:
      return [CLOSE_ABNORMAL, "send: the request failed"];
    case 404:
      return [CLOSE_ABNORMAL, "send: the stream is gone"];
    case 503:
      return [CLOSE_GOING_AWAY, "send: the server is draining"];
    case 400:
    case 415:
      return [CODE_BAD_FRAME, `send: refused (${status})`];
    case 403:
      return [CODE_FORBIDDEN, "send: refused (403)"];
    case 413:
      return [CODE_TOO_LARGE, "send: a frame is too large"];
    default:
      return [CLOSE_ABNORMAL, `send: status ${status}`];
  }
}
function newStreamId(random) {
  const bytes = new Uint8Array(16);
  const c = globalThis.crypto;
  if (c?.getRandomValues) c.getRandomValues(bytes);
  else for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(random() * 256);
  const abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  let out = "";
  for (let i = 0; i < bytes.length; i += 3) {
    const n = bytes[i] << 16 | (bytes[i + 1] ?? 0) << 8 | (bytes[i + 2] ?? 0);
    const chars = Math.min(4, Math.ceil((bytes.length - i) * 8 / 6));
    for (let j = 0; j < chars; j++) out += abc[n >> 18 - 6 * j & 63];
  }
  return out;
}

// src/sse.ts
var SSEConn = class {
  constructor(base, ES, fetch, random) {
    this.readyState = 0;
    this.onopen = null;
    this.onmessage = null;
    this.onclose = null;
    this.onerror = null;
    const id = newStreamId(random);
    this.posts = new PostQueue(`${base}/rt/send?stream=${id}`, id, fetch, (code, reason) => this.end(code, reason));
    this.es = new ES(`${base}/rt/sse?stream=${id}`);
    this.es.addEventListener("corral-open", (ev) => {
      if (this.readyState !== 0) return;
      let secret = "";
      try {
        secret = String(JSON.parse(ev.data).secret ?? "");
      } catch {
      }
      if (!secret) {
        this.end(CLOSE_ABNORMAL, "sse: an open event without a secret");
        return;
      }
      this.readyState = 1;
      this.posts.ready(secret);
      this.onopen?.({});
    });
    this.es.onmessage = (ev) => {
      if (this.readyState === 1) this.onmessage?.({ data: ev.data });
    };
    this.es.addEventListener("corral-close", (ev) => {
      let code = CLOSE_ABNORMAL;
      let reason = "";
      try {
        const v = JSON.parse(ev.data);
        if (typeof v.code === "number") code = v.code;
        reason = String(v.reason ?? "");
      } catch {
      }
      this.end(code, reason);
    });
    this.es.onerror = () => this.end(CLOSE_ABNORMAL, "sse: the event stream failed");
  }
  send(data) {
    if (this.readyState > 1) return;
    this.posts.send(data);
  }
  /** close ends the stream; with 1000 (the Client's close()) as a
   * normal close, which the edge is told of (DELETE /rt/send) before the
   * event stream is dropped. */
  close(code) {
    if (this.readyState === 3) return;
    this.readyState = 3;
    if (code === 1e3) {
      this.posts.leave(() => this.es.close());
      return;
    }
    this.es.close();
    this.posts.close();
  }
  end(code, reason) {
    if (this.readyState === 3) return;
    this.close();
    this.onclose?.({ code, reason });
  }
};

// src/stream.ts
var StreamConn = class {
  constructor(base, fetch, random) {
    this.base = base;
    this.fetch = fetch;
    this.readyState = 0;
    this.onopen = null;
    this.onmessage = null;
    this.onclose = null;
    this.onerror = null;
    this.abort = new AbortController();
    this.started = false;
    /** The code and reason of the last frame that explains a close. */
    this.closing = null;
    this.id = newStreamId(random);
    this.posts = new PostQueue(`${base}/rt/send?stream=${this.id}`, this.id, fetch, (code, reason) => this.end(code, reason));
    queueMicrotask(() => {
      if (this.readyState !== 0) return;
      this.readyState = 1;
      this.onopen?.({});
    });
  }
  send(data) {
    if (this.readyState !== 1) return;
    if (this.started) {
      this.posts.send(data);
      return;
    }
    this.started = true;
    void this.run(data);
  }
  /** close ends the stream; with 1000 (the Client's close()) as a
   * normal close, which the edge is told of (DELETE /rt/send) before the
   * response is dropped. */
  close(code) {
    if (this.readyState === 3) return;
    this.readyState = 3;
    if (code === 1e3) {
      this.posts.leave(() => this.abort.abort());
      return;
    }
    this.abort.abort();
    this.posts.close();
  }
  end(code, reason) {
    if (this.readyState === 3) return;
    this.close();
    this.onclose?.({ code, reason });
  }
  /** run opens the stream with hello and reads it to its end. */
  async run(hello) {
    let res;
    try {
      res = await this.fetch(`${this.base}/rt/stream?stream=${this.id}`, {
        method: "POST",
        headers: { "Content-Type": "application/json", "X-Corral-Stream": this.id },
        body: hello,
        signal: this.abort.signal,
        cache: "no-store"
      });
    } catch {
      this.end(CLOSE_ABNORMAL, "stream: the request failed");
      return;
    }
    if (res.status !== 200 || !res.body) {
      this.end(...await refusal(res));
      return;
    }
    const secret = res.headers.get("X-Corral-Secret") ?? "";
    if (!secret) {
      this.end(CLOSE_ABNORMAL, "stream: no X-Corral-Secret in the answer");
      return;
    }
    this.posts.ready(secret);
    const records = new RecordReader();
    const text2 = new TextDecoder();
    const reader = res.body.getReader();
    let why = "stream: the response ended";
    try {
      for (; ; ) {
        const { done, value } = await reader.read();
        if (done || this.readyState === 3) break;
        for (const rec of records.push(value)) {
          if (rec.length === 0) continue;
          const data = text2.decode(rec);
          this.closing = explains(data);
          this.onmessage?.({ data });
          if (this.readyState === 3) return;
        }
      }
    } catch (err) {
      why = err.message.startsWith("stream:") ? err.message : "stream: the response failed";
      this.closing = null;
      void reader.cancel().catch(() => void 0);
    }
    if (records.pending()) this.closing = null;
    const c = this.closing;
    this.end(c?.code ?? CLOSE_ABNORMAL, c?.reason ?? why);
  }
};
var MAX_RECORD = 16 << 20;
var RecordReader = class {
  constructor(max = MAX_RECORD) {
    this.max = max;
    this.buf = new Uint8Array(0);
  }
  /** push adds bytes and returns the records they complete. */
  push(chunk) {
    const b = new Uint8Array(this.buf.length + chunk.length);
    b.set(this.buf);
    b.set(chunk, this.buf.length);
    const out = [];
    let at = 0;
    while (b.length - at >= 4) {
      const n = (b[at] << 24 | b[at + 1] << 16 | b[at + 2] << 8 | b[at + 3]) >>> 0;
      if (n > this.max) throw new Error(`stream: a record of ${n} bytes (at most ${this.max})`);
      if (b.length - at - 4 < n) break;
      out.push(b.subarray(at + 4, at + 4 + n));
      at += 4 + n;
    }
    this.buf = b.slice(at);
    return out;
  }
  /** pending says whether part of a record is waiting for more bytes. */
  pending() {
    return this.buf.length > 0;
  }
};
function explains(data) {
  let v;
  try {
    v = JSON.parse(data);
  } catch {
    return null;
  }
  for (; ; ) {
    if (!isObject2(v)) return null;
    const batch = v["batch"];
    if (isObject2(batch) && Array.isArray(batch["frames"])) {
      v = batch["frames"].at(-1);
      continue;
    }
    const hint = v["reconnect"];
    if (isObject2(hint) && typeof hint["code"] === "number") return { code: hint["code"], reason: String(hint["reason"] ?? "") };
    const err = v["error"];
    if (isObject2(err) && typeof err["code"] === "number" && !err["room"] && !err["ref"]) {
      return { code: err["code"], reason: String(err["message"] ?? "") };
    }
    return null;
  }
}
function isObject2(v) {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
async function refusal(res) {
  let body = "";
  try {
    body = await res.text();
  } catch {
  }
  try {
    const v = JSON.parse(body);
    if (typeof v.code === "number" && v.code >= 4e3) return [v.code, String(v.message ?? `refused (${res.status})`)];
  } catch {
  }
  return [CLOSE_ABNORMAL, `stream: status ${res.status}`];
}

// src/client.ts
var SUBPROTOCOL = "corral.v1.json";
var CLIENT_NAME = "corral-js/0.1.0";
var CorralError = class _CorralError extends Error {
  constructor(code, message, room = "", ref = "", retryAfterMs = 0, frame = "") {
    super(message);
    this.code = code;
    this.room = room;
    this.ref = ref;
    this.retryAfterMs = retryAfterMs;
    this.frame = frame;
    this.name = "CorralError";
    this.advice = adviceOf(code);
  }
  static from(e) {
    return new _CorralError(e.code, e.message || `error ${e.code}`, e.room, e.ref, e.retryAfterMs, e.frame);
  }
};
var Client = class extends Emitter {
  constructor(options) {
    super();
    this.options = options;
    /** The transport of the current attempt or connection ("" when none),
     * and of the last one that opened. */
    this.tp = "";
    this.lastOpened = "";
    /** This round's failures, for the "transport" event. */
    this.failed = [];
    this.st = "idle";
    this.ws = null;
    this.gen = 0;
    // the current socket's generation; older sockets' events are ignored
    this.session = null;
    this.welcomeFrame = null;
    this.hint = null;
    /** The error frame (no room, no ref) of the stop class that may come
     * before a stop-class close: the server sends one instead of a
     * reconnect hint (docs/CODES.md). Already emitted as "error". */
    this.refusal = null;
    this.openedAt = 0;
    this.lastSent = -Infinity;
    // now(); monotonic, see clock.ts
    this.lastReceived = 0;
    this.heartbeatMs = 25e3;
    this.pingId = 0;
    this.dirty = false;
    this.rooms = /* @__PURE__ */ new Map();
    /** Rooms left that the server may still have us in; sent: a Leave went
     * out on the current connection. */
    this.leaving = /* @__PURE__ */ new Map();
    /** The rooms named in the current connection's resume hello. */
    this.resumeRooms = /* @__PURE__ */ new Set();
    /** Unresolved publishes by id, in the order they were made (a Map
     * iterates in insertion order): per room, the outbox. A publish is sent
     * again only after every earlier one of its room was sent again or
     * resolved, and carries its place (Publish.seq), so that the server
     * refuses it (OUT_OF_ORDER) rather than store it before an earlier one:
     * a sender's publishes enter the room in the order they were made
     * (docs/GUARANTEES.md). */
    this.outbox = /* @__PURE__ */ new Map();
    this.signals = /* @__PURE__ */ new Map();
    /** Resume attempts made by this Client (Resume.attempt). */
    this.dials = 0;
    this.nextId = 0;
    /** The current token's expiry (unix seconds; 0: never). */
    this.expiresUnix = 0;
    /** A Refresh was sent and not yet answered. */
    this.refreshing = false;
    /** Calls waiting for their callResult, by id. */
    this.calls = /* @__PURE__ */ new Map();
    /** Room handles (room()), by name. */
    this.handles = /* @__PURE__ */ new Map();
    /** Unanswered setState/deleteState by ref, and appends by room and id:
     * like calls, not sent again after a lost connection. */
    this.stateWaits = /* @__PURE__ */ new Map();
    /** By room and id, oldest first: appends of one id may be pipelined,
     * and the server answers a connection's frames in order. */
    this.appendWaits = /* @__PURE__ */ new Map();
    this.stateRef = 0;
    this.callId = 0;
    this.opts = {
      signalIntervalMs: options.signalIntervalMs ?? 33,
      ackDelayMs: options.ackDelayMs ?? 1e3,
      connectTimeoutMs: options.connectTimeoutMs ?? 1e4,
      stableMs: options.stableMs ?? 5e3,
      publishRetries: options.publishRetries ?? 5,
      publishTimeoutMs: options.publishTimeoutMs ?? 5e3
    };
    const g = globalThis;
    this.WS = options.WebSocket ?? g.WebSocket;
    this.ES = options.EventSource ?? g.EventSource;
    this.fetchFn = options.fetch ?? (g.fetch ? (input, init) => g.fetch(input, init) : void 0);
    const has = {
      websocket: !!this.WS,
      sse: !!this.ES && !!this.fetchFn,
      stream: !!this.fetchFn && typeof ReadableStream !== "undefined"
    };
    const wanted = options.transports ?? [...TRANSPORTS];
    const order = [...new Set(wanted)].filter((t) => TRANSPORTS.includes(t) && has[t]);
    if (order.length === 0) {
      throw new Error(
        `corral: none of the transports ${JSON.stringify(wanted)} can run here; pass options.WebSocket (or EventSource and fetch)`
      );
    }
    this.httpUrl = (options.httpUrl ?? httpBase(options.url)).replace(/\/+$/, "");
    this.transportTimeoutMs = options.transportTimeoutMs ?? 5e3;
    this.random = options.random ?? Math.random;
    this.backoff = new Backoff(options.backoff, this.random);
    this.storage = options.storage !== void 0 ? options.storage : globalThis.sessionStorage ?? null;
    this.storageKey = options.storageKey ?? `corral:${options.url}`;
    let tstore = options.transportStorage;
    if (tstore === void 0) {
      try {
        tstore = g.localStorage ?? this.storage;
      } catch {
        tstore = this.storage;
      }
    }
    this.picker = new Picker(order, tstore, `${this.storageKey}:transport`, options.rememberTransportMs ?? 864e5);
    this.idPrefix = Math.floor(this.random() * 36 ** 8).toString(36).padStart(8, "0");
    const saved = loadState(this.storage, this.storageKey);
    this.session = saved.session;
    for (const [room, pos] of Object.entries(saved.rooms)) {
      this.rooms.set(room, { ...newRoom(pos.seq, pos.epoch), noBodies: true });
    }
  }
  /** state is where the client is now. */
  get state() {
    return this.st;
  }
  /** welcome is the current connection's Welcome, or null when not open. */
  get welcome() {
    return this.welcomeFrame;
  }
  /**
   * transport is the transport of the open connection, or of the attempt
   * under way ("" when there is neither): "websocket", "sse" or "stream".
   */
  get transport() {
    return this.tp;
  }
  /** sessionId is the session this client resumes, or "" before the first Welcome. */
  get sessionId() {
    return this.session?.sessionId ?? "";
  }
  /** joinedRooms lists the rooms this client is in or is joining. */
  get joinedRooms() {
    return [...this.rooms.keys()];
  }
  /** position returns the last seq processed in a room and its epoch. */
  position(room) {
    const r = this.rooms.get(room);
    return r && { seq: r.seq, epoch: r.epoch };
  }
  /** connect starts connecting; it does nothing if already started. */
  connect() {
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
  close() {
    if (this.st === "closed" || this.st === "idle") {
      this.st = "closed";
      return;
    }
    const ws = this.ws;
    this.detach();
    ws?.close(1e3, "client closed");
    this.stop(new CorralError(1e3, "client closed"));
  }
  /**
   * join enters a room and resolves when the server confirms it. A room
   * the client was in before a reload (or a resume) is restored from where
   * it was left; a room joined for the first time starts at its current end.
   */
  join(room, opts) {
    if (this.st === "closed") return Promise.reject(new CorralError(1e3, "client closed", room));
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
    const p = new Promise((resolve, reject) => r.waiters.push({ resolve, reject }));
    if (this.st === "open" && !r.joining) this.sendJoin(room, r);
    return p;
  }
  /**
   * setPresence replaces the user's presence state in a room joined with
   * presence ({ presence: true }); the state is kept for rejoins.
   */
  setPresence(room, state) {
    const r = this.rooms.get(room);
    if (!r?.presence) throw new CorralError(4404 /* NOT_JOINED */, "room not joined with presence", room);
    r.state = state;
    if (this.st === "open" && r.ready) this.send({ setPresence: { room, state } });
  }
  /** queryPresence asks for a page of a joined room's members, ordered by
   * user id after `after`; the answer comes as a "presencePage" event. */
  queryPresence(room, after = "", limit = 0) {
    if (this.st === "open") this.send({ presenceQuery: { room, after, limit } });
  }
  /** leave exits a room; it resolves when the server confirms (at once when offline). */
  leave(room) {
    const r = this.rooms.get(room);
    if (!r) return Promise.resolve();
    this.rooms.delete(room);
    this.dirty = true;
    this.persist();
    const err = new CorralError(4404 /* NOT_JOINED */, "left the room", room);
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
      this.leaving.set(room, { sent: false, waiters: [] });
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
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
  publish(room, payload, opts = {}) {
    const id = opts.id ?? `${this.idPrefix}-${++this.nextId}`;
    if (this.st === "closed") return Promise.reject(new CorralError(1e3, "client closed", room, id));
    if (!this.rooms.has(room)) {
      return Promise.reject(new CorralError(4404 /* NOT_JOINED */, "join the room before publishing", room, id));
    }
    if (this.outbox.has(id)) return Promise.reject(new CorralError(4407 /* INVALID_ARGUMENT */, "publish id in use", room, id));
    const r = this.rooms.get(room);
    return new Promise((resolve, reject) => {
      const seq = ++r.pubSeq;
      const p = { room, id, payload, seq, sentSeq: 0, resolve, reject, sent: false, attempts: 0, timer: void 0, answerTimer: void 0 };
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
  signal(room, key, payload) {
    this.setSignal(room, key, payload, false);
  }
  /** clearSignal removes a signal key: it disappears for everyone. */
  clearSignal(room, key) {
    this.setSignal(room, key, void 0, true);
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
  call(method, payload) {
    if (this.st !== "open") {
      return Promise.reject(new CorralError(4103 /* UNAVAILABLE */, "not connected: call again once open", "", "", 1e3));
    }
    const id = ++this.callId;
    return new Promise((resolve, reject) => {
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
  room(name) {
    let r = this.handles.get(name);
    if (!r) {
      r = new Room(name, {
        append: (room, id, data, opts) => this.appendTo(room, id, data, opts),
        setState: (room, key, value, opts) => this.writeState(room, key, opts, value),
        deleteState: (room, key, opts) => this.writeState(room, key, opts)
      });
      this.handles.set(name, r);
    }
    return r;
  }
  appendTo(room, id, data, opts) {
    if (this.st !== "open") {
      return Promise.reject(new CorralError(4103 /* UNAVAILABLE */, "not connected: append again once open", room, id, 1e3));
    }
    if (!id) return Promise.reject(new CorralError(4407 /* INVALID_ARGUMENT */, "append needs an id", room));
    const key = `${room}\0${id}`;
    const bytes = typeof data === "string" ? utf8(data) : data;
    return new Promise((resolve, reject) => {
      const q = this.appendWaits.get(key);
      if (q) q.push({ resolve, reject });
      else this.appendWaits.set(key, [{ resolve, reject }]);
      this.send({ append: { room, id, data: bytes, replace: opts.replace ?? false, final: opts.final ?? false, version: opts.version ?? 0 } });
    });
  }
  writeState(room, key, opts, value) {
    if (this.st !== "open") {
      return Promise.reject(new CorralError(4103 /* UNAVAILABLE */, "not connected: write the state again once open", room, "", 1e3));
    }
    const ref = `~state:${++this.stateRef}`;
    const cas = opts.cas !== void 0;
    const version = opts.cas ?? 0;
    return new Promise((resolve, reject) => {
      this.stateWaits.set(ref, { resolve, reject });
      if (value === void 0) this.send({ deleteState: { room, key, cas, version, ref } });
      else this.send({ setState: { room, key, value, cas, version, ttlMs: opts.ttlMs ?? 0, ref } });
    });
  }
  /** ping sends a Ping now (the client also pings by itself when idle). */
  ping() {
    if (this.st === "open") this.send({ ping: { id: ++this.pingId } });
  }
  // ---- connection ----
  async open() {
    const gen = ++this.gen;
    let token = "";
    try {
      const get = this.tokenProvider();
      token = get ? await get() : this.options.token ?? "";
    } catch (err) {
      if (gen === this.gen) this.lost(gen, 1006, `token: ${err.message}`);
      return;
    }
    if (gen !== this.gen) return;
    const name = this.picker.current();
    let ws;
    try {
      ws = this.dial(name);
    } catch (err) {
      this.stop(new CorralError(4400 /* BAD_FRAME */, `connect: ${err.message}`));
      return;
    }
    this.ws = ws;
    this.tp = name;
    const timeout = this.picker.hasNext() ? Math.min(this.transportTimeoutMs, this.opts.connectTimeoutMs) : this.opts.connectTimeoutMs;
    this.connectTimer = setTimeout(() => this.lost(gen, 1006, `no welcome within ${timeout} ms over ${name}`), timeout);
    ws.onopen = () => {
      if (gen !== this.gen) return;
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
          ...this.statePosition(room)
        }))
      };
      this.resumeRooms = new Set(resume ? this.rooms.keys() : []);
      this.send({ hello: { token, client: this.options.clientName ?? CLIENT_NAME, resume: resume || void 0 } });
    };
    ws.onmessage = (ev) => {
      if (gen !== this.gen) return;
      this.lastReceived = now();
      if (typeof ev.data !== "string") return;
      let frames;
      try {
        frames = decodeServer(ev.data);
      } catch (err) {
        this.emit("error", new CorralError(4400 /* BAD_FRAME */, err.message));
        return;
      }
      for (const f of frames) {
        if (gen !== this.gen) break;
        this.handle(f);
      }
      this.persist();
    };
    ws.onclose = (ev) => this.lost(gen, ev.code, ev.reason);
    ws.onerror = () => {
    };
  }
  /** dial opens a connection over the named transport. */
  dial(name) {
    switch (name) {
      case "websocket":
        return new this.WS(this.options.url, SUBPROTOCOL);
      case "sse":
        return new SSEConn(this.httpUrl, this.ES, this.fetchFn, this.random);
      case "stream":
        return new StreamConn(this.httpUrl, this.fetchFn, this.random);
    }
  }
  /** lost handles the end of socket gen: reconnect, or stop. */
  lost(gen, closeCode, closeReason) {
    if (gen !== this.gen || this.st === "closed") return;
    const hint = this.hint;
    const refusal2 = this.refusal?.code === closeCode ? this.refusal : null;
    const wasOpen = this.st === "open";
    const ws = this.ws;
    const welcomed = this.welcomeFrame !== null;
    this.detach();
    ws?.close();
    const code = hint?.code || closeCode;
    const reason = hint?.reason || refusal2?.message || closeReason;
    if (wasOpen && now() - this.openedAt >= this.opts.stableMs) this.backoff.reset();
    if (ws && !welcomed && !hint && !refusal2 && closeCode < 4e3) {
      if (this.tp) this.failed.push({ transport: this.tp, code: closeCode, reason: closeReason });
      if (this.picker.next()) {
        this.tp = this.picker.current();
        void this.open();
        return;
      }
    } else {
      this.picker.endRound();
    }
    this.failed = [];
    this.tp = "";
    if (code === 4102 /* SESSION_EXPIRED */ || code === 4402 /* RESUME_REFUSED */ && this.session) {
      this.session = null;
      this.dirty = true;
      this.persist();
    } else if (adviceOf(code) === "stop" || code === 4004 /* SESSION_TAKEN_OVER */) {
      this.stop(new CorralError(code, reason || `closed with ${code}`), refusal2 !== null);
      return;
    }
    const delayMs = this.backoff.next(hint?.delayMs);
    this.setState("reconnecting", { code, reason, delayMs });
    this.retryTimer = setTimeout(() => {
      this.retryTimer = void 0;
      void this.open();
    }, delayMs);
  }
  /** tokenProvider is getToken, or token when it is a function. */
  tokenProvider() {
    const t = this.options.token;
    return this.options.getToken ?? (typeof t === "function" ? t : void 0);
  }
  /** scheduleRefresh plans the refresh of a token expiring at expiresUnix:
   * when a quarter of the time left remains, at most a minute ahead. */
  scheduleRefresh(expiresUnix) {
    clearTimeout(this.refreshTimer);
    this.refreshTimer = void 0;
    this.expiresUnix = expiresUnix;
    if (expiresUnix <= 0 || !this.tokenProvider()) return;
    const left = expiresUnix * 1e3 - Date.now();
    this.refreshIn(left - Math.min(left / 4, 6e4));
  }
  refreshIn(ms) {
    const gen = this.gen;
    this.refreshTimer = setTimeout(() => {
      this.refreshTimer = void 0;
      if (gen === this.gen) void this.refresh(gen);
    }, Math.max(0, ms));
  }
  /** refresh sends a fresh token on the open connection. */
  async refresh(gen) {
    const get = this.tokenProvider();
    if (!get) return;
    let token;
    try {
      token = await get();
    } catch (err) {
      if (gen !== this.gen) return;
      this.emit("error", new CorralError(4401 /* UNAUTHENTICATED */, `token: ${err.message}`));
      this.refreshFailed();
      return;
    }
    if (gen !== this.gen || this.st !== "open") return;
    this.refreshing = true;
    this.send({ refresh: { token } });
  }
  /** refreshFailed tries again halfway to the expiry; past it the server
   * closes the connection and the reconnect fetches a new token. */
  refreshFailed() {
    this.refreshing = false;
    const left = this.expiresUnix * 1e3 - Date.now();
    if (left > 1e3) this.refreshIn(left / 2);
  }
  /** detach forgets the current socket: its events are ignored from now on. */
  detach() {
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
    this.connectTimer = this.retryTimer = this.heartbeatTimer = this.ackTimer = this.refreshTimer = void 0;
    this.refreshing = false;
    this.rejectCalls(new CorralError(4103 /* UNAVAILABLE */, "connection lost before the call was answered", "", "", 1e3));
    for (const l of this.leaving.values()) l.sent = false;
    for (const r of this.rooms.values()) r.ready = r.joining = false;
    for (const p of this.outbox.values()) {
      p.sent = false;
      clearTimeout(p.timer);
      clearTimeout(p.answerTimer);
      p.timer = p.answerTimer = void 0;
    }
  }
  /** stop ends for good: everything pending rejects with err, which is
   * emitted as "error" unless it was already (emitted). */
  stop(err, emitted = false) {
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
    if (err.code !== 1e3 && !emitted) this.emit("error", err);
  }
  rejectCalls(err) {
    const calls = [...this.calls.values(), ...this.stateWaits.values(), ...[...this.appendWaits.values()].flat()];
    this.calls.clear();
    this.stateWaits.clear();
    this.appendWaits.clear();
    for (const w of calls) w.reject(err);
  }
  setState(state, extra = {}) {
    const previous = this.st;
    this.st = state;
    this.emit("state", { state, previous, ...extra });
  }
  send(frame) {
    if (!this.ws) return;
    this.ws.send(encodeClient(frame));
    this.lastSent = now();
  }
  // ---- frames from the server ----
  handle(f) {
    switch (f.case) {
      case "welcome":
        if (this.welcomeFrame && f.value.sessionId === this.session?.sessionId) {
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
  onWelcome(w) {
    clearTimeout(this.connectTimer);
    this.connectTimer = void 0;
    this.welcomeFrame = w;
    this.session = { sessionId: w.sessionId, resumeToken: w.resumeToken, userId: w.userId };
    this.dirty = true;
    this.openedAt = this.lastReceived = now();
    this.heartbeatMs = w.heartbeatMs > 0 ? w.heartbeatMs : 25e3;
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
    if (!w.resumed) {
      for (const l of this.leaving.values()) for (const x of l.waiters) x.resolve();
      this.leaving.clear();
    }
    for (const [room, r] of this.rooms) {
      if (w.resumed && this.resumeRooms.has(room)) r.joining = true;
      else this.sendJoin(room, r);
    }
  }
  sendJoin(room, r) {
    r.joining = true;
    this.send({
      join: {
        room,
        sinceSeq: r.seq,
        epoch: r.epoch,
        presence: r.presence ?? false,
        presenceState: r.state,
        fromPosition: r.epoch !== "",
        openPrefix: r.noBodies ?? false,
        ...this.statePosition(room)
      }
    });
  }
  // statePosition is where the room's keyed-state view is (docs/STATE.md),
  // sent with a resume or rejoin so that the server sends only the changes
  // after it (or a snapshot when they are no longer kept).
  statePosition(room) {
    const st = this.handles.get(room)?.state;
    return st?.ready ? { statePosition: st.position, stateEpoch: st.epoch } : {};
  }
  onJoined(j) {
    let r = this.rooms.get(j.room);
    if (!r) {
      const l = this.leaving.get(j.room);
      if (l) {
        if (!l.sent) this.send({ leave: { room: j.room } });
        l.sent = true;
        return;
      }
      r = newRoom(0, "");
      this.rooms.set(j.room, r);
    }
    r.ready = true;
    r.noBodies = false;
    r.joining = false;
    r.seq = j.seq;
    r.epoch = j.epoch;
    r.acked = Math.min(r.acked, j.seq);
    this.dirty = true;
    for (const w of r.waiters.splice(0)) w.resolve(j);
    this.emit("joined", j);
    this.pump(j.room);
    for (const s of this.signals.values()) {
      if (s.room === j.room) {
        s.dirty = true;
        this.pumpSignal(s);
      }
    }
  }
  onLeft(l) {
    const waiters = this.leaving.get(l.room)?.waiters;
    this.leaving.delete(l.room);
    for (const w of waiters ?? []) w.resolve();
    const r = this.rooms.get(l.room);
    if (r && !waiters && r.joining && !r.ready && adviceOf(l.code) === "retry") {
      this.askAgain(0, () => this.rooms.get(l.room) === r && !r.ready, () => this.sendJoin(l.room, r));
      return;
    }
    if (r) {
      this.rooms.delete(l.room);
      this.dirty = true;
      const err = new CorralError(l.code || 4404 /* NOT_JOINED */, l.reason || "removed from the room", l.room);
      for (const w of r.waiters) w.reject(err);
      for (const p of [...this.outbox.values()]) if (p.room === l.room) this.settle(p, err);
    }
    if (waiters || r) this.emit("left", l);
  }
  onMessage(m) {
    const r = this.rooms.get(m.room);
    if (r && m.chunk) this.room(m.room).onChunk(m);
    if (!r || m.seq <= r.seq) return;
    r.seq = m.seq;
    this.dirty = true;
    this.scheduleAck();
    this.emit("message", m);
  }
  onReset(x) {
    const r = this.rooms.get(x.room);
    if (!r) return;
    r.seq = x.seq;
    r.epoch = x.epoch;
    r.acked = 0;
    this.dirty = true;
    this.emit("reset", x);
  }
  /** nextAppend takes the oldest unanswered append of id in room. */
  nextAppend(room, id) {
    const key = `${room}\0${id}`;
    const q = this.appendWaits.get(key);
    const w = q?.shift();
    if (q && q.length === 0) this.appendWaits.delete(key);
    return w;
  }
  onPublished(p) {
    const a = this.outbox.has(p.id) ? void 0 : this.nextAppend(p.room, p.id);
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
  onError(e) {
    const err = CorralError.from(e);
    const kind = e.frame ?? "";
    const is = (...kinds) => kind === "" || kinds.includes(kind);
    const sw = e.ref && is("setState", "deleteState") ? this.stateWaits.get(e.ref) : void 0;
    if (sw) {
      this.stateWaits.delete(e.ref);
      return sw.reject(err);
    }
    const aw = e.ref && (kind === "append" || kind === "" && !this.outbox.has(e.ref)) ? this.nextAppend(e.room, e.ref) : void 0;
    if (aw) return aw.reject(err);
    const p = e.ref && is("publish") ? this.outbox.get(e.ref) : void 0;
    if (p) {
      p.sent = false;
      clearTimeout(p.answerTimer);
      p.answerTimer = void 0;
      if (e.code === 4106 /* OUT_OF_ORDER */ && (!this.isHead(p) || p.sentSeq !== p.seq)) {
        p.attempts--;
        this.pump(p.room);
        return;
      }
      if (err.advice === "retry" && p.attempts <= this.opts.publishRetries) {
        const wait = Math.max(e.retryAfterMs, Math.round(this.random() * 250 * 2 ** p.attempts));
        p.timer = setTimeout(() => {
          p.timer = void 0;
          this.pump(p.room);
        }, wait);
        return;
      }
      this.settle(p, err);
      return;
    }
    if (this.refreshing && (kind === "refresh" || kind === "" && !e.room && !e.ref && (e.code === 4401 /* UNAUTHENTICATED */ || e.code === 4101 /* RATE_LIMITED */ || e.code === 4103 /* UNAVAILABLE */))) {
      this.refreshFailed();
      this.emit("error", err);
      return;
    }
    const l = e.room && is("leave") ? this.leaving.get(e.room) : void 0;
    if (l && e.code === 4404 /* NOT_JOINED */) {
      this.leaving.delete(e.room);
      for (const w of l.waiters) w.resolve();
      return;
    }
    if (l) {
      if (err.advice === "retry") {
        this.askAgain(
          e.retryAfterMs,
          () => this.st === "open" && this.leaving.get(e.room) === l,
          () => this.send({ leave: { room: e.room } })
        );
        return;
      }
      this.leaving.delete(e.room);
      for (const w of l.waiters) w.reject(err);
    }
    const r = e.room && is("join") ? this.rooms.get(e.room) : void 0;
    if (r && r.joining && !r.ready) {
      if (err.advice === "retry") {
        this.askAgain(e.retryAfterMs, () => this.rooms.get(e.room) === r && !r.ready, () => this.sendJoin(e.room, r));
        return;
      }
      this.rooms.delete(e.room);
      this.dirty = true;
      for (const w of r.waiters) w.reject(err);
      for (const p2 of [...this.outbox.values()]) if (p2.room === e.room) this.settle(p2, err);
    }
    this.emit("error", err);
  }
  /** askAgain sends a refused join or leave again after the refusal's
   * retry_after_ms (at least 500 ms), on the same connection, if still()
   * holds then; a new connection sends what is pending anyway. */
  askAgain(retryAfterMs, still, send) {
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
  pump(room) {
    const r = this.rooms.get(room);
    if (this.st !== "open" || !r?.ready) return;
    for (const p of this.outbox.values()) {
      if (p.room !== room) continue;
      if (p.timer || p.sent && !r.pubStarted) return;
      if (p.sent) continue;
      p.sent = true;
      p.attempts++;
      p.sentSeq = p.seq;
      const gen = this.gen;
      p.answerTimer = setTimeout(() => {
        p.answerTimer = void 0;
        if (gen !== this.gen || !p.sent) return;
        p.sent = false;
        this.pump(p.room);
      }, this.opts.publishTimeoutMs);
      this.send({ publish: { room: p.room, id: p.id, payload: p.payload, seq: p.seq } });
      if (!r.pubStarted) return;
    }
  }
  /** isHead: no publish made before p to its room is unresolved. */
  isHead(p) {
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
  settle(p, err) {
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
  setSignal(room, key, payload, clear) {
    if (this.st === "closed" || !this.rooms.has(room)) return;
    const k = `${room}
${key}`;
    let s = this.signals.get(k);
    if (!s) {
      if (clear) {
        if (this.st === "open" && this.rooms.get(room)?.ready) this.send({ signal: { room, key, clear: true } });
        return;
      }
      s = { room, key, payload, clear, dirty: true, lastSent: -Infinity, timer: void 0 };
      this.signals.set(k, s);
    }
    s.payload = payload;
    s.clear = clear;
    s.dirty = true;
    this.pumpSignal(s);
  }
  pumpSignal(s) {
    if (!s.dirty || s.timer) return;
    if (this.st !== "open" || !this.rooms.get(s.room)?.ready) return;
    const wait = s.lastSent + this.opts.signalIntervalMs - now();
    if (wait > 0) {
      s.timer = setTimeout(() => {
        s.timer = void 0;
        this.pumpSignal(s);
      }, wait);
      return;
    }
    s.dirty = false;
    s.lastSent = now();
    if (s.clear) {
      this.signals.delete(`${s.room}
${s.key}`);
      this.send({ signal: { room: s.room, key: s.key, clear: true } });
    } else {
      this.send({ signal: { room: s.room, key: s.key, payload: s.payload } });
    }
  }
  scheduleAck() {
    if (this.opts.ackDelayMs <= 0 || this.ackTimer) return;
    this.ackTimer = setTimeout(() => {
      this.ackTimer = void 0;
      if (this.st !== "open") return;
      for (const [room, r] of this.rooms) {
        if (r.ready && r.seq > r.acked) {
          r.acked = r.seq;
          this.send({ ack: { room, seq: r.seq } });
        }
      }
    }, this.opts.ackDelayMs);
  }
  heartbeat(gen) {
    if (gen !== this.gen) return;
    const t = now();
    if (t - this.lastReceived > 2 * this.heartbeatMs) {
      this.lost(gen, 4003 /* HEARTBEAT_TIMEOUT */, "no frame from the server within two heartbeats");
      return;
    }
    if (t - this.lastSent >= this.heartbeatMs / 2) this.ping();
  }
  /** persist saves the session and room positions if they changed. */
  persist() {
    if (!this.dirty) return;
    this.dirty = false;
    const rooms = {};
    for (const [room, r] of this.rooms) rooms[room] = { seq: r.seq, epoch: r.epoch };
    saveState(this.storage, this.storageKey, { session: this.session, rooms });
  }
};
function newRoom(seq, epoch) {
  return { seq, epoch, ready: false, joining: false, waiters: [], acked: seq, pubSeq: 0, pubStarted: false };
}
export {
  Backoff,
  CLIENT_NAME,
  Client,
  Code,
  CodecError,
  CorralError,
  DeltaError,
  GapError,
  GrowingMessage,
  Room,
  RoomState,
  SUBPROTOCOL,
  TRANSPORTS,
  adviceOf,
  applyDelta,
  decodeServer,
  encodeClient
};
