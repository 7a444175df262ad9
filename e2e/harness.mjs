// What the browser tests stand on: a real corral binary built from this
// repository, a TCP proxy that can cut and hold connections, and headless
// Debian Chromium driven by playwright-core.

import { execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, mkdir, rm, writeFile } from "node:fs/promises";
import http from "node:http";
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
 * startCorralWith runs `corral` with args (a command and its flags; JSON
 * logs are added) and env (settings that are not flags, as CORRAL_*
 * variables: `corral config keys`) and resolves once it listens, with its
 * address.
 */
export async function startCorralWith(bin, args, env = {}) {
  return startProcess(bin, [...args, "--log-format", "json"], env);
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
async function startProcess(bin, args, env = {}) {
  const proc = spawn(bin, args, {
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, ...env },
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

const redisBin = () => {
  const bin = process.env.REDIS_SERVER || "/usr/bin/redis-server";
  if (!existsSync(bin)) {
    throw new Error(`no redis-server at ${bin}: install Debian's (sudo apt-get install -y redis-server), or set REDIS_SERVER`);
  }
  return bin;
};

function freePort() {
  return new Promise((resolve) => {
    const srv = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/**
 * startRedis runs a private redis-server (no persistence) on a free
 * loopback port and resolves with its URL once it answers; extra are more
 * flags (--replicaof ...).
 */
export async function startRedis(extra = []) {
  const bin = redisBin();
  const port = await freePort();
  // A directory of its own: a replica's full sync writes an RDB file.
  const dir = await tempDir("corral-redis-");
  const proc = spawn(bin, ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no", ...extra], {
    stdio: ["ignore", "ignore", "ignore"],
  });
  await waitPort(port, proc);
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    async stop() {
      if (proc.exitCode === null) {
        const exited = new Promise((r) => proc.on("exit", r));
        proc.kill("SIGKILL");
        await exited;
      }
      await removeDir(dir);
    },
  };
}

/** redisCommand runs one command on 127.0.0.1:port with redis-cli and
 * resolves with its output. */
export async function redisCommand(port, ...args) {
  const cli = process.env.REDIS_CLI || "/usr/bin/redis-cli";
  const { stdout } = await promisify(execFile)(cli, ["-h", "127.0.0.1", "-p", String(port), ...args]);
  return stdout.trim();
}

/**
 * startSentinel runs a master, `replicas` replicas and three sentinels
 * (quorum 2, the master down after 1 s), like internal/redistest's, and
 * resolves once every sentinel names the master and knows its replicas.
 * failover() kills the master (SIGKILL) and resolves once a replica is
 * master and every sentinel names it.
 */
export async function startSentinel(replicas, dir) {
  const master = await startRedis();
  let servers = [master];
  for (let i = 0; i < replicas; i++) servers.push(await startRedis(["--replicaof", "127.0.0.1", String(master.port)]));
  const sentinels = [];
  for (let i = 0; i < 3; i++) {
    const port = await freePort();
    const conf = join(dir, `sentinel-${port}.conf`);
    await writeFile(
      conf,
      `port ${port}\nbind 127.0.0.1\nsentinel monitor mymaster 127.0.0.1 ${master.port} 2\n` +
        "sentinel down-after-milliseconds mymaster 1000\nsentinel failover-timeout mymaster 3000\nsentinel parallel-syncs mymaster 1\n",
    );
    const proc = spawn(redisBin(), [conf, "--sentinel"], { cwd: dir, stdio: ["ignore", "ignore", "ignore"] });
    await waitPort(port, proc);
    sentinels.push({ port, proc });
  }
  const named = async () => {
    const ports = new Set();
    for (const sn of sentinels) ports.add((await redisCommand(sn.port, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster")).split("\n")[1]);
    return ports.size === 1 ? Number([...ports][0]) : 0;
  };
  const ready = async (want, n) => {
    for (let i = 0; i < 1200; i++) {
      try {
        const info = await redisCommand(want, "INFO", "replication");
        let known = true;
        for (const sn of sentinels) {
          const out = await redisCommand(sn.port, "SENTINEL", "REPLICAS", "mymaster");
          if ((out.match(/^name$/gm) ?? []).length < n) known = false;
        }
        if (info.includes("role:master") && (info.match(/state=online/g) ?? []).length >= n && known && (await named()) === want) return;
      } catch {
        // not up yet
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`sentinel setup not ready: master ${want}, ${n} replicas`);
  };
  await ready(master.port, replicas);
  return {
    url: `redis+sentinel://${sentinels.map((s) => `127.0.0.1:${s.port}`).join(",")}/mymaster`,
    async failover() {
      const old = await named();
      const dead = servers.find((s) => s.port === old);
      await dead.stop();
      servers = servers.filter((s) => s !== dead);
      for (let i = 0; i < 1200; i++) {
        const now = await named().catch(() => 0);
        if (now && now !== old) return ready(now, servers.length - 1);
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error("no replica was promoted within 60 s");
    },
    async stop() {
      for (const sn of sentinels) if (sn.proc.exitCode === null) sn.proc.kill("SIGKILL");
      for (const s of servers) await s.stop();
    },
  };
}

async function waitPort(port, proc) {
  for (let i = 0; ; i++) {
    const up = await new Promise((resolve) => {
      const s = net.connect(port, "127.0.0.1", () => {
        s.destroy();
        resolve(true);
      });
      s.on("error", () => resolve(false));
    });
    if (up) return;
    if (i > 100 || proc.exitCode !== null) throw new Error(`redis-server did not start on port ${port}`);
    await new Promise((r) => setTimeout(r, 50));
  }
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

/**
 * startHttpProxy forwards HTTP requests to target ("host:port") one by
 * one, streaming both ways (an event stream or a streamed response passes
 * as it comes), and refuses every WebSocket upgrade, as a proxy or an
 * antivirus that strips Upgrade would: `upgrade` is "403" (answer 403
 * Forbidden, the default), "drop" (close the connection unanswered),
 * "hold" (leave it open, unanswered: a stalled upgrade) or "pass" (let
 * it through, as a TCP tunnel); it can be changed on the returned object
 * (the network moves behind another proxy). cut() ends every request and
 * tunnel in flight, as a network failure would; hold() makes new requests
 * wait, unanswered, until release(). upgrades counts the upgrades asked.
 */
export async function startHttpProxy(target, { upgrade = "403" } = {}) {
  const [host, port] = splitHostPort(target);
  const sockets = new Set();
  const upstream = new Set();
  const tunnels = new Set();
  let held = null;
  let upgrades = 0;
  const forward = (req, res) => {
    const up = http.request(
      { host, port, method: req.method, path: req.url, headers: req.headers, agent: false },
      (ures) => {
        res.writeHead(ures.statusCode, ures.statusMessage, ures.headers);
        res.flushHeaders();
        ures.pipe(res);
        ures.on("error", () => res.destroy());
      },
    );
    upstream.add(up);
    up.on("close", () => upstream.delete(up));
    up.on("error", () => res.destroy());
    res.on("close", () => up.destroy());
    req.pipe(up);
  };
  const server = http.createServer((req, res) => {
    if (held) held.push([req, res]);
    else forward(req, res);
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  server.on("upgrade", (req, socket, head) => {
    upgrades++;
    if (upgrade === "pass") {
      const up = net.connect(port, host, () => {
        const lines = [`${req.method} ${req.url} HTTP/1.1`];
        for (let i = 0; i < req.rawHeaders.length; i += 2) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
        up.write(lines.join("\r\n") + "\r\n\r\n");
        if (head.length > 0) up.write(head);
        up.pipe(socket);
        socket.pipe(up);
      });
      tunnels.add(up);
      const end = () => {
        up.destroy();
        socket.destroy();
        tunnels.delete(up);
      };
      up.on("error", end);
      up.on("close", end);
      socket.on("error", end);
      socket.on("close", end);
      return;
    }
    if (upgrade === "hold") return;
    if (upgrade === "drop") return socket.destroy();
    socket.end("HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 24\r\nConnection: close\r\n\r\nno websockets past here\n");
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port: own } = server.address();
  return {
    addr: `127.0.0.1:${own}`,
    url: `http://127.0.0.1:${own}/`,
    get upgrades() {
      return upgrades;
    },
    get upgrade() {
      return upgrade;
    },
    set upgrade(mode) {
      upgrade = mode;
    },
    /** cut ends every request and tunnel in flight and reports how many
     * there were. */
    cut() {
      const n = upstream.size + tunnels.size;
      for (const up of [...upstream, ...tunnels]) up.destroy();
      for (const s of [...sockets]) s.destroy();
      return n;
    },
    hold() {
      held ??= [];
    },
    release() {
      const waiting = held ?? [];
      held = null;
      for (const [req, res] of waiting) if (!res.destroyed) forward(req, res);
    },
    async stop() {
      this.cut();
      for (const [, res] of held ?? []) res.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * startNginx runs a private nginx (its own prefix directory, a free
 * loopback port, stopped by stop()) as a reverse proxy to target
 * ("host:port") in the plainest setup: HTTP/1.1 upstream, buffering on
 * (nginx's default), and no `Upgrade`/`Connection` forwarding, so that
 * it strips every WebSocket upgrade as many deployed proxies do. The
 * HTTP transports must get through it as they are (docs/TRANSPORTS.md).
 */
export async function startNginx(target, dir) {
  const bin = process.env.NGINX || (existsSync("/usr/sbin/nginx") ? "/usr/sbin/nginx" : "nginx");
  if (process.env.NGINX ? !existsSync(bin) : bin === "nginx" && !(await onPath("nginx"))) {
    throw new Error("no nginx: install Debian's (sudo apt-get install -y nginx-light), or set NGINX to its path");
  }
  const port = await freePort();
  await mkdir(join(dir, "logs"), { recursive: true });
  const root = process.getuid?.() === 0 ? "user root;\n" : "";
  const temp = ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map((k) => `${k}_temp_path ${join(dir, k)};`).join("\n  ");
  const conf = join(dir, "nginx.conf");
  await writeFile(
    conf,
    `${root}worker_processes 1;
daemon off;
pid ${join(dir, "nginx.pid")};
error_log ${join(dir, "logs", "error.log")} warn;
events { worker_connections 256; }
http {
  access_log off;
  ${temp}
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://${target};
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_read_timeout 60s;
    }
  }
}
`,
  );
  const proc = spawn(bin, ["-p", dir, "-c", conf], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  proc.stderr.on("data", (d) => (stderr += d));
  try {
    await waitPort(port, proc);
  } catch (e) {
    proc.kill("SIGKILL");
    throw new Error(`nginx did not start: ${stderr}`, { cause: e });
  }
  return {
    addr: `127.0.0.1:${port}`,
    url: `http://127.0.0.1:${port}/`,
    async stop() {
      if (proc.exitCode !== null) return;
      const exited = new Promise((r) => proc.on("exit", r));
      proc.kill("SIGQUIT");
      const t = setTimeout(() => proc.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(t);
    },
  };
}

async function onPath(name) {
  try {
    await promisify(execFile)("sh", ["-c", `command -v ${name}`]);
    return true;
  } catch {
    return false;
  }
}
