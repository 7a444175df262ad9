// Decoding of deltas: a value sent as a delta against the previous value
// a client holds (a growing message's replace, a keyed state's set) in
// Fossil's delta format. The Go side, encoder and decoder, is package
// delta; docs/DELTA.md describes the format.

/** DeltaError is thrown by applyDelta for a delta it cannot apply. */
export class DeltaError extends Error {
  constructor(message: string) {
    super(`delta: ${message}`);
    this.name = "DeltaError";
  }
}

const DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz~";
const VALUE = (() => {
  const v = new Int8Array(256).fill(-1);
  for (let i = 0; i < DIGITS.length; i++) v[DIGITS.charCodeAt(i)] = i;
  return v;
})();

/** The delta format's checksum of the target (four byte lanes, folded). */
function checksum(z: Uint8Array): number {
  let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  let i = 0;
  for (; z.length - i >= 4; i += 4) {
    s0 = (s0 + z[i]!) | 0;
    s1 = (s1 + z[i + 1]!) | 0;
    s2 = (s2 + z[i + 2]!) | 0;
    s3 = (s3 + z[i + 3]!) | 0;
  }
  s3 = (s3 + (s2 << 8) + (s1 << 16) + (s0 << 24)) | 0;
  const rest = z.length - i;
  if (rest >= 3) s3 = (s3 + (z[i + 2]! << 8)) | 0;
  if (rest >= 2) s3 = (s3 + (z[i + 1]! << 16)) | 0;
  if (rest >= 1) s3 = (s3 + (z[i]! << 24)) | 0;
  return s3 >>> 0;
}

/**
 * applyDelta returns the value that delta encodes against source. A target
 * longer than maxLength bytes is refused before it is built. Throws
 * DeltaError for a malformed delta, one that does not fit source, or a
 * checksum mismatch.
 */
export function applyDelta(source: Uint8Array, delta: Uint8Array, maxLength = 16 << 20): Uint8Array {
  let pos = 0;
  const int = (): number => {
    const start = pos;
    let v = 0;
    while (pos < delta.length) {
      const d = VALUE[delta[pos]!]!;
      if (d < 0) break;
      if (pos - start === 8) throw new DeltaError(`number too long at ${start}`);
      v = v * 64 + d; // at most 48 bits: exact in a double
      pos++;
    }
    if (pos === start) throw new DeltaError(`number expected at ${start}`);
    return v;
  };
  const expect = (c: string) => {
    if (pos >= delta.length || delta[pos] !== c.charCodeAt(0)) {
      throw new DeltaError(`${JSON.stringify(c)} expected at ${pos}`);
    }
    pos++;
  };

  const n = int();
  expect("\n");
  if (n > maxLength) throw new DeltaError(`target of ${n} bytes, more than ${maxLength}`);
  const out = new Uint8Array(n);
  let len = 0;
  while (pos < delta.length) {
    const cnt = int();
    if (pos >= delta.length) break;
    const op = String.fromCharCode(delta[pos++]!);
    if (op === "@") {
      const ofst = int();
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
