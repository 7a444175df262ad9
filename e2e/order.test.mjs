// A sender's order in the browser SDK, in headless Chromium, through a
// deployment's failures. A page publishes 150 messages to a room, one
// every 20 ms without waiting for acknowledgements, while the deployment
// fails under it; a second client in the page reads the room. Every
// publish must be acknowledged, at a seq above the one before it (the
// order made), and the reader must get exactly those messages in that
// order: no loss, no duplicate. The failures: in a split deployment
// (`corral core` on Redis, `corral edge`, each its own process) the core
// restarts and then the edge is stopped and started again on its
// address; in `corral serve` on Redis Sentinel with redis-replicas 1 the
// master is killed and a replica promoted.

import { after, before, describe, test } from "node:test";
import { publishThrough } from "./ordercheck.mjs";
import {
  buildCorral,
  launchBrowser,
  newPerson,
  removeDir,
  saveArtifact,
  startCorralWith,
  startRedis,
  startSentinel,
  tempDir,
} from "./harness.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// restart stops a node and starts it again on its address, retrying
// while the port is still taken.
async function restart(bin, node, args, logs) {
  await node.stop();
  logs.push(...node.logs);
  for (let i = 0; ; i++) {
    try {
      return await startCorralWith(bin, args(node.addr));
    } catch (e) {
      if (i >= 50) throw e;
      await sleep(100);
    }
  }
}

describe("per-sender order in Chromium", { timeout: 300_000 }, () => {
  let dir, bin, browser;
  const logs = [];

  before(async () => {
    dir = await tempDir("corral-e2e-order-");
    bin = await buildCorral(dir);
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await saveArtifact("order.log", logs.join("\n") + "\n");
    await removeDir(dir);
  });

  test("through a core restart and an edge drop (split, Redis)", async () => {
    const redis = await startRedis();
    const coreArgs = (addr) => ["core", "--addr", addr, "--redis", redis.url, "--redis-prefix", "e2e-order", "--insecure-dev"];
    let core = await startCorralWith(bin, coreArgs("127.0.0.1:0"));
    const edgeArgs = (addr) => ["edge", "--addr", addr, "--core", `http://${core.addr}`, "--insecure-dev"];
    let edge = await startCorralWith(bin, edgeArgs("127.0.0.1:0"));
    try {
      const page = await newPerson(browser, `http://${edge.addr}/?name=writer`);
      await publishThrough(page, edge.addr, async () => {
        await sleep(600);
        core = await restart(bin, core, coreArgs, logs);
        await sleep(600);
        edge = await restart(bin, edge, edgeArgs, logs);
      });
    } finally {
      for (const n of [edge, core]) {
        await n.stop();
        logs.push(...n.logs);
      }
      await redis.stop();
    }
  });

  test("through a Redis Sentinel failover (serve, redis-replicas 1)", async () => {
    const sn = await startSentinel(2, dir);
    const node = await startCorralWith(bin, [
      "serve", "--addr", "127.0.0.1:0", "--insecure-dev", "--redis", sn.url, "--redis-prefix", "e2e-order",
    ], { CORRAL_REDIS_REPLICAS: "1" });
    try {
      const page = await newPerson(browser, `http://${node.addr}/?name=writer`);
      await publishThrough(page, node.addr, async () => {
        await sleep(600);
        await sn.failover();
      });
    } finally {
      await node.stop();
      logs.push(...node.logs);
      await sn.stop();
    }
  });
});
