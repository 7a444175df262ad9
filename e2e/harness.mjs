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
 */
export async function startCorral(bin) {
  return startCorralWith(bin, ["serve", "--insecure-dev", "--addr", "127.0.0.1:0"]);
}

/**
 * startCorralWith runs `corral` with args (a command and its flags; JSON
 * logs are added) and resolves once it listens, with its address.
 */
export async function startCorralWith(bin, args) {
  const proc = spawn(bin, [...args, "--log-format", "json"], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  const logs = [];
  const addr = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`corral did not start:\n${logs.join("\n")}`)), 20_000);
    proc.on("exit", (code) => reject(new Error(`corral exited with ${code}:\n${logs.join("\n")}`)));
    createInterface({ input: proc.stderr }).on("line", (line) => {
      logs.push(line);
      try {
        const rec = JSON.parse(line);
        if (rec.msg === "corral listening") {
          clearTimeout(timer);
          resolve(rec.addr);
        }
      } catch {
        // not a log record
      }
    });
  });
  return {
    addr,
    url: `http://${addr}/`,
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
 * startRedis runs a private redis-server (no persistence) on a free
 * loopback port and resolves with its URL once it answers.
 */
export async function startRedis() {
  const bin = process.env.REDIS_SERVER || "/usr/bin/redis-server";
  if (!existsSync(bin)) {
    throw new Error(`no redis-server at ${bin}: install Debian's (sudo apt-get install -y redis-server), or set REDIS_SERVER`);
  }
  const port = await new Promise((resolve) => {
    const srv = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
  const proc = spawn(bin, ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
    stdio: ["ignore", "ignore", "ignore"],
  });
  for (let i = 0; ; i++) {
    const up = await new Promise((resolve) => {
      const s = net.connect(port, "127.0.0.1", () => {
        s.destroy();
        resolve(true);
      });
      s.on("error", () => resolve(false));
    });
    if (up) break;
    if (i > 100 || proc.exitCode !== null) throw new Error(`redis-server did not start on port ${port}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    async stop() {
      if (proc.exitCode !== null) return;
      const exited = new Promise((r) => proc.on("exit", r));
      proc.kill("SIGKILL");
      await exited;
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
