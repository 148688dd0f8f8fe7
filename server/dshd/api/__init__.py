"""Layer 5, shared by both front doors: the fan-out of an agent's news (hub), the Host
every connection of a process shares (host: workspaces by root, who is attached, questions
asked of all), the chat-item projection every client renders (chat) and its marks
(chat_marks), with the words they show (words). Knows no wire: imports no daemon/, acp/ or
wire types (only the wire package's standard-library vocabulary of error kinds and ids)."""
