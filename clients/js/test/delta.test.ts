import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";
import { DeltaError, applyDelta } from "../src/delta.js";

// deltas.json is written by the Go encoder (delta/fixture_test.go, which
// fails when it is stale): passing here means this decoder reads what the
// server sends.
interface Case {
  name: string;
  source: string;
  target: string;
  delta: string;
}
const cases = JSON.parse(
  readFileSync(new URL("../../test/golden/deltas.json", import.meta.url), "utf8"),
) as Case[];

const bytes = (b64: string) => Uint8Array.from(Buffer.from(b64, "base64"));
const text = (s: string) => new TextEncoder().encode(s);

describe("applyDelta", () => {
  test("decodes every Go-encoded delta of the fixture", () => {
    assert.ok(cases.length >= 10);
    for (const c of cases) {
      const got = applyDelta(bytes(c.source), bytes(c.delta));
      assert.deepEqual(Buffer.from(got), Buffer.from(bytes(c.target)), c.name);
    }
  });

  test("refuses malformed deltas with DeltaError", () => {
    const src = text("0123456789abcdefghijklmnopqrstuvwxyz");
    for (const d of [
      "", "5", "5\n5:hello", "5\n5@40,", "5\n9:hello", "3\n5:hello0;",
      "5\n5:hello0;", "5\n5!hello", "zzzzzzzzzz\n", "~~~~~\n",
    ]) {
      assert.throws(() => applyDelta(src, text(d), 1 << 16), DeltaError, JSON.stringify(d));
    }
  });

  // A small fuzzer: mutations of valid deltas either decode or throw
  // DeltaError (never another error), within the bound.
  test("mutated deltas throw only DeltaError", () => {
    let seed = 42;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    for (let round = 0; round < 3000; round++) {
      const c = cases[rand(cases.length)]!;
      const d = Uint8Array.from(bytes(c.delta));
      if (d.length === 0) continue;
      for (let k = 0, m = 1 + rand(4); k < m; k++) d[rand(d.length)] = rand(256);
      try {
        const out = applyDelta(bytes(c.source), d, 1 << 16);
        assert.ok(out.length <= 1 << 16);
      } catch (e) {
        assert.ok(e instanceof DeltaError, String(e));
      }
    }
  });
});
