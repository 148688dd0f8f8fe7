// Runs the integration suite inside a real VS Code: the VS Code server bundled in code-server
// serves the workbench to headless Chromium (driven by playwright-core); the page URL names this
// extension as extensionDevelopmentPath, and DSHD_VSCODE_TEST_SUITE names the bundled suite, which
// the extension (in development mode only) loads and runs inside the real Node extension host.
// Not VS Code's extensionTestsPath: with it the workbench refuses every modal dialog and shows no
// notification toasts, and both are things a person sees and the suites must check.
//
// The extension host exits 0 even when tests fail, so the suite writes its results to a file.
// The suite asks the driver to act on the page as a person would (screenshot, click, hover, type,
// press a key) by writing `<control>/<n>.req`; we do it and answer with `<control>/<n>.done`.
//
// usage: node run-vscode-tests.mjs --workspace DIR [--suite out/integration/X.js] [--artifacts DIR] [--timeout SECONDS] [--env K=V]... [--untrusted]
//   --untrusted: Workspace Trust stays on and the folder is not trusted (Restricted Mode)
//   --machine-settings JSON: settings of this machine (the person's own, unlike the workspace's)
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const extRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const repo = path.resolve(extRoot, '../..');
const cache = process.env.DSHD_VSCODE_CACHE || path.join(repo, '.cache/vscode');

const args = process.argv.slice(2);
const opt = (name, dflt) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : dflt; };
const workspace = path.resolve(opt('--workspace'));
const artifacts = path.resolve(opt('--artifacts', path.join(repo, 'artifacts/vscode')));
const timeoutMs = Number(opt('--timeout', '300')) * 1000;
const suite = path.resolve(extRoot, opt('--suite', 'out/integration/suite.js'));
const untrusted = args.includes('--untrusted');
const machineSettings = opt('--machine-settings');
const extraEnv = {};
args.forEach((a, i) => { if (a === '--env') { const [k, ...v] = args[i + 1].split('='); extraEnv[k] = v.join('='); } });

const node24 = path.join(cache, 'node24/bin/node');
const serverMain = path.join(cache, 'cs/node_modules/code-server/lib/vscode/out/server-main.js');
const { chromium } = createRequire(path.join(cache, 'tools/package.json'))('playwright-core');
const chromiumPath = process.env.DSHD_CHROMIUM || '/usr/bin/chromium';

const state = fs.mkdtempSync(path.join(os.tmpdir(), 'dshd-vscode-'));
const control = path.join(state, 'control');
const results = path.join(state, 'results.json');
fs.mkdirSync(control); fs.mkdirSync(artifacts, { recursive: true });
if (machineSettings) {
  fs.mkdirSync(path.join(state, 'srv/user/Machine'), { recursive: true });
  fs.writeFileSync(path.join(state, 'srv/user/Machine/settings.json'), machineSettings);
}

const t0 = Date.now();
const since = () => `${((Date.now() - t0) / 1000).toFixed(1)}s`;
const log = (...m) => console.log(`[vscode ${since()}]`, ...m);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function freePort() {
  const net = await import('node:net');
  return new Promise((resolve, reject) => {
    const srv = net.createServer(); srv.unref(); srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => { const { port } = srv.address(); srv.close(() => resolve(port)); });
  });
}

let server; let browser; let exitCode = 1;
function stopServer() {
  // The server spawns the extension host, which spawns dshd: stop the whole process group.
  if (server && server.exitCode === null) { try { process.kill(-server.pid, 'SIGTERM'); } catch {} }
}
process.on('exit', stopServer);
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => { stopServer(); process.exit(130); });

try {
  const port = await freePort();
  const serverLog = fs.openSync(path.join(artifacts, 'vscode-server.log'), 'w');
  server = spawn(node24, [serverMain, '--host', '127.0.0.1', '--port', String(port), '--without-connection-token',
    // --enable-smoke-test-driver: a built workbench honours the page's extensionDevelopmentPath only with it.
    '--accept-server-license-terms', '--enable-smoke-test-driver', '--disable-telemetry', ...(untrusted ? [] : ['--disable-workspace-trust']),
    '--server-data-dir', path.join(state, 'srv'), '--user-data-dir', path.join(state, 'srv/user'),
    '--extensions-dir', path.join(state, 'srv-ext')], {
    detached: true, // own process group, so stopServer reaches the extension host and dshd too
    stdio: ['ignore', serverLog, serverLog],
    env: { ...process.env, ...extraEnv, DSHD_VSCODE_TEST_CONTROL: control, DSHD_VSCODE_TEST_RESULTS: results, DSHD_VSCODE_TEST_SUITE: suite,
      XDG_DATA_HOME: path.join(state, 'xdg-data'), XDG_CONFIG_HOME: path.join(state, 'xdg-config') },
  });
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (server.exitCode !== null) throw new Error(`VS Code server exited with ${server.exitCode}; see vscode-server.log`);
    try { if ((await fetch(`${base}/version`)).ok) break; } catch {}
    if (i > 300) throw new Error('VS Code server did not answer in 60s');
    await sleep(200);
  }
  log('VS Code server up on', base);

  const auth = new URL(base).host;
  const payload = [['extensionDevelopmentPath', `vscode-remote://${auth}${extRoot}`]];
  const url = `${base}/?folder=${encodeURIComponent(workspace)}&payload=${encodeURIComponent(JSON.stringify(payload))}`;
  browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  const page = await browser.newPage({ viewport: { width: 1400, height: 850 } });
  const consoleLog = fs.createWriteStream(path.join(artifacts, 'browser-console.log'));
  page.on('console', (m) => consoleLog.write(`[${m.type()}] ${m.text()}\n`));
  await page.goto(url);
  log('workbench page opened');

  const deadline = Date.now() + timeoutMs;
  while (!fs.existsSync(results)) {
    if (Date.now() > deadline) {
      await page.screenshot({ path: path.join(artifacts, 'timeout.png') }).catch(() => {});
      const partial = fs.existsSync(`${results}.partial`) ? JSON.parse(fs.readFileSync(`${results}.partial`, 'utf8')) : [];
      for (const t of partial) log(t.ok ? 'PASS' : 'FAIL', `${t.name} (${t.ms} ms)`, t.ok ? '' : `\n${t.error}`);
      throw new Error(`no results after ${timeoutMs / 1000}s (${partial.length} tests finished; the next one hung)`);
    }
    for (const f of fs.readdirSync(control).filter((n) => n.endsWith('.req'))) {
      const name = f.slice(0, -4);
      const req = JSON.parse(fs.readFileSync(path.join(control, f), 'utf8') || '{}');
      fs.unlinkSync(path.join(control, f));
      // Written aside then renamed: the extension host polls for `.done` and must never
      // read it half-written.
      const reply = (r) => {
        fs.writeFileSync(path.join(control, `${name}.done.tmp`), JSON.stringify(r));
        fs.renameSync(path.join(control, `${name}.done.tmp`), path.join(control, `${name}.done`));
      };
      try {
        await sleep(req.settleMs ?? 500); // let the workbench paint what the suite just did
        // `frame: "chat"`: inside the chat view's webview (an iframe in an iframe), else the workbench.
        const scope = req.frame === 'chat'
          ? page.frameLocator('iframe.webview[src*="extensionId=dshd.dshd-vscode"]').frameLocator('iframe#active-frame')
          : page;
        const target = () => scope.locator(req.selector).first();
        if (req.action === 'screenshot') {
          const out = path.join(artifacts, `${req.name}.png`);
          if (req.selector) await target().screenshot({ path: out });
          else await page.screenshot({ path: out });
          log('screenshot', out);
        } else if (req.action === 'click') {
          await target().click({ timeout: 10000 });
        } else if (req.action === 'hover') {
          await target().hover({ timeout: 10000 });
        } else if (req.action === 'type') {
          // With a selector: wait until that input is on screen and type into it, not into whatever has focus.
          // `delay`: ms between keys (a person typing; the suite acts while it goes on).
          if (req.selector) await target().focus({ timeout: 15000 });
          await page.keyboard.type(req.text, { delay: req.delay ?? 5 });
        } else if (req.action === 'press') {
          await page.keyboard.press(req.key);
        } else if (req.action === 'dump') {
          // The page's (or one element's) HTML, for finding selectors when writing tests.
          const html = req.selector ? await target().evaluate((e) => e.outerHTML) : await page.content();
          fs.writeFileSync(path.join(artifacts, `${req.name}.html`), html);
        } else if (req.action === 'value') {
          // nothing to do: the reply carries the input's value and whether it has the focus below
        } else if (req.action === 'html') {
          // nothing to do: the reply carries the element's outerHTML below
        } else if (req.action === 'count' || req.action === 'texts') {
          // nothing to do: every reply carries the count (and texts) of req.selector below
        } else {
          throw new Error(`unknown driver action ${req.action}`);
        }
        const statusTexts = await page.locator('#workbench\\.parts\\.statusbar .statusbar-item').allInnerTexts();
        const count = req.selector ? await scope.locator(req.selector).count() : undefined;
        const texts = req.action === 'texts' ? await scope.locator(req.selector).allInnerTexts() : undefined;
        const html = req.action === 'html' ? await target().evaluate((e) => e.outerHTML) : undefined;
        const input = req.action === 'value'
          ? await target().evaluate((e) => ({ value: e.value, focused: e.ownerDocument.activeElement === e && e.ownerDocument.hasFocus() }))
          : undefined;
        reply({ ok: true, statusTexts: statusTexts.filter((t) => t.trim()), count, texts, html, ...(input ?? {}) });
      } catch (e) {
        reply({ ok: false, error: String(e) });
      }
    }
    await sleep(200);
  }
  const r = JSON.parse(fs.readFileSync(results, 'utf8'));
  fs.writeFileSync(path.join(artifacts, 'results.json'), JSON.stringify(r, null, 2));
  for (const t of r.results) log(t.ok ? 'PASS' : 'FAIL', `${t.name} (${t.ms} ms)`, t.ok ? '' : `\n${t.error}`);
  log(`${r.passed} passed, ${r.failed} failed`);
  exitCode = r.failed === 0 && r.passed > 0 ? 0 : 1;
} catch (e) {
  console.error(`[vscode ${since()}] harness error:`, e && e.stack || e);
  exitCode = 2;
} finally {
  if (browser) await browser.close().catch(() => {});
  stopServer();
  if (!process.env.DSHD_VSCODE_KEEP_STATE) fs.rmSync(state, { recursive: true, force: true });
}
process.exit(exitCode);
