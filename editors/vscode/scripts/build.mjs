// Bundles the extension (dist/extension.js), the chat view's page (dist/webview.js, for the browser,
// and its stylesheet dist/chat.css) and the test entries (out/unit/*.test.js for node's test runner,
// out/integration/*.js for the real VS Code extension host) with esbuild.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const common = { bundle: true, platform: 'node', format: 'cjs', target: 'node20', sourcemap: 'inline', logLevel: 'warning', absWorkingDir: root };
const unitTests = readdirSync(join(root, 'test/unit')).filter((f) => f.endsWith('.test.ts')).map((f) => `test/unit/${f}`);

rmSync(join(root, 'out'), { recursive: true, force: true }); // no test of a deleted source lingers
mkdirSync(join(root, 'dist'), { recursive: true });
copyFileSync(join(root, 'media/chat.css'), join(root, 'dist/chat.css'));
await Promise.all([
  build({ ...common, entryPoints: ['src/extension.ts'], outfile: 'dist/extension.js', external: ['vscode'], sourcemap: false, minify: false }),
  build({ bundle: true, platform: 'browser', format: 'iife', target: 'es2022', logLevel: 'warning', absWorkingDir: root,
    entryPoints: ['webview/main.ts'], outfile: 'dist/webview.js', minify: true, legalComments: 'linked' }),
  build({ ...common, entryPoints: unitTests, outdir: 'out/unit' }),
  build({ ...common, entryPoints: ['test/integration/suite.ts', 'test/integration/withoutDaemon.ts', 'test/integration/chat.ts', 'test/integration/models.ts', 'test/integration/untrusted.ts', 'test/integration/hands.ts', 'test/integration/shared.ts', 'test/integration/twoEditors.ts', 'test/integration/chatPages.ts', 'test/integration/plans.ts', 'test/integration/checkpoints.ts', 'test/integration/exampleWorkspace.ts', 'test/integration/daemonRestart.ts', 'test/integration/attribution.ts'], outdir: 'out/integration', external: ['vscode'] }),
]);
