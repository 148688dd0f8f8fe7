"""Layer 4: MCP tool servers, the client side (the official ``mcp`` SDK).

- :mod:`config`: what a server is (:class:`~dshd.mcp.config.McpServerSpec`), from the
  ``[mcp.servers]`` table, from the workspace's ``.mcp.json``, and from ACP's ``mcpServers``;
- :mod:`servers`: :class:`~dshd.mcp.servers.McpServers`, one per agent: starts servers,
  puts their tools in the agent's catalogue, reports a server that fails once, stops
  every process tree with the agent;
- :mod:`tools`: an MCP tool as a catalogue :class:`~dshd.agent.tools.Tool` (name,
  mutability from annotations, description, result text);
- :mod:`client`: the one module that imports the SDK, on the first server started.

Nothing here is imported at daemon start-up, and the SDK only when a server starts.
"""
