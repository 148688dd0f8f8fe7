"""Architecture rule (docs/architecture.md): a layer imports only itself and inner layers,
and layers 1-4 run without pygls, lsprotocol or the wire package."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "server" / "dshd"

# dshd subpackage -> layer number
LAYERS = {
    "errors": 0,
    "formats": 0,  # RFC 3339 timestamps and kebab-case codes, defined once
    "config_tables": 0,  # what a config table is; each feature owns its own table
    "log": 1,
    "sandbox": 1,  # OS sandbox for commands: knows nothing of sessions or agents
    "folds": 2,
    "services": 3,
    "agent": 4,
    "models": 4,  # model adapters (providers); SDKs imported only inside a provider's module
    "tools": 4,  # workspace tools (a plugin family)
    "plugins": 4,
    "api": 5,  # front-door neutral: fan-out and the chat-item projection; no wire package
    "daemon": 5,
    "acp": 5,
    "demo": 6,
    "cli": 6,
    "client": 6,
}
WIRE_ONLY = ("pygls", "lsprotocol", "dshd_protocol")


def _module_layer(path: Path) -> tuple[str, int]:
    rel = path.relative_to(PACKAGE)
    top = rel.parts[0].removesuffix(".py")
    return top, LAYERS.get(top, 6 if top != "__init__" else 0)


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


SOURCES = sorted(p for p in PACKAGE.rglob("*.py"))


def test_every_package_module_has_a_layer():
    unknown = {p.relative_to(PACKAGE).parts[0] for p in SOURCES} - {f"{k}.py" for k in LAYERS} - set(LAYERS) - {"__init__.py", "__main__.py"}
    assert not unknown, f"modules outside the layer map: {unknown}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_layer_imports_point_inwards(path: Path):
    top, layer = _module_layer(path)
    for name in _imports(path):
        root = name.split(".")[0]
        if layer <= 4:
            assert root not in WIRE_ONLY + ("acp",), f"{path.name} (layer {layer}) imports {name}"
        if root == "dshd" and name.count(".") >= 1:
            target = name.split(".")[1]
            target_layer = LAYERS.get(target, 0)
            if top == "plugins" and target == "agent" or top == "agent" and target == "plugins":
                # The agent loop never imports a plugin; plugins may use agent interfaces.
                assert top == "plugins", f"{path} imports {name}: the agent loop depends on no plugin"
                continue
            assert target_layer <= layer, f"{path.relative_to(PACKAGE)} (layer {layer}) imports {name} (layer {target_layer})"
            # The two front doors never import each other; api/ serves both and imports neither.
            doors = {"daemon", "acp"}
            if top in doors | {"api"} and target in doors:
                assert target == top, f"{path.relative_to(PACKAGE)} imports {name}: front doors stay apart"
        if top == "api":
            assert root not in WIRE_ONLY + ("acp",), f"{path.name} (api) imports {name}: api/ knows no wire"
        if top == "models":
            # models/ owns its [model] table (models/config.py): it reads nothing of the agent,
            # not even a type, so the arrow never points back up to agent/config.py.
            assert not name.startswith("dshd.agent"), f"{path.relative_to(PACKAGE)} imports {name}: models/ knows no agent"


def test_core_layers_import_without_pygls():
    code = (
        "import sys, importlib, pkgutil\n"
        "import dshd\n"
        "for sub in ('log', 'sandbox', 'folds', 'services', 'agent', 'models', 'tools', 'plugins'):\n"
        "    try:\n"
        "        pkg = importlib.import_module('dshd.' + sub)\n"
        "    except ModuleNotFoundError as exc:\n"
        "        if exc.name == 'dshd.' + sub: continue  # not built yet\n"
        "        raise\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, 'dshd.' + sub + '.'):\n"
        "        importlib.import_module(m.name)\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('pygls', 'lsprotocol', 'dshd_protocol', 'acp')]\n"
        "assert not bad, bad\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _import_graph() -> dict[str, set[str]]:
    """dshd module -> dshd modules it imports (type-only imports included: they are a
    dependency of the design even when Python never runs them). ``from pkg import mod``
    counts as an import of ``pkg.mod``, not of the package's ``__init__``."""
    modules = {_module_name(p): p for p in SOURCES}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        names: list[str] = []
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names += [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules]
                names += subs or [node.module]
        targets = set()
        for imported in names:
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            if imported.count(".") >= 1 and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                out.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


# Import circles still to be ended (HOUSE: a narrow context per seam). No new ones: a
# module may leave this list, never join it.
KNOWN_CIRCLES = {
    "dshd.agent.commands", "dshd.agent.loop",  # Command.run takes the Agent
    "dshd.daemon.app", "dshd.daemon.handlers", "dshd.daemon.server",  # the rpc_errors fold-in is still to do
}


def test_no_new_import_circles():
    cycles = _cycles(_import_graph())
    members = set().union(*cycles) if cycles else set()
    assert members <= KNOWN_CIRCLES, f"import circles beyond the known ones: {[sorted(c) for c in cycles]}"
    # The seams a tool sees never reach back to the loop.
    for seam in ("dshd.agent.tools", "dshd.agent.approvals", "dshd.agent.questions", "dshd.tools.files"):
        assert seam not in members, seam
