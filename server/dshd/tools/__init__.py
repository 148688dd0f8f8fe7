"""Workspace tools (layer 4, a plugin family): read_file, list_files, search, edit_file,
write_file, run_command. ``dshd.plugins.tools`` adds them to an agent's catalogue; each
module here owns one feature and knows nothing of the agent loop (a tool gets only its
``ToolContext``)."""
