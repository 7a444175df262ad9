// The check of a sender's order in the browser SDK that order.test.mjs
// and fallback.test.mjs run through failures of their own.

import assert from "node:assert/strict";

/**
 * publishThrough runs a writer and a reader in the page against addr
 * while fail() runs, then checks what they saw: every publish
 * acknowledged, each at a seq above the one before it (the order made),
 * and the reader given exactly those messages in that order, once each.
 * opts are more Client options (transports: [...]). Resolves with the
 * transports the writer and the reader opened connections on, and how
 * many connections each opened.
 */
export async function publishThrough(page, addr, fail, opts = {}) {
  const total = 150;
  await page.evaluate(
    async ({ url, total, extra }) => {
      const { Client } = await import("/corral.js");
      const opts = { url, publishRetries: 1000, publishTimeoutMs: 3000, storage: null, transportStorage: null, ...extra };
      const reader = new Client({ ...opts, token: "reader" });
      const writer = new Client({ ...opts, token: "writer" });
      const got = [];
      const opened = { writer: [], reader: [] };
      reader.on("message", (m) => got.push({ seq: m.seq, id: m.id }));
      reader.on("state", (s) => s.state === "open" && opened.reader.push(s.transport));
      writer.on("state", (s) => s.state === "open" && opened.writer.push(s.transport));
      reader.connect();
      writer.connect();
      await reader.join("fifo");
      await writer.join("fifo");
      const results = [];
      window.orderRun = { got, results, opened, done: null };
      window.orderRun.done = (async () => {
        const pending = [];
        for (let i = 0; i < total; i++) {
          const id = `m${i}`;
          pending.push(
            writer.publish("fifo", { i }, { id }).then(
              (p) => (results[i] = { id, seq: p.seq }),
              (e) => (results[i] = { id, err: `${e.code} ${e.message}` }),
            ),
          );
          await new Promise((r) => setTimeout(r, 20));
        }
        await Promise.all(pending);
      })();
    },
    { url: `ws://${addr}/ws`, total, extra: opts },
  );
  await fail();
  await page.evaluate(() => window.orderRun.done);
  const results = await page.evaluate(() => window.orderRun.results);
  const failed = results.filter((r) => r.err);
  assert.deepEqual(failed, [], "publishes refused for good");
  for (let i = 1; i < results.length; i++) {
    assert.ok(
      results[i].seq > results[i - 1].seq,
      `${results[i].id} stored at seq ${results[i].seq}, not after ${results[i - 1].id} at ${results[i - 1].seq}: sender order broken`,
    );
  }
  await page.waitForFunction((n) => window.orderRun.got.length >= n, total, { timeout: 30_000, polling: 100 });
  const got = await page.evaluate(() => window.orderRun.got);
  assert.deepEqual(
    got.map((m) => m.id),
    results.map((r) => r.id),
    "the reader's messages are the publishes, once each, in the order made",
  );
  assert.deepEqual(
    got.map((m) => m.seq),
    results.map((r) => r.seq),
  );
  return page.evaluate(() => window.orderRun.opened);
}
