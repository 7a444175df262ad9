// demopage.mjs: what the e2e tests do on the demo page (web/), shared by
// demo.test.mjs and fallback.test.mjs: type a chat line, move on the board,
// wait for a cursor or for chat lines, and check chat is gapless.
import assert from "node:assert/strict";

// waitForFunction polls on animation frames by default, which Chromium runs
// for the front tab only; poll on a timer instead.
const POLL = { timeout: 15_000, polling: 50 };

export async function say(page, text) {
  await page.fill("#text", text);
  await page.press("#text", "Enter");
}

export async function moveOnBoard(page, x, y) {
  const box = await page.locator("#board").boundingBox();
  await page.mouse.move(box.x + x * box.width, box.y + y * box.height, { steps: 4 });
}

export async function waitCursor(page, user, x, y) {
  await page.waitForFunction(
    ([user, x, y]) => {
      const el = document.querySelector(`.cursor[data-user="${user}"]`);
      return el && Math.abs(Number(el.dataset.x) - x) < 0.02 && Math.abs(Number(el.dataset.y) - y) < 0.02;
    },
    [user, x, y],
    POLL,
  );
}

export async function chat(page) {
  return page.$$eval("#messages li[data-seq]", (lis) =>
    lis.map((li) => ({ seq: Number(li.dataset.seq), sender: li.dataset.sender, text: li.querySelector(".text").textContent })),
  );
}

export async function waitChat(page, n) {
  await page.waitForFunction((n) => document.querySelectorAll("#messages li[data-seq]").length >= n, n, POLL);
  return chat(page);
}

export function assertGapless(msgs) {
  msgs.forEach((m, i) => assert.equal(m.seq, msgs[0].seq + i, `seq ${m.seq} at ${i}: ${JSON.stringify(msgs)}`));
}
