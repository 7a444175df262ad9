// Bundles the SDK into one ESM file, dist/corral.js, and copies it to
// web/assets/ for the demo page that the corral binary embeds (committed,
// so that `go build` needs no npm). Type declarations come from tsc.
import { build } from "esbuild";
import { copyFile, mkdir, readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const pkgDir = join(dirname(fileURLToPath(import.meta.url)), "..");
const pkg = JSON.parse(await readFile(join(pkgDir, "package.json"), "utf8"));
const out = join(pkgDir, "dist", "corral.js");
const demoCopy = join(pkgDir, "..", "..", "web", "assets", "corral.js");

await build({
  absWorkingDir: pkgDir,
  entryPoints: ["src/index.ts"],
  outfile: out,
  bundle: true,
  format: "esm",
  target: "es2020",
  platform: "browser",
  charset: "utf8",
  legalComments: "none",
  banner: {
    js: `// ${pkg.name} ${pkg.version}: corral's browser SDK. Built from clients/js by\n// \`npm run build\`; do not edit.`,
  },
  logLevel: "warning",
});
await mkdir(dirname(demoCopy), { recursive: true });
await copyFile(out, demoCopy);
