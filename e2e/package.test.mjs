// The browser SDK as an app team gets it: `npm pack` in clients/js, then a
// new app in a temporary directory outside this repository installs the
// tarball (its dependency, @bufbuild/protobuf, comes from the npm registry),
// type-checks clients/js/README.md's TypeScript against the installed
// declarations, and connects both builds to a real `corral serve`: the ESM
// one by its package name, the IIFE one (the <script> tag's) as a classic
// script that leaves the global `Corral`. They join a room, one publishes,
// both read the message back with the seq the ack gave.
//
// With CORRAL_SDK_TARBALL and CORRAL_BIN set (tools/release/check.sh sets
// them) it checks a release's tarball and binary instead of packing and
// building its own.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { basename, join, relative, resolve } from "node:path";
import { after, before, describe, test } from "node:test";
import { promisify } from "node:util";
import { buildCorral, removeDir, repoRoot, startCorral, tempDir } from "./harness.mjs";

const run = promisify(execFile);
const sdkDir = join(repoRoot, "clients", "js");
const npm = process.env.NPM || "npm";

describe("@corral-rt/client from a packed tarball", { timeout: 600_000 }, () => {
  let dir, app, tarball, packed, corral;

  before(async () => {
    dir = await tempDir("corral-pack-");
    if (process.env.CORRAL_SDK_TARBALL) {
      tarball = resolve(process.env.CORRAL_SDK_TARBALL);
      const { stdout } = await run("tar", ["-tzf", tarball], { maxBuffer: 16 << 20 });
      const files = stdout.split("\n").filter((p) => p && !p.endsWith("/"));
      packed = { filename: basename(tarball), files: files.map((p) => ({ path: p.replace(/^package\//, "") })) };
    } else {
      // prepack builds dist/ first, as `npm publish` would.
      const { stdout } = await run(npm, ["pack", "--json", "--pack-destination", dir], {
        cwd: sdkDir,
        maxBuffer: 16 << 20,
      });
      packed = JSON.parse(stdout.slice(stdout.indexOf("[")))[0];
      tarball = join(dir, packed.filename);
    }
    app = await tempDir("corral-app-");
    await writeFile(
      join(app, "package.json"),
      JSON.stringify({ name: "corral-sdk-app", version: "1.0.0", private: true, type: "module" }, null, 2),
    );
    corral = await startCorral(process.env.CORRAL_BIN ? resolve(process.env.CORRAL_BIN) : await buildCorral(dir));
  });

  after(async () => {
    await corral?.stop();
    await removeDir(app);
    await removeDir(dir);
  });

  test("the tarball holds the builds, the types and the README, and nothing else", () => {
    const files = packed.files.map((f) => f.path).sort();
    for (const want of [
      "README.md",
      "package.json",
      "dist/corral.js",
      "dist/corral.iife.js",
      "dist/types/index.d.ts",
      "dist/types/client.d.ts",
    ]) {
      assert.ok(files.includes(want), `${want} is not in the tarball: ${files.join(", ")}`);
    }
    const stray = files.filter((f) => !/^(README\.md|package\.json|dist\/(corral\.js|corral\.iife\.js|types\/.*\.d\.ts))$/.test(f));
    assert.deepEqual(stray, [], "files the package should not ship");
  });

  test("npm installs it, with @bufbuild/protobuf from the registry, outside the repository", async () => {
    assert.ok(relative(repoRoot, app).startsWith(".."), `${app} is inside ${repoRoot}`);
    await run(npm, ["install", "--no-audit", "--no-fund", tarball], { cwd: app, maxBuffer: 16 << 20 });
    const pkg = JSON.parse(await readFile(join(app, "node_modules", "@corral-rt", "client", "package.json"), "utf8"));
    assert.equal(pkg.private, undefined, "the package must be publishable");
    assert.ok(pkg.license, "the package needs a license field");
    const dep = JSON.parse(await readFile(join(app, "node_modules", "@bufbuild", "protobuf", "package.json"), "utf8"));
    assert.match(dep.version, /^2\./);
  });

  test("the README's TypeScript type-checks against the installed declarations", async () => {
    const readme = await readFile(join(sdkDir, "README.md"), "utf8");
    const blocks = [...readme.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
    assert.ok(blocks.length > 0, "no ```ts block in clients/js/README.md");
    const names = [];
    for (const [i, code] of blocks.entries()) {
      const name = `readme${i}.ts`;
      names.push(name);
      await writeFile(join(app, name), code);
    }
    await writeFile(
      join(app, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          lib: ["ES2022", "DOM"],
          strict: true,
          noEmit: true,
          types: [],
        },
        files: names,
      }),
    );
    const tsc = join(sdkDir, "node_modules", "typescript", "bin", "tsc");
    await run(process.execPath, [tsc, "-p", app], { cwd: app }).catch((e) => {
      assert.fail(`tsc failed on the README's TypeScript:\n${e.stdout}${e.stderr}`);
    });
  });

  test("the ESM and IIFE builds join, publish and read back from a real corral", async () => {
    assert.ok(existsSync(join(app, "node_modules", "@corral-rt", "client")), "install first");
    await writeFile(join(app, "app.mjs"), APP);
    const flags = typeof WebSocket === "undefined" ? ["--experimental-websocket"] : [];
    const { stdout } = await run(process.execPath, [...flags, "app.mjs", `ws://${corral.addr}/ws`], {
      cwd: app,
      timeout: 30_000,
    }).catch((e) => assert.fail(`app failed: ${e.message}\n${e.stdout}${e.stderr}\ncorral:\n${corral.logs.join("\n")}`));
    const got = JSON.parse(stdout.trim().split("\n").pop());
    assert.equal(got.iifeGlobal, "function");
    assert.equal(got.published.room, "lobby");
    assert.ok(got.published.seq >= 1);
    const want = { room: "lobby", seq: got.published.seq, sender: "alice", payload: { text: "from the tarball" } };
    assert.deepEqual(got.alice, want, "alice (ESM) reads back her message");
    assert.deepEqual(got.bob, want, "bob (IIFE) reads alice's message");
  });
});

// The app: alice imports the package by name; bob is the <script> tag
// build, run as a classic script in this realm.
const APP = `
import { Client } from "@corral-rt/client";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import vm from "node:vm";

const url = process.argv[2];
vm.runInThisContext(readFileSync(createRequire(import.meta.url).resolve("@corral-rt/client/iife"), "utf8"));
const iifeGlobal = typeof globalThis.Corral?.Client;

function firstMessage(client) {
  return new Promise((resolve) =>
    client.on("message", (m) => resolve({ room: m.room, seq: m.seq, sender: m.sender, payload: m.payload })),
  );
}

const bob = new globalThis.Corral.Client({ url, token: "bob", storage: null });
const alice = new Client({ url, token: "alice", storage: null });
const bobGot = firstMessage(bob);
const aliceGot = firstMessage(alice);
bob.connect();
alice.connect();
await bob.join("lobby");
await alice.join("lobby");
const published = await alice.publish("lobby", { text: "from the tarball" });
const out = { iifeGlobal, published: { room: published.room, seq: published.seq }, alice: await aliceGot, bob: await bobGot };
alice.close();
bob.close();
console.log(JSON.stringify(out));
`;
