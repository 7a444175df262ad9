import assert from "node:assert/strict";
import { test } from "node:test";
import { Backoff } from "../src/backoff.js";
import { seq } from "./fakes.js";

test("the first retry is immediate plus a small jitter", () => {
  assert.equal(new Backoff({}, () => 0).next(), 0);
  const d = new Backoff({ firstJitterMs: 250 }, () => 0.999).next();
  assert.ok(d <= 250, `${d}`);
});

test("later retries use full jitter below an exponential bound", () => {
  const opts = { baseMs: 500, capMs: 30_000, firstJitterMs: 250 };
  // random() near 1 shows the bound of each attempt.
  const top = new Backoff(opts, () => 1 - 1e-12);
  const bounds = Array.from({ length: 10 }, () => top.next());
  assert.deepEqual(bounds, [250, 500, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000]);
  // random() at 0 gives 0: the whole range below the bound is used.
  const low = new Backoff(opts, () => 0);
  for (let i = 0; i < 10; i++) assert.equal(low.next(), 0);
});

test("delays stay jittered at the cap", () => {
  const b = new Backoff({ baseMs: 100, capMs: 1000 }, Math.random);
  for (let i = 0; i < 10; i++) b.next();
  const seen = Array.from({ length: 400 }, () => b.next());
  assert.ok(seen.every((d) => d >= 0 && d <= 1000));
  assert.ok(Math.min(...seen) < 250 && Math.max(...seen) > 750, "spread over [0, cap]");
  assert.ok(new Set(seen).size > 100, "not one fixed value");
});

test("a server hint is a floor with a little jitter on top", () => {
  const b = new Backoff({ hintJitterMs: 250 }, seq(0.5, 0.5));
  assert.equal(b.next(2000), 2125); // hint + 0.5 * 250; backoff 125 is lower
  const late = new Backoff({ baseMs: 500, capMs: 30_000 }, () => 1 - 1e-12);
  for (let i = 0; i < 8; i++) late.next();
  assert.equal(late.next(100), 30_000, "a small hint does not undercut the backoff");
  assert.equal(new Backoff({}, () => 0).next(0), 0, "a zero hint is no hint");
});

test("reset starts over", () => {
  const b = new Backoff({}, () => 0.9999);
  b.next();
  b.next();
  assert.equal(b.attempts, 2);
  b.reset();
  assert.equal(b.attempts, 0);
  assert.ok(b.next() <= 250);
});
