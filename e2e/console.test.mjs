// The admin console at /console on the internal listener of a real
// corral, in headless Chromium, twice: `corral serve --internal-addr
// --api-keys --config` (the console on the internal listener), and a split
// deployment, `corral core --api-keys --config` and `corral edge` (the
// console on the core's listener, the members on the edge's port). An
// operator signs in with the API key (a missing or wrong one is refused),
// finds the busiest room, watches a member's message arrive in its live
// tail and its cursor among the signals, publishes from the console,
// sees the member's growing message as one line with its body so far,
// marked growing then finished (in the tail and in the history),
// unsubscribes the member (it leaves with 4409), disconnects it (whose demo
// page gets the chosen close code), looks a user's connections up, and
// reloads the config file (a new version in force, then a broken file
// refused). The public port answers 404 for /console. Leaves a
// screenshot of each run in e2e/artifacts/console-<mode>.png (and, with
// CORRAL_E2E_UPDATE_DOCS=1, the split one in docs/console.png).

import assert from "node:assert/strict";
import { copyFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { buildCorral, launchBrowser, newPerson, removeDir, repoRoot, saveArtifact, startCorral, startSplit, tempDir } from "./harness.mjs";

const WAIT = { timeout: 15_000 };
const POLL = { ...WAIT, polling: 50 };
const KEY = "console-e2e-key-0123456789";
const ROOM = "chat:busy";

const configV1 = `version: "v1"
rooms:
  - name: chat
    match: "chat:*"
    history: {size: 500, ttl: 24h}
`;
const configV2 = configV1.replace('"v1"', '"v2"').replace("size: 500", "size: 700");

for (const mode of ["serve", "split"]) describe(`admin console in Chromium (${mode})`, { timeout: 180_000 }, () => {
  let dir, bin, corral, browser, bob, quiet, ops, cfg;
  const pageErrors = [];

  before(async () => {
    const t0 = Date.now();
    dir = await tempDir("corral-e2e-console-");
    cfg = join(dir, "corral.yaml");
    await writeFile(cfg, configV1);
    bin = await buildCorral(dir);
    corral =
      mode === "split"
        ? await startSplit(bin, KEY, ["--config", cfg])
        : await startCorral(bin, ["--internal-addr", "127.0.0.1:0", "--api-keys", KEY, "--config", cfg]);
    browser = await launchBrowser();
    // Two members: bob in the busy room, another in a quiet one.
    bob = await openPage(`${corral.url}?name=bob&room=${encodeURIComponent(ROOM)}`);
    quiet = await openPage(`${corral.url}?name=carol&room=chat:quiet`);
    for (const p of [bob, quiet]) await p.waitForSelector('#status[data-state="open"]', WAIT);
    // bob's page remembers every close code its client is given.
    await bob.evaluate(() => {
      window.codes = [];
      window.corral.on("state", (s) => s.code && window.codes.push(s.code));
    });
    ops = await openPage(`${corral.internalUrl}console/`);
    // The page's own navigation timing: from the request to its load event.
    const loaded = await ops.evaluate(() => performance.getEntriesByType("navigation")[0].loadEventEnd);
    console.log(`# setup took ${Date.now() - t0} ms; the console loaded in ${Math.round(loaded)} ms`);
  });

  after(async () => {
    await browser?.close();
    await corral?.stop();
    if (corral) await saveArtifact(`corral-console-${mode}.log`, corral.logs.join("\n") + "\n");
    await removeDir(dir);
  });

  async function openPage(url) {
    const page = await newPerson(browser, url);
    page.on("pageerror", (e) => pageErrors.push(`${url}: ${e.message}`));
    return page;
  }

  test("the public port does not serve the console; the API wants the key", async () => {
    for (const path of ["console/", "console", "console/console.js"]) {
      const res = await fetch(corral.url + path, { redirect: "manual" });
      assert.equal(res.status, 404, `public /${path}`);
    }
    const res = await fetch(`${corral.internalUrl}corral.v1.RoomService/Info`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: "{}",
    });
    assert.equal(res.status, 401);
  });

  test("a missing or wrong key is refused", async () => {
    await ops.click('#signin-form button[type="submit"]');
    await ops.waitForFunction(() => document.getElementById("signin-error").textContent.includes("Type the API key"), null, POLL);
    await ops.fill("#key", "not-the-key-0123456789");
    await ops.click('#signin-form button[type="submit"]');
    await ops.waitForFunction(() => document.getElementById("signin-error").textContent === "Key refused.", null, POLL);
    assert.equal(await ops.isVisible("#nav"), false);
  });

  test("signs in and sees the node and its connections", async () => {
    await ops.fill("#key", KEY);
    await ops.click('#signin-form button[type="submit"]');
    await ops.waitForSelector("#overview:not([hidden])", WAIT);
    await ops.waitForFunction(() => document.getElementById("ov-conns").textContent === "2", null, POLL);
    assert.equal(await ops.locator("#ov-nodes tr").count(), 2); // the core and its edge
    // This node's readiness, and the wrong key just refused counted by reason.
    await ops.waitForFunction(() => document.getElementById("ov-ready").textContent === "ready", null, POLL);
    await ops.waitForSelector('#ov-drops tr[data-metric="corral_api_unauthenticated_total"][data-reason="wrong"]', WAIT);
  });

  test("finds the busiest room and watches its messages live", async () => {
    // bob's room gets traffic; the quiet room none.
    for (let i = 1; i <= 5; i++) await bob.evaluate((n) => window.corral.publish("chat:busy", { text: `warm-up ${n}` }), i);
    await ops.click('nav a[href="#rooms"]');
    await ops.waitForSelector('#rooms-list tr[data-room="chat:quiet"]', WAIT);
    for (let i = 6; i <= 10; i++) await bob.evaluate((n) => window.corral.publish("chat:busy", { text: `warm-up ${n}` }), i);
    // Sorted by rate, the busy room comes first.
    await ops.waitForFunction(() => document.querySelector("#rooms-list tr")?.dataset.room === "chat:busy", null, POLL);
    await ops.fill("#rooms-filter", "busy");
    await ops.waitForFunction(() => document.querySelectorAll("#rooms-list tr").length === 1, null, POLL);
    assert.equal(await ops.textContent('#rooms-list tr[data-room="chat:busy"] td:nth-child(2)'), "chat");
    await ops.click('#rooms-list tr[data-room="chat:busy"]');
    await ops.waitForSelector("#room:not([hidden])", WAIT);
    await ops.waitForSelector('#members tr[data-user="bob"]', WAIT);
    // The history pane shows what was said before; the tail what comes.
    await ops.waitForFunction(() => document.getElementById("history").textContent.includes("warm-up 10"), null, POLL);
    assert.ok((await ops.textContent("#room-settings")).includes("history.size: 500"));
    // Signals are sampled: bob's cursor shows with its latest value.
    await bob.evaluate(() => window.corral.signal("chat:busy", "cursor:bob", { x: 0.25, y: 0.5 }));
    await ops.waitForFunction(() => document.querySelector('#signals li[data-key="cursor:bob"]')?.textContent.includes('"x":0.25'), null, POLL);
    await bob.evaluate(() => window.corral.publish("chat:busy", { text: "hello from bob" }));
    await ops.waitForFunction(() => document.getElementById("tail").textContent.includes("hello from bob"), null, POLL);
    await ops.fill("#publish-payload", '{"text":"hello from ops"}');
    await ops.click('#publish-form button[type="submit"]');
    await ops.waitForFunction(() => document.getElementById("tail").textContent.includes("hello from ops"), null, POLL);
    // bob's page got the console's message too.
    await bob.waitForFunction(() => document.getElementById("messages").textContent.includes("hello from ops"), null, POLL);
  });

  test("screenshot", async () => {
    const path = await saveArtifact(`console-${mode}.png`, await ops.screenshot());
    if (process.env.CORRAL_E2E_UPDATE_DOCS && mode === "split") await copyFile(path, join(repoRoot, "docs", "console.png"));
    console.log(`# screenshot: ${path}`);
  });

  test("shows a growing message assembled: growing, then finished", async () => {
    // bob writes a growing message chunk by chunk (docs/MESSAGES.md); the
    // tail shows it as one line, its body so far, marked open or final.
    const line = ({ list, state, text }) => {
      const li = document.querySelector(`#${list} li[data-grow^="g1@"]`);
      return li?.dataset.state === state && li.textContent.includes(text);
    };
    await bob.evaluate(() => window.corral.room("chat:busy").append("g1", "Hel", { version: 1 }));
    await bob.evaluate(() => window.corral.room("chat:busy").append("g1", "lo", { version: 2 }));
    await ops.waitForFunction(line, { list: "tail", state: "open", text: "Hello growing" }, POLL);
    await bob.evaluate(() => window.corral.room("chat:busy").append("g1", " there", { version: 3, final: true }));
    await ops.waitForFunction(line, { list: "tail", state: "final", text: "Hello there finished" }, POLL);
    assert.equal(await ops.locator('#tail li[data-grow^="g1@"]').count(), 1);
    // The history pane, read afresh, has it as one finished entry.
    await ops.click('nav a[href="#rooms"]');
    await ops.click('#rooms-list tr[data-room="chat:busy"]');
    await ops.waitForFunction(line, { list: "history", state: "final", text: "Hello there finished" }, POLL);
    assert.equal(await ops.locator('#history li[data-grow^="g1@"]').count(), 1);
  });

  test("unsubscribes a member from the room, which it leaves with 4409", async () => {
    await bob.evaluate(() => {
      window.lefts = [];
      window.corral.on("left", (l) => window.lefts.push(l.code));
    });
    await ops.click('#members tr[data-user="bob"] button.unsubscribe');
    await bob.waitForFunction(() => window.lefts.includes(4409), null, POLL);
    await ops.waitForFunction(() => !document.querySelector('#members tr[data-user="bob"]'), null, POLL);
    // bob comes back, for the next test.
    await bob.evaluate(() => window.corral.join("chat:busy"));
    await ops.waitForSelector('#members tr[data-user="bob"]', WAIT);
  });

  test("disconnects a member, whose client gets the chosen code", async () => {
    await ops.selectOption("#member-code", "CODE_FORBIDDEN");
    await ops.click('#members tr[data-user="bob"] button.disconnect');
    await bob.waitForFunction(() => window.codes.includes(4403), null, POLL);
    await ops.waitForFunction(() => !document.querySelector('#members tr[data-user="bob"]'), null, POLL);
  });

  test("looks a connection up by user and disconnects it", async () => {
    await ops.click('nav a[href="#connections"]');
    await ops.fill("#conn-id", "carol");
    await ops.click('#conn-form button[type="submit"]');
    await ops.waitForSelector("#conn-list tr[data-session]", WAIT);
    const row = await ops.textContent("#conn-list");
    assert.ok(row.includes("chat:quiet") && row.includes("corral.v1.json"), row);
    await ops.selectOption("#conn-code", "CODE_GOING_AWAY");
    await ops.click("#conn-disconnect");
    await ops.waitForFunction(() => document.getElementById("status").textContent.startsWith("closed 1"), null, POLL);
  });

  test("reloads the config file", async () => {
    await ops.click('nav a[href="#config"]');
    await ops.waitForFunction(() => document.getElementById("cfg-version").textContent === "v1", null, POLL);
    await writeFile(cfg, configV2);
    await ops.click("#cfg-reload");
    await ops.waitForFunction(() => document.getElementById("cfg-version").textContent === "v2", null, POLL);
    assert.match(await ops.textContent("#cfg-last"), /^ok at /);
    // One core here: no other node to reload.
    assert.equal(await ops.textContent("#status"), "this node: reloaded; other cores' nodes: 0 of 0 reloaded");
    assert.ok((await ops.textContent('#cfg-classes [data-class="chat"]')).includes("history.size: 700"));
    // A broken file is refused and the version in force stays.
    await writeFile(cfg, "version: v3\nrooms: [{name: chat, match: 'chat:*', history: {size: -1}}]\n");
    await ops.click("#cfg-reload");
    await ops.waitForFunction(() => document.getElementById("cfg-last").textContent.startsWith("refused"), null, POLL);
    assert.equal(await ops.textContent("#cfg-version"), "v2");
  });

  test("no page errors", () => {
    assert.deepEqual(pageErrors, []);
  });
});
