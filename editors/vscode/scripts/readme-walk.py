"""Walks the VS Code README as a new person would, and times it: a fresh clone, `./run vsix`, the
.vsix installed into a real VS Code (code-server), the settings the README names (dshd's path, an
OpenAI-compatible model server: a loopback one here, scripted with a plan), then the steps of "Your
first plan review": open the folder, open the chat, type `/plan …`, see the review, approve it.
Screenshots go to artifacts/vscode/readme-walk/. Not a test: prints the figures.

usage: .venv/bin/python editors/vscode/scripts/readme-walk.py [--keep]
   DSHD_VSCODE_CACHE names the toolchain cache to reuse (Node 24, code-server, vsce), as ./run does.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXT = Path(__file__).resolve().parents[1]
REPO = EXT.parents[1]
sys.path.insert(0, str(REPO / "tests"))
from loopback_models import Call, LoopbackModelServer, Reply  # noqa: E402

CACHE = Path(os.environ.get("DSHD_VSCODE_CACHE", REPO / ".cache" / "vscode"))
NODE = CACHE / "node24" / "bin" / "node"
CODE_SERVER = CACHE / "cs" / "node_modules" / ".bin" / "code-server"
ARTIFACTS = REPO / "artifacts" / "vscode" / "readme-walk"
PLAN = "# Plan: a --verbose flag\n\n1. Add `--verbose` to the argument parser.\n2. Log each request when it is set.\n3. Test both ways.\n"

BROWSER = r"""
const { chromium } = require(process.env.PLAYWRIGHT);
const [url, out] = process.argv.slice(1);
const t0 = Date.now();
const at = () => ((Date.now() - t0) / 1000).toFixed(1);
(async () => {
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  const page = await browser.newPage({ viewport: { width: 1400, height: 850 } });
  await page.goto(url);
  // README step 2: the status bar says "no session" once dshd runs.
  await page.locator('#workbench\\.parts\\.statusbar .statusbar-item:has-text("no session")').first().waitFor({ timeout: 120000 });
  console.log(`${at()} s: dshd runs (status bar: no session)`);
  await page.screenshot({ path: `${out}/1-started.png` });
  // Step 3: the DSH icon in the activity bar.
  await page.locator('.activitybar .action-item a[aria-label^="DSH"]').first().click();
  const chat = page.frameLocator('iframe.webview[src*="extensionId=dshd.dshd-vscode"]').frameLocator('iframe#active-frame');
  await chat.locator('#prompt').waitFor({ timeout: 60000 });
  console.log(`${at()} s: chat open`);
  // Step 4: /plan and the prompt, Enter.
  await chat.locator('#prompt').click();
  await page.keyboard.type('/plan Add a --verbose flag to the command line', { delay: 20 });
  await page.keyboard.press('Enter');
  // Step 5: the review, on the card.
  const card = chat.locator('#log [data-kind="plan-review"].outcome-pending button.approve');
  await card.waitFor({ timeout: 120000 });
  console.log(`${at()} s: plan review on screen`);
  await page.waitForTimeout(1000);
  await page.screenshot({ path: `${out}/2-plan-review.png` });
  await page.waitForTimeout(5000); // the rendered preview (a webview) takes a moment in a fresh profile
  await page.screenshot({ path: `${out}/2b-plan-review-rendered.png` });
  await card.click();
  await chat.locator('#log [data-kind="plan-review"].outcome-approved').waitFor({ timeout: 60000 });
  await chat.locator('#log [data-kind="turn-end"]').first().waitFor({ timeout: 60000 });
  console.log(`${at()} s: approved, the agent went on`);
  await page.waitForTimeout(1000);
  await page.screenshot({ path: `${out}/3-approved.png` });
  await browser.close();
})().catch((e) => { console.error('FAILED', e); process.exit(1); });
"""


def timed(what: str, cmd: list[str], **kw) -> float:
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    took = time.monotonic() - t0
    if proc.returncode != 0:
        sys.exit(f"{what} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    print(f"{took:6.1f} s  {what}")
    return took


def main() -> None:
    keep = "--keep" in sys.argv
    base = Path(tempfile.mkdtemp(prefix="dshd-readme-walk-"))
    clone, project, state = base / "dshd", base / "my-project", base / "code-server"
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)
    env = {**os.environ, "DSHD_VSCODE_CACHE": str(CACHE), "XDG_DATA_HOME": str(state / "xdg-data"), "XDG_CONFIG_HOME": str(state / "xdg-config")}
    total = timed("git clone", ["git", "clone", "-q", str(REPO), str(clone)])
    total += timed("./run vsix (venv with dshd, the .vsix)", ["./run", "vsix"], cwd=clone, env=env)
    vsix = next((clone / "dist").glob("dshd-vscode-*.vsix"))
    dirs = ["--user-data-dir", str(state / "data"), "--extensions-dir", str(state / "ext")]
    node_path = {**env, "PATH": f"{NODE.parent}{os.pathsep}{env['PATH']}"}
    total += timed("code --install-extension", [str(CODE_SERVER), *dirs, "--install-extension", str(vsix)], env=node_path)
    # A project of the person's own, and the README's settings (user settings, not the folder's).
    project.mkdir()
    (project / "cli.py").write_text("import argparse\n\nparser = argparse.ArgumentParser()\n")
    key_env = "WALK_MODEL_KEY"
    with LoopbackModelServer("openai") as server:
        server.script(
            Reply(text="Here is my plan.", tool_calls=[Call("exit_plan_mode", {"plan": PLAN})], chunk_delay=0.02),
            Reply(text="Plan approved: adding the flag."),
        )
        user = state / "data" / "User"
        user.mkdir(parents=True, exist_ok=True)
        (user / "settings.json").write_text(json.dumps({
            "dsh.server.command": str(clone / ".venv" / "bin" / "dshd"),
            "dsh.model.provider": "openai", "dsh.model.name": "loopback-model",
            "dsh.model.baseUrl": server.base_url, "dsh.model.apiKeyEnv": key_env,
            "workbench.startupEditor": "none", "chat.disableAIFeatures": True,
        }, indent=1))
        port = 18000 + os.getpid() % 1000
        (state / "cs.yaml").write_text(f"bind-addr: 127.0.0.1:{port}\nauth: none\ncert: false\n")
        server_proc = subprocess.Popen(
            [str(CODE_SERVER), "--config", str(state / "cs.yaml"), *dirs, "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust"],
            env={**node_path, key_env: "sk-walk-not-a-real-key"}, stdout=open(ARTIFACTS / "code-server.log", "w"), stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            playwright = CACHE / "tools" / "node_modules" / "playwright-core"
            t0 = time.monotonic()
            proc = subprocess.run([str(NODE), "-e", BROWSER, f"http://127.0.0.1:{port}/?folder={project}", str(ARTIFACTS)],
                                  env={**node_path, "PLAYWRIGHT": str(playwright)}, capture_output=True, text=True, timeout=600)
            print(proc.stdout, end="")
            if proc.returncode != 0:
                sys.exit(f"the walk failed:\n{proc.stderr[-3000:]}")
            took = time.monotonic() - t0
            print(f"{took:6.1f} s  open the folder → chat → /plan → review → approve (browser, incl. code-server start)")
            total += took
        finally:
            os.killpg(server_proc.pid, 15)
            server_proc.wait(10)
    print(f"{total:6.1f} s  in all, from clone to an approved plan (reusing the toolchain cache {CACHE})")
    print(f"screenshots: {ARTIFACTS}")
    if not keep:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
