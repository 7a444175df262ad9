// docs/SDKS.md's TypeScript backend, built as the doc says: in a new
// directory outside this repository, with corral's proto/ at
// ../corral/proto (a link to this checkout), the section's code blocks
// whose first line names a file (# buf.gen.yaml, // src/backend.ts,
// // tsconfig.json) are written to those files, and the section's npm and
// npx commands run in order (npm init and install from the npm registry,
// npx buf generate, npx tsc). Running the backend needs a corral with an
// API key, which this test does not start: tsc passing is the point.
// The Go snippets are built by sdksdoc_test.go.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, readFile, symlink, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { after, describe, test } from "node:test";
import { promisify } from "node:util";
import { removeDir, repoRoot, tempDir } from "./harness.mjs";

const run = promisify(execFile);
const SECTION = "## TypeScript (Node.js backends)";

describe("docs/SDKS.md's TypeScript backend", { timeout: 600_000 }, () => {
  let dir;
  after(() => removeDir(dir));

  test("compiles as written", async () => {
    const doc = await readFile(join(repoRoot, "docs", "SDKS.md"), "utf8");
    const start = doc.indexOf(SECTION);
    assert.ok(start >= 0, `no "${SECTION}" in docs/SDKS.md`);
    const end = doc.indexOf("\n## ", start + SECTION.length);
    const section = doc.slice(start, end < 0 ? undefined : end);

    dir = await tempDir("corral-sdkdoc-");
    await symlink(repoRoot, join(dir, "corral"));
    const app = join(dir, "backend");
    await mkdir(app);

    const steps = [];
    for (const [, lang, code] of section.matchAll(/^```([a-z]*)\n([\s\S]*?)^```/gm)) {
      const first = code.split("\n", 1)[0];
      const named = /^(?:#|\/\/) ([\w./-]+\.[a-z]+)$/.exec(first);
      if (lang === "sh") {
        for (const line of code.split("\n")) {
          if (/^(npm|npx) /.test(line)) steps.push({ cmd: line });
        }
      } else if (named) {
        steps.push({ file: named[1], code });
      }
    }
    const files = steps.filter((s) => s.file).map((s) => s.file);
    for (const want of ["buf.gen.yaml", "src/backend.ts", "tsconfig.json"]) {
      assert.ok(files.includes(want), `the section gives no ${want} (files: ${files.join(", ")})`);
    }
    assert.ok(steps.some((s) => /^npx tsc\b/.test(s.cmd ?? "")), "the section never runs npx tsc");

    for (const step of steps) {
      if (step.file) {
        await mkdir(dirname(join(app, step.file)), { recursive: true });
        await writeFile(join(app, step.file), step.code);
        continue;
      }
      await run("bash", ["-euo", "pipefail", "-c", step.cmd], { cwd: app, maxBuffer: 16 << 20, timeout: 300_000 }).catch(
        (e) => assert.fail(`\`${step.cmd}\` failed:\n${e.stdout}${e.stderr}`),
      );
    }
    assert.ok(existsSync(join(app, "dist", "backend.js")), "npx tsc wrote no dist/backend.js");
  });
});
