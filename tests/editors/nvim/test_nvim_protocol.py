"""The Neovim plugin speaks exactly the protocol in dsh-protocol.schema.json.

The method names the plugin sends and the ones it handles are read from the running
plugin in a real headless Neovim and compared with the JSON Schema; the plugin's Lua
sources are scanned so that no method name is used outside the protocol table and
every request in it is actually sent somewhere.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "editors" / "nvim" / "tests"))
from nvim_harness import PLUGIN_DIR, REPO, Editor  # noqa: E402

SCHEMA = REPO / "protocol" / "dshd_protocol" / "dsh-protocol.schema.json"


@pytest.fixture(scope="module")
def schema():
    return json.loads(SCHEMA.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def plugin():
    editor = Editor()
    try:
        yield editor.lua(
            """
            local p = require('dsh.protocol')
            local cfg = require('dsh.config').client_config('/tmp')
            return {
              requests = vim.tbl_values(p.requests),
              notifications = vim.tbl_values(p.notifications),
              server_requests = vim.tbl_values(p.server_requests),
              handled = vim.tbl_filter(function(m) return vim.startswith(m, 'dsh/') end, vim.tbl_keys(cfg.handlers)),
              lsp_handled = vim.tbl_filter(function(m) return not vim.startswith(m, 'dsh/') end, vim.tbl_keys(cfg.handlers)),
              capabilities = cfg.capabilities,
            }
            """
        )
    finally:
        editor.close()


def methods_of_kind(schema, kind):
    return {name for name, spec in schema["methods"].items() if spec["kind"] == kind}


def test_requests_sent_are_exactly_the_schema_requests(schema, plugin):
    assert sorted(plugin["requests"]) == sorted(methods_of_kind(schema, "request"))


def test_the_only_lsp_methods_handled_are_the_daemons_notice_and_cancel(plugin):
    # window/showMessage: the daemon's notices (config keys it ignored), in Neovim's words;
    # $/cancelRequest: the daemon withdrew an ask (answered elsewhere, the turn cancelled).
    assert sorted(plugin["lsp_handled"]) == ["$/cancelRequest", "window/showMessage"]


def test_methods_handled_are_exactly_the_schema_notifications_and_server_requests(schema, plugin):
    expected = methods_of_kind(schema, "notification") | methods_of_kind(schema, "server-request")
    assert sorted(plugin["handled"]) == sorted(expected)
    assert sorted(plugin["notifications"]) == sorted(methods_of_kind(schema, "notification"))
    assert sorted(plugin["server_requests"]) == sorted(methods_of_kind(schema, "server-request"))
    # Every method in the schema is covered one way or the other.
    assert set(plugin["requests"]) | set(plugin["handled"]) == set(schema["methods"])


def test_client_declares_the_questions_capability(schema, plugin):
    dsh = plugin["capabilities"]["experimental"]["dsh"]
    allowed = schema["$defs"]["DshClientCapabilities"]["properties"]
    assert dsh == {"questions": True, "permissions": True}
    assert set(dsh) <= set(allowed)


def lua_sources():
    return sorted((PLUGIN_DIR / "lua").rglob("*.lua")) + sorted((PLUGIN_DIR / "plugin").rglob("*.lua")) + [
        PLUGIN_DIR / "lsp" / "dsh.lua"
    ]


def test_method_names_live_only_in_the_protocol_table():
    pattern = re.compile(r"['\"](dsh/[a-z/]+)['\"]")
    for path in lua_sources():
        if path.name == "protocol.lua":
            continue
        found = pattern.findall(path.read_text(encoding="utf-8"))
        assert not found, f"{path.relative_to(PLUGIN_DIR)} names methods directly: {found}"


def test_every_request_in_the_table_is_sent_somewhere(plugin):
    table = (PLUGIN_DIR / "lua" / "dsh" / "protocol.lua").read_text(encoding="utf-8")
    block = table[table.index("M.requests = {"):]
    block = block[: block.index("\n}")]
    keys = dict(re.findall(r"^\s+(\w+) = '(dsh/[a-z/]+)',$", block, re.M))
    assert sorted(keys.values()) == sorted(plugin["requests"])
    code = "\n".join(p.read_text(encoding="utf-8") for p in lua_sources() if p.name != "protocol.lua")
    for key, method in keys.items():
        assert re.search(rf"requests(\(\))?\.{key}\b", code), f"{method} ({key}) is never sent"
