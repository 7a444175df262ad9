// The demo page and the browser SDK in headless Chromium when WebSockets
// cannot get through (issue 38): every page reaches a real `corral serve
// --insecure-dev` through an HTTP proxy that answers each WebSocket
// upgrade 403, as some corporate proxies and antivirus do. The SDK falls
// back by itself, to SSE (alice, the default order) or to HTTP streaming
// (bob: ?transport=websocket,stream); both see who is here, each other's
// cursors (signals) and one chat in one order; a cut stream resumes the
// session with nothing lost or twice; a reload goes straight to the
// transport that worked; a session on a WebSocket resumes over SSE when
// the network starts refusing upgrades; a held upgrade gives way after
// transportTimeoutMs; presence (join with presence) over SSE and
// streaming, close() leaving at once. Then the order check of order.test.mjs runs over
// each fallback while the proxy cuts every stream, three times (after
// 35, 70 and 105 of its 150 publishes are answered). The same
// again behind a private nginx in its plainest setup (buffering on, no
// Upgrade forwarded), with the cuts made between nginx and corral.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { publishThrough } from "./ordercheck.mjs";
import {
  buildCorral,
  launchBrowser,
  newPerson,
  removeDir,
  saveArtifact,
  startCorral,
  startCorralWith,
  startHttpProxy,
  startNginx,
  tempDir,
} from "./harness.mjs";
import { assertGapless, chat, moveOnBoard, say, waitChat, waitCursor } from "./demopage.mjs";

const WAIT = { timeout: 15_000 };
// acked waits until the order check's writer has n publishes answered:
// the cuts come at points of progress, not after sleeps.
const acked = (page, n) =>
  page.waitForFunction((n) => window.orderRun?.results.filter(Boolean).length >= n, n, { timeout: 30_000, polling: 20 });

describe("with WebSockets blocked, in Chromium", { timeout: 300_000 }, () => {
  let dir, bin, corral, proxyA, proxyB, browser, alice, bob;
  const pageErrors = [];

  before(async () => {
    dir = await tempDir("corral-e2e-fallback-");
    bin = await buildCorral(dir);
    // A drop's presence grace far longer than any wait here: a member who
    // leaves within a wait left by a normal close.
    corral = await startCorralWith(bin, ["serve", "--insecure-dev", "--addr", "127.0.0.1:0"], { CORRAL_PRESENCE_GRACE: "10m" });
    // One proxy each, so that bob's streams can be cut alone.
    proxyA = await startHttpProxy(corral.addr);
    proxyB = await startHttpProxy(corral.addr);
    browser = await launchBrowser();
    alice = await openPage(`${proxyA.url}?name=alice`);
    bob = await openPage(`${proxyB.url}?name=bob&transport=websocket,stream`);
  });

  after(async () => {
    await browser?.close();
    await proxyA?.stop();
    await proxyB?.stop();
    await corral?.stop();
    if (corral) await saveArtifact("fallback.log", corral.logs.join("\n") + "\n");
    await removeDir(dir);
  });

  async function openPage(url) {
    const page = await newPerson(browser, url);
    page.on("pageerror", (e) => pageErrors.push(`${url}: ${e.message}`));
    return page;
  }

  test("each page falls back by itself and sees who is here", async () => {
    await alice.waitForSelector('#status[data-state="open"][data-transport="sse"]', WAIT);
    await bob.waitForSelector('#status[data-state="open"][data-transport="stream"]', WAIT);
    assert.equal(await alice.evaluate(() => window.corral.transport), "sse");
    assert.equal(await bob.evaluate(() => window.corral.transport), "stream");
    assert.ok(proxyA.upgrades >= 1 && proxyB.upgrades >= 1, "each tried a WebSocket first");
    for (const page of [alice, bob]) {
      await page.waitForSelector('#people li[data-user="alice"]', WAIT);
      await page.waitForSelector('#people li[data-user="bob"]', WAIT);
      await page.getByText("did not get through").first().waitFor(WAIT);
    }
  });

  test("each page sees the other's cursor live", async () => {
    await moveOnBoard(bob, 0.3, 0.4);
    await waitCursor(alice, "bob", 0.3, 0.4);
    await moveOnBoard(bob, 0.7, 0.6);
    await waitCursor(alice, "bob", 0.7, 0.6);
    await moveOnBoard(alice, 0.2, 0.8);
    await waitCursor(bob, "alice", 0.2, 0.8);
  });

  test("both pages see the same chat in the same order", async () => {
    const lines = [
      ["alice", "over SSE here"],
      ["bob", "and I stream"],
      ["alice", "one"],
      ["bob", "two"],
      ["alice", "three"],
      ["bob", "four"],
    ];
    await Promise.all(
      ["alice", "bob"].map(async (who) => {
        const page = who === "alice" ? alice : bob;
        for (const [from, text] of lines) if (from === who) await say(page, text);
      }),
    );
    const a = await waitChat(alice, lines.length);
    const b = await waitChat(bob, lines.length);
    assert.deepEqual(b, a);
    assertGapless(a);
    assert.deepEqual(
      a.map((m) => `${m.sender}: ${m.text}`).sort(),
      lines.map(([s, t]) => `${s}: ${t}`).sort(),
    );
  });

  test("a cut stream resumes the session without losing chat sent meanwhile", async () => {
    const session = await bob.evaluate(() => window.corral.sessionId);
    const before = (await chat(alice)).length;
    proxyB.hold();
    assert.ok(proxyB.cut() >= 1, "bob had a stream to cut");
    await bob.waitForSelector('#status[data-state="reconnecting"]', WAIT);
    const missed = ["bob, are you there?", "sent while your stream was down", "nothing should be lost"];
    for (const text of missed) await say(alice, text);
    await waitChat(alice, before + missed.length);
    await say(bob, "back, my stream dropped"); // queued while offline
    proxyB.release();
    await bob.waitForSelector('#status[data-state="open"]', WAIT);
    const a = await waitChat(alice, before + missed.length + 1);
    const b = await waitChat(bob, before + missed.length + 1);
    assert.deepEqual(b, a);
    assertGapless(b);
    assert.deepEqual(b.slice(before, before + missed.length).map((m) => m.text), missed);
    assert.equal(b.at(-1).text, "back, my stream dropped");
    assert.equal(await bob.locator("#outbox li").count(), 0, "nothing left unsent");
    assert.equal(await bob.evaluate(() => window.corral.sessionId), session, "the same session");
    assert.equal(await bob.evaluate(() => window.corral.welcome?.resumed), true);
    assert.equal(await bob.evaluate(() => window.corral.transport), "stream");
    await alice.waitForSelector('#people li[data-user="bob"]', WAIT);
    await moveOnBoard(bob, 0.55, 0.35);
    await waitCursor(alice, "bob", 0.55, 0.35);
  });

  test("a reload goes straight to the transport that worked, and resumes", async () => {
    const session = await alice.evaluate(() => window.corral.sessionId);
    const upgrades = proxyA.upgrades;
    const want = await chat(bob);
    await alice.reload();
    await alice.waitForSelector('#status[data-state="open"][data-transport="sse"]', WAIT);
    assert.equal(proxyA.upgrades, upgrades, "no WebSocket attempt: the choice was remembered");
    assert.equal(await alice.evaluate(() => window.corral.sessionId), session);
    assert.equal(await alice.evaluate(() => window.corral.welcome?.resumed), true);
    await say(bob, "welcome back");
    const a = await waitChat(alice, want.length + 1);
    assert.deepEqual(a.slice(0, want.length), want);
    assert.equal(a.at(-1).text, "welcome back");
  });

  test("a session on a WebSocket resumes over SSE when the network starts refusing upgrades", async () => {
    const proxy = await startHttpProxy(corral.addr, { upgrade: "pass" });
    try {
      const dave = await openPage(`${proxy.url}?name=dave`);
      await dave.waitForSelector('#status[data-state="open"][data-transport="websocket"]', WAIT);
      const session = await dave.evaluate(() => window.corral.sessionId);
      await dave.waitForSelector('#people li[data-user="alice"]', WAIT);
      // dave joined at the room's end: his chat is what came after.
      const before = (await chat(alice)).length;
      const mine = (await chat(dave)).length;
      proxy.hold();
      proxy.upgrade = "403";
      assert.ok(proxy.cut() >= 1, "dave had a WebSocket to cut");
      await dave.waitForSelector('#status[data-state="reconnecting"]', WAIT);
      const missed = ["dave, you moved networks", "these came meanwhile"];
      for (const text of missed) await say(alice, text);
      await waitChat(alice, before + missed.length);
      proxy.release();
      await dave.waitForSelector('#status[data-state="open"][data-transport="sse"]', WAIT);
      assert.equal(await dave.evaluate(() => window.corral.sessionId), session, "the same session");
      assert.equal(await dave.evaluate(() => window.corral.welcome?.resumed), true, "resumed, not started afresh");
      await say(dave, "on SSE now");
      const a = await waitChat(alice, before + missed.length + 1);
      const d = await waitChat(dave, mine + missed.length + 1);
      assert.equal(d.length, mine + missed.length + 1);
      assert.deepEqual(d, a.slice(a.length - d.length), "nothing lost, nothing twice");
      assert.deepEqual(d.slice(mine).map((m) => m.text), [...missed, "on SSE now"]);
      assertGapless(d);
      await dave.context().close();
    } finally {
      await proxy.stop();
    }
  });

  test("a stalled upgrade (held unanswered) gives way to SSE after transportTimeoutMs", async () => {
    const proxy = await startHttpProxy(corral.addr, { upgrade: "hold" });
    try {
      const page = await openPage(`${proxy.url}?name=carol`);
      await page.waitForSelector('#status[data-state="open"][data-transport="sse"]', { timeout: 30_000 });
      assert.equal(proxy.upgrades, 1, "one WebSocket attempt, held");
      const failed = await page.evaluate(() => new Promise((resolve) => {
        // The demo's client already fell back; a fresh one reports why.
        import("/corral.js").then(({ Client }) => {
          const c = new Client({ url: `ws://${location.host}/ws`, token: "carol2", storage: null, transportStorage: null, transportTimeoutMs: 1000 });
          c.on("transport", (t) => {
            c.close();
            resolve(t.failed);
          });
          c.connect();
        });
      }));
      assert.equal(failed.length, 1);
      assert.equal(failed[0].transport, "websocket");
      assert.match(failed[0].reason, /no welcome within 1000 ms over websocket/);
      await page.context().close();
    } finally {
      await proxy.stop();
    }
  });

  test("presence over each fallback: a snapshot, a join, and close() leaving at once (not after a drop's grace)", async () => {
    const proxy = await startHttpProxy(corral.addr);
    try {
      const page = await openPage(`${proxy.url}?name=erin`);
      const got = await page.evaluate(async () => {
        const { Client } = await import("/corral.js");
        const url = `ws://${location.host}/ws`;
        const opts = { url, storage: null, transportStorage: null };
        const watcher = new Client({ ...opts, token: "watcher", transports: ["websocket", "sse"] });
        const visitor = new Client({ ...opts, token: "visitor", transports: ["websocket", "stream"] });
        const members = new Set();
        const seen = [];
        watcher.on("presence", (p) => {
          if (p.snapshot) members.clear();
          for (const m of p.joins) members.add(m.userId);
          for (const u of p.leaves) members.delete(u);
          seen.push([...members].sort().join(","));
        });
        const until = (want) =>
          new Promise((resolve, reject) => {
            const t = setTimeout(() => reject(new Error(`presence never became ${want}: ${seen.join(" | ")}`)), 10_000);
            const check = () => ([...members].sort().join(",") === want ? (clearTimeout(t), resolve()) : setTimeout(check, 20));
            check();
          });
        watcher.connect();
        visitor.connect();
        await watcher.join("porch", { presence: true, state: { mood: "watching" } });
        await until("watcher");
        await visitor.join("porch", { presence: true, state: { mood: "visiting" } });
        await until("visitor,watcher");
        const transports = [watcher.transport, visitor.transport];
        visitor.close();
        await until("watcher"); // a drop would take the 10 min grace
        watcher.close();
        return { transports, seen };
      });
      assert.deepEqual(got.transports, ["sse", "stream"]);
      await page.context().close();
    } finally {
      await proxy.stop();
    }
  });

  for (const transport of ["sse", "stream"]) {
    test(`per-sender order over ${transport} while the proxy cuts every stream`, async () => {
      const proxy = await startHttpProxy(corral.addr);
      try {
        const page = await openPage(`${proxy.url}?name=writer-${transport}`);
        const opened = await publishThrough(
          page,
          proxy.addr,
          async () => {
            for (let i = 1; i <= 3; i++) {
              await acked(page, 35 * i);
              assert.ok(proxy.cut() >= 2, "the writer's and the reader's streams were cut");
            }
          },
          { transports: ["websocket", transport], transportTimeoutMs: 3000 },
        );
        // Each opened once, then once after each cut (at least), all on
        // the fallback.
        for (const who of ["writer", "reader"]) {
          assert.ok(opened[who].length >= 4, `${who} opened ${opened[who].length} connections`);
          assert.deepEqual([...new Set(opened[who])], [transport], `${who}'s transports`);
        }
        await page.context().close();
      } finally {
        await proxy.stop();
      }
    });
  }

  test("no page errors", () => {
    assert.deepEqual(pageErrors, []);
  });
});

describe("behind nginx, which drops Upgrade, in Chromium", { timeout: 300_000 }, () => {
  let dir, bin, corral, cutter, nginx, browser;
  const pageErrors = [];

  before(async () => {
    dir = await tempDir("corral-e2e-nginx-");
    bin = await buildCorral(dir);
    corral = await startCorral(bin);
    // nginx → a proxy that can cut nginx's upstream requests → corral.
    cutter = await startHttpProxy(corral.addr);
    nginx = await startNginx(cutter.addr, dir);
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await nginx?.stop();
    await cutter?.stop();
    await corral?.stop();
    if (corral) await saveArtifact("fallback-nginx.log", corral.logs.join("\n") + "\n");
    await removeDir(dir);
  });

  async function openPage(url) {
    const page = await newPerson(browser, url);
    page.on("pageerror", (e) => pageErrors.push(`${url}: ${e.message}`));
    return page;
  }

  test("the demo falls back to SSE and to streaming: presence, cursors, one chat order", async () => {
    const alice = await openPage(`${nginx.url}?name=alice`);
    const bob = await openPage(`${nginx.url}?name=bob&transport=websocket,stream`);
    await alice.waitForSelector('#status[data-state="open"][data-transport="sse"]', WAIT);
    await bob.waitForSelector('#status[data-state="open"][data-transport="stream"]', WAIT);
    for (const page of [alice, bob]) {
      await page.waitForSelector('#people li[data-user="alice"]', WAIT);
      await page.waitForSelector('#people li[data-user="bob"]', WAIT);
    }
    await moveOnBoard(bob, 0.3, 0.4);
    await waitCursor(alice, "bob", 0.3, 0.4);
    await moveOnBoard(alice, 0.6, 0.2);
    await waitCursor(bob, "alice", 0.6, 0.2);
    const lines = ["one", "two", "three", "four", "five", "six"];
    await Promise.all([
      (async () => {
        for (const t of lines.filter((_, i) => i % 2 === 0)) await say(alice, t);
      })(),
      (async () => {
        for (const t of lines.filter((_, i) => i % 2 === 1)) await say(bob, t);
      })(),
    ]);
    const a = await waitChat(alice, lines.length);
    const b = await waitChat(bob, lines.length);
    assert.deepEqual(b, a);
    assertGapless(a);
    await alice.context().close();
    await bob.context().close();
  });

  for (const transport of ["sse", "stream"]) {
    test(`per-sender order over ${transport} while nginx's upstream requests are cut`, async () => {
      const page = await openPage(`${nginx.url}?name=writer-${transport}`);
      const opened = await publishThrough(
        page,
        nginx.addr,
        async () => {
          for (let i = 1; i <= 3; i++) {
            await acked(page, 35 * i);
            assert.ok(cutter.cut() >= 2, "the writer's and the reader's streams were cut");
          }
        },
        { transports: ["websocket", transport], transportTimeoutMs: 3000 },
      );
      for (const who of ["writer", "reader"]) {
        assert.ok(opened[who].length >= 4, `${who} opened ${opened[who].length} connections`);
        assert.deepEqual([...new Set(opened[who])], [transport], `${who}'s transports`);
      }
      await page.context().close();
    });
  }

  test("no page errors", () => {
    assert.deepEqual(pageErrors, []);
  });
});
