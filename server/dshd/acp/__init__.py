"""Layer 5: the Agent Client Protocol front door (`dshd acp`).

ACP v1 over stdio, one JSON object per line, built on the official
``agent-client-protocol`` SDK (imported only here, and only by `dshd acp`). It serves
the same Workspace, services and session logs as `dshd serve`; the two doors never
import each other.

    app.py        `dshd acp`: logging, stdio, the connection's life
    transport.py  line framing over stdio (bad lines answered, never fatal)
    door.py       the ACP methods, thin: each maps onto the Workspace or an Agent
    peer.py       what goes to the client: updates (in order) and permission requests
    live.py       one open session: its committed events, deltas, plan and goal changes
                  as ``session/update`` notifications
    updates.py    events and deltas -> ACP session updates (tool calls, text, messages)
    convert.py    plain values -> ACP values (modes, config options, goal, stop reasons,
                  prompt blocks)
    asking.py     ``session/request_permission``, failing closed
    questions.py  the user-questions seam on it (plan review: Approve / Keep planning)
    permissions.py  the approvals seam on it (Allow / Allow for this session / Reject)
    goals.py      the ``_session/goal`` extension method
    errors.py     domain and validation errors -> JSON-RPC errors
"""
