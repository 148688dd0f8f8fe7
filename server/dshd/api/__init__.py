"""Layer 5, shared by both front doors: the fan-out of an agent's news (hub) and the
chat-item projection every client renders (chat), with the words they show (words), and
the stdio plumbing both doors read and write through (stdio).
Knows no wire: never imports pygls, lsprotocol, dshd_protocol, daemon/ or acp/."""
