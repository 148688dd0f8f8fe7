"""The architecture's rules (docs/architecture.md, "Layers"), checked with ``ast``, each
check with a positive control: every top-level module of the package has a layer; a
layer imports only itself and inner layers; layers 1-4 (and api/, transport/) run
without pygls, lsprotocol, the ACP SDK or the wire package, save its standard-library
vocabulary (dshd_protocol.errors, dshd_protocol.ids); the two doors never import each
other; models/ imports nothing of agent/; a feature's config table stays light; no import
circle (deferred and type-only imports count); the tool seams never reach the loop; and
the wire's shapes stay at the doors: no camelCase struct field or ``rename=`` below
them, no copy of the error kinds or the token patterns. (The forwarder outside the
package, server/dshd_connect.py, is held to the standard library by
tests/cli/test_connect_cli.py.)"""

from __future__ import annotations

import ast
import re
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
    "checkpoints": 1,  # the shadow repository of file snapshots: knows files and the git binary, nothing of sessions
    "folds": 2,
    "services": 3,
    "agent": 4,
    "models": 4,  # model adapters (providers); SDKs imported only inside a provider's module
    "tools": 4,  # workspace tools (a plugin family)
    "plugins": 4,
    "mcp": 4,  # MCP tool servers, the client side; the SDK imported only when a server starts
    "api": 5,  # front-door neutral: the Host, the hub's fan-out, chat items and marks, the words; no wire package
    "daemon": 5,
    "acp": 5,
    "transport": 5,  # the stdio plumbing both doors share; imports neither door nor a wire package
    "demo": 6,
    "cli": 6,
    "client": 6,
    "shared_daemon": 6,  # `dshd daemon`: the socket, the lock, both doors on one Host
    "goal_cli": 6,  # `dshd goal`: on the log, or through the shared daemon that holds the session
    "run_cli": 6,  # `dshd run`: a headless client of the dsh door, in process or through the shared daemon
    "daemon_cli": 6,  # `dshd daemon status|stop|restart`: the shared daemon's control door
    "client_framing": 6,  # LSP framing for goal_cli and run_cli (standard library only)
}
WIRE_ONLY = ("pygls", "lsprotocol", "dshd_protocol")
# The wire package's vocabulary (standard library only): the error kinds and the tokens
# (session ids, kebab-case codes). Every layer takes them from there instead of keeping
# a copy; nothing else of the wire package reaches below the doors.
WIRE_VOCABULARY = ("dshd_protocol.errors", "dshd_protocol.ids")
PROTOCOL = PACKAGE.parents[1] / "protocol" / "dshd_protocol"


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


def _is_config_table(path: Path) -> bool:
    """A feature's own config table: ``<feature>/config.py`` or ``plugins/<name>_config.py``
    (``agent/config.py`` is the composer, not a table)."""
    rel = path.relative_to(PACKAGE)
    return rel.name.endswith("_config.py") or rel.name == "config.py" and rel.parts[0] != "agent"


def test_every_feature_table_is_composed():
    """Positive control for the table rule above: it has tables to look at, and each one
    is in the composed Config (nothing declares a table the loader never reads)."""
    out = subprocess.run(
        [sys.executable, "-c", "from dshd.agent.config import TABLES; print(' '.join(t.name for t in TABLES))"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    tables = [p for p in SOURCES if _is_config_table(p)]
    assert len(tables) >= 5, tables
    assert set(out.stdout.split()) == {"plan", "goals", "model", "agent", "tools", "context", "daemon", "checkpoints", "mcp"}


def test_every_package_module_has_a_layer():
    unknown = {p.relative_to(PACKAGE).parts[0] for p in SOURCES} - {f"{k}.py" for k in LAYERS} - set(LAYERS) - {"__init__.py", "__main__.py"}
    assert not unknown, f"modules outside the layer map: {unknown}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_layer_imports_point_inwards(path: Path):
    top, layer = _module_layer(path)
    for name in _imports(path):
        root = name.split(".")[0]
        if name in WIRE_VOCABULARY:
            continue
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
            if top in doors | {"api", "transport"} and target in doors:
                assert target == top, f"{path.relative_to(PACKAGE)} imports {name}: front doors stay apart"
        if top in ("api", "transport"):
            assert root not in WIRE_ONLY + ("acp",), f"{path.name} ({top}) imports {name}: {top}/ knows no wire"
        if top == "models":
            # models/ owns its [model] table (models/config.py): it reads nothing of the agent,
            # not even a type, so the arrow never points back up to agent/config.py.
            assert not name.startswith("dshd.agent"), f"{path.relative_to(PACKAGE)} imports {name}: models/ knows no agent"
        if _is_config_table(path) and root == "dshd":
            # A feature's table is light: the composer (agent/config.py) imports every one,
            # so a table that reached the agent, a plugin or a door would close a circle.
            assert name.split(".")[1] not in ("agent", "plugins", "api", "daemon", "acp", "transport") or name == "dshd.agent.turn_config", (
                f"{path.relative_to(PACKAGE)} (a config table) imports {name}"
            )


def test_core_layers_import_without_pygls():
    code = (
        "import sys, importlib, pkgutil\n"
        "import dshd\n"
        "for sub in ('log', 'sandbox', 'folds', 'services', 'agent', 'models', 'tools', 'plugins', 'mcp'):\n"
        "    try:\n"
        "        pkg = importlib.import_module('dshd.' + sub)\n"
        "    except ModuleNotFoundError as exc:\n"
        "        if exc.name == 'dshd.' + sub: continue  # not built yet\n"
        "        raise\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, 'dshd.' + sub + '.'):\n"
        "        importlib.import_module(m.name)\n"
        "vocabulary = {'dshd_protocol', 'dshd_protocol.errors', 'dshd_protocol.ids'}\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('pygls', 'lsprotocol', 'dshd_protocol', 'acp', 'cattrs') and m not in vocabulary]\n"
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


# No import circle among dshd modules. Every import counts: at the top, inside a
# function, under TYPE_CHECKING. An import deferred for start-up cost is still a
# dependency of the design, so it gets no exception: what two modules share moves to a
# third (docs/choices.md).


def test_no_import_circles():
    cycles = _cycles(_import_graph())
    assert not cycles, f"import circles: {[sorted(c) for c in cycles]}"


def test_the_circle_finder_sees_circles():
    """Positive control: a two-module circle, a three-module one and a module that only
    points into a circle (not part of it) are told apart."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"a", "d"}, "d": {"e"}, "e": {"f"}, "f": {"d"}, "g": set()}
    assert sorted(map(sorted, _cycles(graph))) == [["a", "b"], ["d", "e", "f"]]


def test_the_import_graph_counts_deferred_and_type_only_imports():
    """Positive control: the graph has the edges of imports inside a function and under
    TYPE_CHECKING, so a circle closed by one of them is found."""
    graph = _import_graph()
    deferred = [
        (name, target)
        for name, path in ((_module_name(p), p) for p in SOURCES)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.If))
        for inner in ast.walk(node)
        if isinstance(inner, ast.ImportFrom) and inner.module and inner.module.startswith("dshd.") and inner.level == 0
        for target in [inner.module]
    ]
    assert deferred, "no deferred dshd import to check the graph with"
    for name, target in deferred:
        assert any(t == target or t.startswith(target + ".") or target.startswith(t + ".") for t in graph[name]), (name, target)
    # The seams a tool sees never reach back to the loop.
    for seam in ("dshd.agent.tools", "dshd.agent.approvals", "dshd.agent.questions", "dshd.tools.files"):
        assert "dshd.agent.loop" not in _reachable(graph, seam), seam


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


# ---- wire shapes only at the doors (issue 17 #2) ---------------------------------------------
# The core hands the doors plain values (snake_case, no wire names); each door has one
# converter (daemon/to_wire.py, acp/convert.py). What may not come back below the doors:
# struct fields named as the wire names them, a copy of the error kinds, a copy of the
# protocol's token patterns.

DOORS = ("daemon", "acp")
# Formats the core itself owns, whose names are camelCase by their own documents: the log's
# lines (docs/log-format.md), the checkpoint file, and the store's peek at a line's callId.
# The config tables (the config file's keys, docs/configuration.md) are found by name.
CORE_FORMATS = {"folds/events.py", "folds/replay.py", "services/store.py"}
_CAMEL = re.compile(r"^[a-z]+[A-Z]")


def _camel_fields(path: Path) -> list[str]:
    """``Class.field`` of every annotated class field named in camelCase, and every class
    made with ``rename=`` (a struct that writes the wire's names)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ClassDef):
            found += [
                f"{node.name}.{stmt.target.id}"
                for stmt in node.body
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and _CAMEL.match(stmt.target.id)
            ]
            found += [f"{node.name}(rename=...)" for kw in node.keywords if kw.arg == "rename"]
    return found


def _below_the_doors(path: Path) -> bool:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] not in DOORS and _module_layer(path)[1] <= 5


def test_no_wire_names_in_core_structs():
    offenders = {
        str(p.relative_to(PACKAGE)): names
        for p in SOURCES
        if _below_the_doors(p) and not _is_config_table(p) and str(p.relative_to(PACKAGE)) not in CORE_FORMATS
        for names in [_camel_fields(p)]
        if names
    }
    assert not offenders, f"wire names below the doors (give the door's converter the mapping): {offenders}"
    # Positive control: the finder sees the camelCase fields the doors and the log do have.
    assert "GoalRequest.sessionId" in _camel_fields(PACKAGE / "acp" / "goals.py")
    assert "GoalSnapshot.maxRounds" in _camel_fields(PACKAGE / "folds" / "events.py")


def _string_sets(path: Path) -> list[set[str]]:
    """The string elements of every tuple, list, set and dict literal in a module."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        elements = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
        if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)) and elements:
            out.append({e.value for e in elements if isinstance(e, ast.Constant) and isinstance(e.value, str)})
    return out


def _wire_error_kinds() -> set[str]:
    namespace: dict = {}
    exec((PROTOCOL / "errors.py").read_text(), namespace)
    return set(namespace["ERROR_KINDS"])


def test_no_copy_of_the_error_kinds():
    """The kinds are listed once, in dshd_protocol/errors.py; a module that needs them
    imports them (dshd.errors, acp/errors.py do)."""
    kinds = _wire_error_kinds()
    copies = [
        str(p.relative_to(PACKAGE))
        for p in SOURCES
        if any(len(found & kinds) >= 3 for found in _string_sets(p))
    ]
    assert not copies, f"a copy of the wire's error kinds: {copies}"
    # Positive control: the same look finds the one list where it is.
    assert any(len(found & kinds) >= 3 for found in _string_sets(PROTOCOL / "errors.py"))


# Pieces of the token rules no copy could do without: the session id's base32 class and
# alphabet, and the kebab-case body.
_TOKEN_PIECES = ("0-9a-hjkmnp-tv-z", "0123456789abcdefghjkmnpqrstvwxyz", "[a-z0-9]+(")


def _token_pieces(path: Path) -> list[str]:
    return [
        piece
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        for piece in _TOKEN_PIECES
        if piece in node.value
    ]


def test_no_copy_of_the_token_patterns():
    copies = {str(p.relative_to(PACKAGE)): found for p in SOURCES for found in [_token_pieces(p)] if found}
    assert not copies, f"a copy of the protocol's token patterns (use dshd_protocol.ids): {copies}"
    # Positive control: each piece is found where the rules are defined.
    assert set(_token_pieces(PROTOCOL / "ids.py")) == set(_TOKEN_PIECES)


def test_the_vocabulary_is_standard_library_only():
    """What the core imports of the wire package pulls in nothing else (no attrs, cattrs,
    no other module of the package)."""
    for name in WIRE_VOCABULARY:
        path = PROTOCOL / (name.split(".")[1] + ".py")
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{name} imports .{node.module}"
                roots = [node.module.split(".")[0]]
            else:
                continue
            for root in roots:
                assert root in sys.stdlib_module_names or root == "__future__", f"{name} imports {root}"
