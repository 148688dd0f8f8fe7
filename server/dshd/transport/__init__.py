"""Layer 5: what the front doors share below their framings (the stdio plumbing). It
imports neither door and no wire package; each door keeps its own framing
(``daemon/transport.py``: LSP headers, ``acp/transport.py``: one JSON object per line)."""
