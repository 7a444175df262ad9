// Payloads as bytes: growing messages and state values are opaque bytes on
// the server; the decoder hands them over as inline JSON or as bytes.

import type { Payload } from "./wire.js";

const enc = new TextEncoder();
const dec = new TextDecoder();

/** toBytes is the bytes a payload stands for: bytes as they are, an inline
 * JSON value as its JSON text, none as empty. */
export function toBytes(p: Payload | undefined): Uint8Array {
  if (p === undefined || p === null) return new Uint8Array(0);
  if (p instanceof Uint8Array) return p;
  return enc.encode(JSON.stringify(p));
}

export function utf8(s: string): Uint8Array {
  return enc.encode(s);
}

export function text(b: Uint8Array): string {
  return dec.decode(b);
}

export function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}
