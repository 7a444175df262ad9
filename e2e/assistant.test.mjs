// The demo page's assistant panel in headless Chromium, against a real
// `corral serve` and the example backend examples/assistant, which streams
// a made-up answer token by token through RoomService.Append (a growing
// message, docs/MESSAGES.md). One page is in the room from the start; a
// second opens in the middle of the answer (a live join: the answer so far
// as one chunk, then the rest); the first reloads in the middle (a resume
// after what it saw, which asks for the answer so far: the page keeps no
// copy of it). Each ends with exactly the text the backend printed:
// no token missing or doubled.

import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import { buildCorral, launchBrowser, newPerson, removeDir, repoRoot, saveArtifact, startCorral, tempDir } from "./harness.mjs";

const WAIT = { timeout: 20_000 };
const KEY = "e2e-assistant-key";
const ID = "answer-e2e";

describe("assistant panel in Chromium", { timeout: 180_000 }, () => {
  let dir, bin, assistantBin, corral, browser;
  const problems = [];

  before(async () => {
    dir = await tempDir("corral-e2e-assistant-");
    bin = await buildCorral(dir);
    assistantBin = join(dir, "assistant");
    await promisify(execFile)(process.env.GO || "go", ["build", "-o", assistantBin, "./examples/assistant"], { cwd: repoRoot, env: process.env });
    corral = await startCorral(bin, ["--internal-addr", "127.0.0.1:0", "--api-keys", KEY]);
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await corral?.stop();
    if (corral) await saveArtifact("assistant-corral.log", corral.logs.join("\n") + "\n");
    await removeDir(dir);
  });

  async function openPage(name) {
    const page = await newPerson(browser, `${corral.url}?name=${name}`);
    page.on("pageerror", (e) => problems.push(`${name}: ${e.message}`));
    page.on("console", (m) => {
      if (m.text().includes("assistant:")) problems.push(`${name}: ${m.text()}`);
    });
    await page.waitForSelector('#status[data-state="open"]', WAIT);
    return page;
  }

  async function waitVersion(page, atLeast) {
    await page.waitForFunction(
      ([id, v]) => Number(document.querySelector(`.answer[data-id="${id}"]`)?.dataset.version || 0) >= v,
      [ID, atLeast],
      WAIT,
    );
  }

  test("a page that joins and one that reloads mid-answer both end with the exact answer", async () => {
    const first = await openPage("reader");
    const proc = spawn(assistantBin, ["--api", `http://${corral.internal}`, "--key", KEY, "--room", "lobby", "--id", ID, "--tokens", "120", "--every", "25ms"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let errOut = "";
    proc.stdout.on("data", (b) => (out += b));
    proc.stderr.on("data", (b) => (errOut += b));
    const exited = new Promise((resolve) => proc.on("exit", resolve));

    await waitVersion(first, 20);
    const late = await openPage("latecomer");
    await waitVersion(late, 30);
    assert.equal(await late.getAttribute(`.answer[data-id="${ID}"]`, "data-final"), "false", "the answer ended before the reload");
    await first.reload();
    await first.waitForSelector('#status[data-state="open"]', WAIT);
    // The page keeps no copy of an open answer (it keeps finished ones,
    // like its chat transcript): the resume asks for the answers open at
    // its position (RoomPosition.open_prefix).
    const kept = await first.evaluate(() => Object.keys(sessionStorage).filter((k) => k.includes("answer")).map((k) => sessionStorage.getItem(k)).join("\n"));
    assert.ok(!kept.includes(ID), `app storage holds the open answer: ${kept}`);

    assert.equal(await exited, 0, `assistant failed: ${errOut}`);
    const answer = out.replace(/\n$/, "");
    assert.ok(answer.length > 0);
    for (const [name, page] of [["reader", first], ["latecomer", late]]) {
      await page.waitForSelector(`.answer[data-id="${ID}"][data-final="true"]`, WAIT);
      assert.equal(await page.textContent(`.answer[data-id="${ID}"]`), answer, `${name}'s answer`);
      assert.equal(await page.getAttribute(`.answer[data-id="${ID}"]`, "data-version"), "120", `${name}'s version`);
    }
    // A finished answer is the page's to keep (like its transcript): it is
    // still there after another reload.
    await first.reload();
    await first.waitForSelector('#status[data-state="open"]', WAIT);
    await first.waitForSelector(`.answer[data-id="${ID}"][data-final="true"]`, WAIT);
    assert.equal(await first.textContent(`.answer[data-id="${ID}"]`), answer, "the finished answer after a reload");
    await saveArtifact("assistant.png", await late.screenshot());
    assert.deepEqual(problems, []);
  });
});
