"""A stdio MCP server that starts at once (the standard library only, no SDK): for
bench/mcp_calls.py to measure what dshd itself adds to a session's start, apart from the
start time of real servers, which varies by more than that from one start to the next.

Answers ``initialize`` (with the protocol version it was asked for), ``tools/list`` (two
tools) and ``tools/call`` (the arguments back as text); ignores notifications; answers
anything else with "method not found".
"""

import json
import sys

TOOLS = [
    {"name": "echo", "description": "Says its message back.", "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}},
    {"name": "noop", "description": "Does nothing.", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
]


def answer(request: dict) -> dict | None:
    method, params = request.get("method"), request.get("params") or {}
    if "id" not in request:
        return None  # a notification
    if method == "initialize":
        result = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "instant", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": json.dumps(params.get("arguments") or {})}]}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": f"no method {method}"}}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def main() -> None:
    for line in sys.stdin:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        reply = answer(request) if isinstance(request, dict) else None
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
