// Bundles the extension (dist/extension.js) and the test entries (out/unit/*.test.js for node's test
// runner, out/integration/suite.js for the real VS Code extension host) with esbuild.
import { build } from 'esbuild';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const common = { bundle: true, platform: 'node', format: 'cjs', target: 'node20', sourcemap: 'inline', logLevel: 'warning', absWorkingDir: root };
const unitTests = readdirSync(join(root, 'test/unit')).filter((f) => f.endsWith('.test.ts')).map((f) => `test/unit/${f}`);

await Promise.all([
  build({ ...common, entryPoints: ['src/extension.ts'], outfile: 'dist/extension.js', external: ['vscode'], sourcemap: false, minify: false }),
  build({ ...common, entryPoints: unitTests, outdir: 'out/unit' }),
  build({ ...common, entryPoints: ['test/integration/suite.ts', 'test/integration/withoutDaemon.ts'], outdir: 'out/integration', external: ['vscode'] }),
]);
