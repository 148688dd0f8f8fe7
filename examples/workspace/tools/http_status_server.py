"""A small MCP tool server for the example workspace: `http_status` says what an HTTP status
code means and whether a client may retry the request.

It needs no network and no package (the Python standard library only), so dshd can run it
in its sandbox as it is: MCP over stdio, one JSON-RPC message per line. It is written
without asyncio on purpose: asyncio makes a Unix socket pair for its own use, and the
sandbox refuses Unix sockets.
"""

from __future__ import annotations

import json
import sys

SERVER = {"name": "http-status", "version": "1.0.0"}
# Versions of MCP this server speaks; a client asking for another gets the newest.
VERSIONS = ("2025-06-18", "2025-03-26", "2024-11-05")

# code: (reason phrase, whether a retry may succeed, why)
STATUSES: dict[int, tuple[str, bool, str]] = {
    200: ("OK", False, "the request succeeded"),
    301: ("Moved Permanently", False, "follow the Location header instead"),
    400: ("Bad Request", False, "the request itself is wrong: sending it again fails again"),
    401: ("Unauthorized", False, "credentials are missing or wrong"),
    403: ("Forbidden", False, "the server refuses this request for this client"),
    404: ("Not Found", False, "there is nothing at this path"),
    408: ("Request Timeout", True, "the server gave up waiting for the request; a new one may get through"),
    429: ("Too Many Requests", True, "retry after the Retry-After header's delay, not sooner"),
    500: ("Internal Server Error", False, "a bug on the server: the same request usually fails the same way"),
    502: ("Bad Gateway", True, "a proxy could not reach the server: often transient"),
    503: ("Service Unavailable", True, "the server is overloaded or down for maintenance: retry with backoff"),
    504: ("Gateway Timeout", True, "a proxy timed out waiting for the server: often transient"),
}

TOOL = {
    "name": "http_status",
    "title": "HTTP status code",
    "description": "What an HTTP status code means and whether retrying the request can help.",
    "inputSchema": {
        "type": "object",
        "properties": {"code": {"type": "integer", "minimum": 100, "maximum": 599}},
        "required": ["code"],
    },
    # It only looks a code up: dshd runs it without asking and takes no checkpoint for it.
    "annotations": {"readOnlyHint": True, "openWorldHint": False},
}


def describe(code: int) -> str:
    if code not in STATUSES:
        family = {4: "a client error: do not retry unchanged", 5: "a server error: retry only if it is known to be transient"}
        return f"{code}: not in this table; {family.get(code // 100, 'not an error')}."
    reason, retry, why = STATUSES[code]
    return f"{code} {reason}: {'retry' if retry else 'do not retry'} ({why})."


def call_tool(params: dict) -> dict:
    if params.get("name") != TOOL["name"]:
        return {"content": [{"type": "text", "text": f"unknown tool {params.get('name')!r}"}], "isError": True}
    code = (params.get("arguments") or {}).get("code")
    if not isinstance(code, int) or isinstance(code, bool) or not 100 <= code <= 599:
        return {"content": [{"type": "text", "text": "code must be an integer from 100 to 599"}], "isError": True}
    return {"content": [{"type": "text", "text": describe(code)}], "isError": False}


def answer(message: dict) -> dict | None:
    method, params = message.get("method"), message.get("params") or {}
    if "id" not in message:
        return None  # a notification (notifications/initialized, cancellations): nothing to say
    if method == "initialize":
        asked = params.get("protocolVersion")
        result = {
            "protocolVersion": asked if asked in VERSIONS else VERSIONS[0],
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": SERVER,
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        result = call_tool(params)
    else:
        return {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": f"no method {method!r}"}}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            reply = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "not JSON"}}
        else:
            reply = answer(message) if isinstance(message, dict) else None
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
