"""The daemon's :class:`Host`: one per process, shared by every connection (both doors).

Its code lives in ``dshd.api.host`` because the ACP door shares it and ``daemon/`` and
``acp/`` never import each other; the socket daemon and ``dshd serve`` take it from here.

Use (one process, any number of connections)::

    host = Host(on_empty=start_idle_timer)      # on_empty: the last connection left
    daemon = DshDaemon(host)                   # one per dsh connection (its Client)
    door = AcpDoor(root, host=host, ...)       # one per ACP connection (its Client)

Each connection registers itself with ``host.connect(self)`` when it is made and
``host.disconnect(self)`` when it ends (``DshDaemon.on_stop`` / ``AcpDoor.shutdown`` do
both); ``await host.shutdown()`` closes every session when the process stops.
``dshd serve`` is the same code with one connection: its DshDaemon makes its own Host and
shuts it down when stdio ends.
"""

from dshd.api.host import AttachedClient, Client, Host, OpenQuestion, QuestionKind, Resolution, client_name

__all__ = ["AttachedClient", "Client", "Host", "OpenQuestion", "QuestionKind", "Resolution", "client_name"]
