// Builds what the npm package ships and the demo's copy of the SDK:
//   dist/corral.js       ESM for bundlers and Node; @bufbuild/protobuf stays
//                        an import (a dependency), so an app holds one copy
//   dist/corral.iife.js  everything in one file for a <script> tag; the
//                        exports are on the global `Corral`
//   ../../web/assets/corral.js  ESM with everything inlined, for the demo
//                        page that the corral binary embeds (committed, so
//                        that `go build` needs no npm)
// Type declarations (dist/types) come from tsc.
import { build } from "esbuild";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const pkgDir = join(dirname(fileURLToPath(import.meta.url)), "..");
const pkg = JSON.parse(await readFile(join(pkgDir, "package.json"), "utf8"));

const common = {
  absWorkingDir: pkgDir,
  entryPoints: ["src/index.ts"],
  bundle: true,
  target: "es2020",
  platform: "browser",
  charset: "utf8",
  legalComments: "none",
  banner: {
    js: `// ${pkg.name} ${pkg.version}: corral's browser SDK. Built from clients/js by\n// \`npm run build\`; do not edit.`,
  },
  logLevel: "warning",
};

await Promise.all([
  build({
    ...common,
    outfile: join(pkgDir, "dist", "corral.js"),
    format: "esm",
    external: Object.keys(pkg.dependencies ?? {}).flatMap((d) => [d, `${d}/*`]),
  }),
  build({
    ...common,
    outfile: join(pkgDir, "dist", "corral.iife.js"),
    format: "iife",
    globalName: "Corral",
  }),
  build({
    ...common,
    outfile: join(pkgDir, "..", "..", "web", "assets", "corral.js"),
    format: "esm",
  }),
]);
