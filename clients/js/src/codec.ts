// The corral.v1.json codec: the same bytes as the Go server's encoder
// (protocol/client_json.pb.go) for client frames, and a decoder for
// everything the server sends. Fields appear in the order the generated
// tables give; zero values are omitted; a payload is inline JSON, or
// "payloadBase64" when it is bytes.

import {
  clientKinds,
  type FieldSpec,
  type MessageName,
  messageFields,
  serverKinds,
} from "./gen/corral/v1/client_json.js";
import { Code } from "./gen/corral/v1/codes_pb.js";
import type {
  ClientFrameJSON,
  JsonValue,
  Payload,
  ServerFrame,
  ServerKinds,
} from "./wire.js";

/** CodecError reports a frame that could not be encoded or decoded. */
export class CodecError extends Error {
  override name = "CodecError";
}

// The field tables come from client.proto through protoc-gen-corral-json
// (gen/corral/v1/client_json.ts), as the Go codec's functions do: fields in
// the order the Go encoder writes them, each with its type.
type Fields = Readonly<Record<string, FieldSpec>>;

function fieldsOf(name: MessageName): Fields {
  const f = (messageFields as Readonly<Record<string, Fields>>)[name];
  if (!f) throw new CodecError(`${name}: a frame inside a message`); // batch is read apart
  return f;
}

/** encodeClient writes one client frame as a corral.v1.json text message. */
export function encodeClient(frame: ClientFrameJSON): string {
  const kinds = Object.keys(frame);
  if (kinds.length !== 1 || !(kinds[0]! in clientKinds)) {
    throw new CodecError(`encode: want one client frame kind, got ${JSON.stringify(kinds)}`);
  }
  const kind = kinds[0] as keyof typeof clientKinds;
  const body = (frame as Record<string, Record<string, unknown> | undefined>)[kind] ?? {};
  return `{${quote(kind)}:${encodeObject(clientKinds[kind], body, kind)}}`;
}

function encodeObject(name: MessageName, v: Record<string, unknown>, path: string): string {
  const spec = fieldsOf(name);
  const out: string[] = [];
  for (const key in spec) {
    const x = v[key];
    const at = `${path}.${key}`;
    const t = spec[key]!;
    if (typeof t === "object") {
      if (t.list) {
        const list = x as Record<string, unknown>[] | undefined;
        if (list && list.length > 0) {
          out.push(`"${key}":[${list.map((e, i) => encodeObject(t.message, e, `${at}[${i}]`)).join(",")}]`);
        }
      } else if (x) {
        out.push(`"${key}":${encodeObject(t.message, x as Record<string, unknown>, at)}`);
      }
      continue;
    }
    switch (t) {
      case "string":
        if (x !== undefined && x !== "") out.push(`"${key}":${quote(str(x, at))}`);
        break;
      case "number":
      case "code":
        if (x !== undefined && x !== 0) out.push(`"${key}":${int(x, at)}`);
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
        const list = x as unknown[] | undefined;
        if (list && list.length > 0) {
          out.push(`"${key}":[${list.map((e, i) => quote(str(e, `${at}[${i}]`))).join(",")}]`);
        }
        break;
      }
    }
  }
  return `{${out.join(",")}}`;
}

// A payload (or a presence state) goes inline as JSON; bytes go as
// <key>Base64. undefined, null and empty bytes mean none, as on the server.
function encodePayload(x: unknown, path: string, key: string): string {
  if (x === undefined || x === null) return "";
  if (x instanceof Uint8Array) {
    return x.length === 0 ? "" : `"${key}Base64":"${toBase64(x)}"`;
  }
  const json = JSON.stringify(x);
  if (json === undefined) throw new CodecError(`encode: ${path}: not a JSON value`);
  return `"${key}":${escapeLineSeparators(json)}`;
}

function str(x: unknown, path: string): string {
  if (typeof x !== "string") throw new CodecError(`encode: ${path}: want a string`);
  return x;
}

function int(x: unknown, path: string): string {
  if (typeof x !== "number" || !Number.isSafeInteger(x) || x < 0) {
    throw new CodecError(`encode: ${path}: want a non-negative integer`);
  }
  return String(x);
}

// JSON.stringify escapes what the Go encoder escapes except U+2028 and
// U+2029, which Go escapes so that its output is also valid JavaScript.
function quote(s: string): string {
  return escapeLineSeparators(JSON.stringify(s));
}

function escapeLineSeparators(s: string): string {
  return s.replace(/[\u2028\u2029]/g, (c) => (c === "\u2028" ? "\\u2028" : "\\u2029"));
}

/**
 * decodeServer reads one server text message into its frames, in order: a
 * batch is flattened, and frames of kinds this SDK does not know (from a
 * newer server) are skipped. Every field of a decoded frame is present,
 * zero when the server omitted it. It throws CodecError on malformed input.
 */
export function decodeServer(text: string): ServerFrame[] {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new CodecError(`decode: not JSON: ${(e as Error).message}`);
  }
  const out: ServerFrame[] = [];
  decodeInto(v, out, "");
  return out;
}

function decodeInto(v: unknown, out: ServerFrame[], path: string): void {
  if (!isObject(v)) throw new CodecError(`decode: ${path || "frame"}: want an object`);
  let kind = "";
  for (const k in v) {
    if (k in serverKinds) {
      if (kind) throw new CodecError(`decode: ${path || "frame"}: more than one kind (${kind}, ${k})`);
      kind = k;
    }
  }
  if (!kind) return; // a kind from a newer server
  const body = v[kind];
  if (kind === "batch") {
    if (body === null) return;
    if (!isObject(body)) throw new CodecError(`decode: ${path}batch: want an object`);
    const frames = body["frames"] ?? [];
    if (!Array.isArray(frames)) throw new CodecError(`decode: ${path}batch.frames: want an array`);
    frames.forEach((f, i) => decodeInto(f, out, `${path}batch.frames[${i}].`));
    return;
  }
  const k = kind as keyof ServerKinds;
  out.push({ case: k, value: decodeObject(serverKinds[k], body, path + kind) } as ServerFrame);
}

function decodeObject(name: MessageName, body: unknown, path: string): Record<string, unknown> {
  if (body !== null && !isObject(body)) throw new CodecError(`decode: ${path}: want an object`);
  const src: Record<string, unknown> = {};
  if (body) {
    // Decoders accept the proto field names too, as protojson does.
    for (const k in body) src[k.includes("_") ? camel(k) : k] = body[k];
  }
  const spec = fieldsOf(name);
  const out: Record<string, unknown> = {};
  for (const key in spec) {
    const x = src[key];
    const at = `${path}.${key}`;
    const t = spec[key]!;
    if (typeof t === "object") {
      if (t.list) {
        out[key] = decodeList(x, at).map((m, i) => decodeObject(t.message, m, `${at}[${i}]`));
      } else {
        out[key] = x === undefined || x === null ? undefined : decodeObject(t.message, x, at);
      }
      continue;
    }
    switch (t) {
      case "string":
        if (x !== undefined && x !== null && typeof x !== "string") {
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
        if (x !== undefined && x !== null && typeof x !== "boolean") {
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

function decodeList(x: unknown, path: string): unknown[] {
  if (x === undefined || x === null) return [];
  if (!Array.isArray(x)) throw new CodecError(`decode: ${path}: want an array`);
  return x;
}

// Numbers are JSON numbers; numeric strings are accepted as protojson
// writes them.
function decodeNumber(x: unknown, path: string): number {
  if (x === undefined || x === null) return 0;
  const n = typeof x === "string" && x.trim() !== "" ? Number(x) : x;
  if (typeof n !== "number" || !Number.isInteger(n)) {
    throw new CodecError(`decode: ${path}: want an integer`);
  }
  return n;
}

function decodeCode(x: unknown, path: string): Code {
  if (typeof x === "string" && x.startsWith("CODE_")) {
    const n = (Code as unknown as Record<string, number | undefined>)[x.slice(5)];
    if (n !== undefined) return n;
  }
  return decodeNumber(x, path);
}

function decodePayload(inline: unknown, b64: unknown, path: string): Payload | undefined {
  if (inline !== undefined && inline !== null) return inline as JsonValue;
  if (typeof b64 === "string" && b64 !== "") {
    try {
      return fromBase64(b64);
    } catch {
      throw new CodecError(`decode: ${path}Base64: not base64`);
    }
  }
  return undefined;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function camel(s: string): string {
  return s.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

function toBase64(b: Uint8Array): string {
  let s = "";
  for (let i = 0; i < b.length; i++) s += String.fromCharCode(b[i]!);
  return btoa(s);
}

function fromBase64(s: string): Uint8Array {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
