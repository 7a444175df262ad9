// What the browser tests stand on: a real corral binary built from this
// repository, a TCP proxy that can cut and hold connections, and headless
// Debian Chromium driven by playwright-core.

import { execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, mkdir, rm, writeFile } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { chromium } from "playwright-core";

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), "..");
export const artifacts = join(repoRoot, "e2e", "artifacts");

/** tempDir makes a fresh directory that cleanup() removes. */
export async function tempDir(prefix) {
  return mkdtemp(join(tmpdir(), prefix));
}

/** buildCorral compiles ./cmd/corral into dir and returns the binary's path. */
export async function buildCorral(dir) {
  const bin = join(dir, "corral");
  await promisify(execFile)(process.env.GO || "go", ["build", "-o", bin, "./cmd/corral"], {
    cwd: repoRoot,
    env: process.env,
  });
  return bin;
}

/**
 * startCorral runs `corral serve --insecure-dev` on a free loopback port
 * (the server picks it: --addr 127.0.0.1:0) and resolves once it listens.
 * extra are more flags (e.g. --internal-addr 127.0.0.1:0, whose address
 * is then `internal`).
 */
export async function startCorral(bin, extra = []) {
  return startProcess(bin, ["serve", "--insecure-dev", "--addr", "127.0.0.1:0", "--log-format", "json", ...extra]);
}

/**
 * startSplit runs a split deployment: `corral core` (its listener is the
 * internal one: RoomService, the console) with coreFlags, and `corral
 * edge --insecure-dev` linked to it with the core's key. `url` is the
 * edge's public port, `internalUrl` the core's listener; stop() stops both.
 */
export async function startSplit(bin, key, coreFlags = []) {
  const core = await startProcess(bin, ["core", "--addr", "127.0.0.1:0", "--api-keys", key, "--log-format", "json", ...coreFlags]);
  let edge;
  try {
    edge = await startProcess(bin, ["edge", "--insecure-dev", "--addr", "127.0.0.1:0", "--core", `http://${core.addr}`, "--api-key", key, "--log-format", "json"]);
  } catch (e) {
    await core.stop();
    throw e;
  }
  return {
    addr: edge.addr,
    url: edge.url,
    internal: core.addr,
    internalUrl: core.url,
    get logs() {
      return [...core.logs.map((l) => `core ${l}`), ...edge.logs.map((l) => `edge ${l}`)];
    },
    async stop() {
      await edge.stop();
      await core.stop();
    },
  };
}

/** startProcess runs corral with args and resolves once it listens. */
async function startProcess(bin, args) {
  const proc = spawn(bin, args, {
    stdio: ["ignore", "ignore", "pipe"],
  });
  const logs = [];
  const listening = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`corral did not start:\n${logs.join("\n")}`)), 20_000);
    proc.on("exit", (code) => reject(new Error(`corral exited with ${code}:\n${logs.join("\n")}`)));
    createInterface({ input: proc.stderr }).on("line", (line) => {
      logs.push(line);
      try {
        const rec = JSON.parse(line);
        if (rec.msg === "corral listening") {
          clearTimeout(timer);
          resolve(rec);
        }
      } catch {
        // not a log record
      }
    });
  });
  const { addr, internal } = listening;
  return {
    addr,
    url: `http://${addr}/`,
    internal,
    internalUrl: internal ? `http://${internal}/` : undefined,
    logs,
    async stop() {
      if (proc.exitCode !== null) return;
      const exited = new Promise((r) => proc.on("exit", r));
      proc.kill("SIGTERM");
      const t = setTimeout(() => proc.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(t);
    },
  };
}

/**
 * startProxy forwards a loopback port to target ("host:port"). cut()
 * destroys every open connection, as a network failure would; hold()
 * makes new connections wait, unanswered, until release().
 */
export async function startProxy(target) {
  const [host, port] = splitHostPort(target);
  const pairs = new Set();
  let held = null;
  const pipe = (down) => {
    const up = net.connect(port, host);
    const pair = { down, up };
    pairs.add(pair);
    const end = () => {
      down.destroy();
      up.destroy();
      pairs.delete(pair);
    };
    for (const s of [down, up]) {
      s.on("error", end);
      s.on("close", end);
    }
    down.pipe(up);
    up.pipe(down);
  };
  const server = net.createServer({ pauseOnConnect: true }, (down) => {
    if (held) held.push(down);
    else pipe(down);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port: own } = server.address();
  return {
    url: `http://127.0.0.1:${own}/`,
    /** cut destroys every connection and reports how many there were. */
    cut() {
      const n = pairs.size;
      for (const { down, up } of [...pairs]) {
        down.destroy();
        up.destroy();
      }
      pairs.clear();
      return n;
    },
    hold() {
      held ??= [];
    },
    release() {
      const waiting = held ?? [];
      held = null;
      for (const down of waiting) if (!down.destroyed) pipe(down);
    },
    async stop() {
      this.cut();
      for (const down of held ?? []) down.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

function splitHostPort(addr) {
  const i = addr.lastIndexOf(":");
  return [addr.slice(0, i).replace(/^\[|\]$/g, ""), Number(addr.slice(i + 1))];
}

/** The flags a root process on this machine needs for Chromium (see
 * README: the network is closed, so no background traffic). */
export const chromiumArgs = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/**
 * launchBrowser starts Debian's Chromium. playwright-core gives it a fresh
 * --user-data-dir of its own (removed on close); each person in a test gets
 * a browser context of their own: their own window, storage and cookies.
 */
export async function launchBrowser() {
  const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
  if (!existsSync(executablePath)) {
    throw new Error(
      `no Chromium at ${executablePath}: install Debian's (sudo apt-get install -y chromium), or set CHROMIUM to a Chromium binary`,
    );
  }
  return chromium.launch({
    executablePath,
    headless: true,
    args: chromiumArgs,
    timeout: 30_000,
  });
}

/** newPerson opens url in a new context of browser, as a new person would. */
export async function newPerson(browser, url) {
  const context = await browser.newContext({
    viewport: { width: 1280, height: 760 },
    deviceScaleFactor: 1,
    reducedMotion: "reduce",
  });
  const page = await context.newPage();
  await page.goto(url);
  return page;
}

export async function saveArtifact(name, data) {
  await mkdir(artifacts, { recursive: true });
  const path = join(artifacts, name);
  await writeFile(path, data);
  return path;
}

export async function removeDir(dir) {
  if (dir) await rm(dir, { recursive: true, force: true });
}
