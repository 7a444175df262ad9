// The demo page at / of a real `corral serve --insecure-dev`, in headless
// Chromium: two people see each other's cursors and the same chat in the
// same order; one of them loses the connection (a proxy cuts it) and
// resumes without losing the chat sent meanwhile; a reload resumes too.
// Leaves a screenshot in e2e/artifacts/demo.png (and, with
// CORRAL_E2E_UPDATE_DOCS=1, in docs/demo.png for the README).

import assert from "node:assert/strict";
import { copyFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  buildCorral,
  launchBrowser,
  newPerson,
  removeDir,
  repoRoot,
  saveArtifact,
  startCorral,
  startProxy,
  tempDir,
} from "./harness.mjs";
import { assertGapless, chat, moveOnBoard, say, waitChat, waitCursor } from "./demopage.mjs";

const WAIT = { timeout: 15_000 };

describe("demo page in Chromium", { timeout: 180_000 }, () => {
  let dir, bin, corral, proxy, browser, alice, bob;
  const pageErrors = [];

  before(async () => {
    const t0 = Date.now();
    dir = await tempDir("corral-e2e-");
    bin = await buildCorral(dir);
    corral = await startCorral(bin);
    // bob reaches corral through a proxy that can cut his connection.
    proxy = await startProxy(corral.addr);
    browser = await launchBrowser();
    alice = await openPage(`${corral.url}?name=alice`);
    bob = await openPage(`${proxy.url}?name=bob`);
    console.log(`# setup (build, serve, launch, load) took ${Date.now() - t0} ms`);
  });

  after(async () => {
    await browser?.close();
    await proxy?.stop();
    await corral?.stop();
    if (corral) await saveArtifact("corral.log", corral.logs.join("\n") + "\n");
    await removeDir(dir);
  });

  async function openPage(url) {
    const page = await newPerson(browser, url);
    page.on("pageerror", (e) => pageErrors.push(`${url}: ${e.message}`));
    return page;
  }

  test("both pages connect and see who is here", async () => {
    for (const page of [alice, bob]) {
      await page.waitForSelector('#status[data-state="open"]', WAIT);
      await page.waitForSelector('#people li[data-user="alice"]', WAIT);
      await page.waitForSelector('#people li[data-user="bob"]', WAIT);
    }
    assert.equal(await alice.textContent("#people-count"), "2");
  });

  test("each page sees the other's cursor live", async () => {
    await moveOnBoard(bob, 0.3, 0.4);
    await waitCursor(alice, "bob", 0.3, 0.4);
    await moveOnBoard(bob, 0.7, 0.6);
    await waitCursor(alice, "bob", 0.7, 0.6);
    await moveOnBoard(alice, 0.2, 0.8);
    await waitCursor(bob, "alice", 0.2, 0.8);
    // The own cursor is the pointer itself, never drawn.
    assert.equal(await alice.locator('.cursor[data-user="alice"]').count(), 0);
  });

  test("both pages see the same chat in the same order", async () => {
    const lines = [
      ["alice", "hey bob, can you see my cursor?"],
      ["bob", "yes, it glides along nicely"],
      ["alice", "let's check the chat order"],
      ["bob", "typing at the same time as you"],
      ["alice", "one"],
      ["bob", "two"],
      ["alice", "three"],
      ["bob", "four"],
    ];
    // Sent from both pages at once, without waiting for acknowledgements.
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

  test("a cut connection resumes without losing chat sent meanwhile", async () => {
    const session = await bob.evaluate(() => window.corral.sessionId);
    const before = (await chat(alice)).length;
    proxy.hold(); // bob's reconnect attempts wait, unanswered
    assert.ok(proxy.cut() >= 1, "bob had a connection to cut");
    await bob.waitForSelector('#status[data-state="reconnecting"]', WAIT);

    const missed = ["bob, are you still there?", "these were sent while you were away", "nothing should be lost"];
    for (const text of missed) await say(alice, text);
    await waitChat(alice, before + missed.length);
    await say(bob, "sorry, my connection dropped"); // queued while offline

    proxy.release();
    await bob.waitForSelector('#status[data-state="open"]', WAIT);
    const a = await waitChat(alice, before + missed.length + 1);
    const b = await waitChat(bob, before + missed.length + 1);
    assert.deepEqual(b, a);
    assertGapless(b);
    assert.deepEqual(
      b.slice(before, before + missed.length).map((m) => m.text),
      missed,
    );
    assert.equal(b.at(-1).text, "sorry, my connection dropped");
    assert.equal(await bob.locator("#outbox li").count(), 0, "nothing left unsent");
    assert.equal(await bob.evaluate(() => window.corral.sessionId), session, "the same session");
    assert.equal(await bob.evaluate(() => window.corral.welcome?.resumed), true);
    await bob.getByText("Reconnected: session resumed, nothing missed.").waitFor(WAIT);
    // bob's presence and cursor come back for alice after the resume.
    await alice.waitForSelector('#people li[data-user="bob"]', WAIT);
    await moveOnBoard(bob, 0.55, 0.35);
    await waitCursor(alice, "bob", 0.55, 0.35);
  });

  test("a reload resumes the session and keeps the chat", async () => {
    const session = await bob.evaluate(() => window.corral.sessionId);
    const want = await chat(alice);
    await bob.reload();
    await bob.waitForSelector('#status[data-state="open"]', WAIT);
    assert.equal(await bob.evaluate(() => window.corral.sessionId), session);
    assert.equal(await bob.evaluate(() => window.corral.welcome?.resumed), true);
    await say(alice, "welcome back");
    const b = await waitChat(bob, want.length + 1);
    assert.deepEqual(b.slice(0, want.length), want);
    assert.equal(b.at(-1).text, "welcome back");
  });

  test("screenshot", async () => {
    // A scene of its own, on a fresh server: three people in the lobby.
    const fresh = await startCorral(bin);
    try {
      const pages = {};
      for (const name of ["alice", "bob", "carol"]) {
        pages[name] = await openPage(`${fresh.url}?name=${name}`);
        await pages[name].waitForSelector('#status[data-state="open"]', WAIT);
      }
      const { alice: a, bob: b, carol: c } = pages;
      await a.waitForSelector('#people li[data-user="carol"]', WAIT);
      const script = [
        [a, "Morning! Shipping the new onboarding flow today."],
        [b, "Nice. I can see your cursor gliding around."],
        [c, "Joined from the train, hi both"],
        [a, "Carol, if your connection drops, you resume where you left off."],
        [c, "Just went through a tunnel: nothing missing."],
        [b, "Same order for everyone, too."],
      ];
      for (const [page, text] of script) {
        const n = (await chat(a)).length;
        await say(page, text);
        await waitChat(a, n + 1);
      }
      await moveOnBoard(c, 0.66, 0.64);
      await moveOnBoard(b, 0.34, 0.3);
      await waitCursor(a, "carol", 0.66, 0.64);
      await waitCursor(a, "bob", 0.34, 0.3);
      await b.fill("#text", "let me try the");
      await a.getByText("bob is typing…").waitFor(WAIT);
      await a.mouse.move(5, 5);
      const path = await saveArtifact("demo.png", await a.screenshot());
      if (process.env.CORRAL_E2E_UPDATE_DOCS) await copyFile(path, join(repoRoot, "docs", "demo.png"));
      console.log(`# screenshot: ${path}`);
      for (const p of Object.values(pages)) await p.context().close();
    } finally {
      await fresh.stop();
    }
  });

  test("no page errors", () => {
    assert.deepEqual(pageErrors, []);
  });
});
