"""Text a person reads, made safe to read: what they approve is what runs, and nothing a
third party wrote acts on their terminal.

A file name, a command or a title comes from the model (or from a cloned repository's
file names) and may hold characters that change how it looks: bidirectional controls
(``rtl\\u202etxt.exe`` reads "rtlexe.txt"), C0/C1 controls, and line breaks (a command
with a newline hides its second line; a name with one lists as two files). An MCP
server's tool names, descriptions, errors and stderr, a provider's error text and the
model's own reply are the same kind of text: on a terminal, ``ESC [2J`` clears the
screen, ``ESC ] 0;`` sets the window's title, ``ESC ] 52;`` writes the clipboard, and
U+009B is ESC [ to a terminal that reads C1 controls. Both doors, the daemon's log and
the command line show people only the escaped form; the model and the tools always get
the raw text.

- :func:`shown`: one line: every such character escaped, newlines included
  (``\\n``, ``\\r``, ``\\t``, otherwise ``\\uXXXX``, lowercase hex, e.g. ``\\u202e``;
  past U+FFFF ``\\UXXXXXXXX``).
- :func:`shown_lines`: text whose lines are meant (a diff, a tool's output, a model's
  reply, a traceback): the same, but ``\\n`` and ``\\t`` stay as they are.
- :func:`shown_json`: JSON text written for a terminal: the same characters as JSON
  escapes, so the value is unchanged.
- :class:`ShownStream`: a text stream for people (a CLI's stdout or stderr): everything
  written to it goes through one of those first, whoever wrote it.

Escaped: U+0000-U+001F, U+007F-U+009F, U+061C, U+200E, U+200F, U+202A-U+202E,
U+2066-U+2069, and the line and paragraph separators U+2028, U+2029 (which break lines
too); the invisible format characters that can hide text (U+00AD, U+180E, U+200B,
U+2060-U+2064, U+206A-U+206F, U+FEFF, U+FFF9-U+FFFB, the tags U+E0000-U+E007F); lone
surrogates (undecodable bytes). Zero-width joiners (emoji, scripts) and variation
selectors are not. A backslash is left alone (commands are full of them), so ``\\u202e``
typed as six characters looks the same as an escaped U+202E: either way, nothing is
hidden.
"""

from __future__ import annotations

from typing import Any, Callable, TextIO

# Defined once, in layer 0 (dshd.formats), so that the tools' own listings and the log
# formatter (models/errors.py) escape with the same function the doors use.
from dshd.formats import shown, shown_json, shown_lines


class ShownStream:
    """``stream`` for people: each write escaped by ``escape`` (``shown_lines`` for text,
    ``shown_json`` for JSON lines) before it reaches the terminal or file. Put in place
    of ``sys.stdout``/``sys.stderr`` by the commands that print for people, so that no
    print of theirs, nor a log record, can carry a control through, whatever it holds.
    Line breaks are kept: a third-party value put in one line is ``shown`` there too."""

    def __init__(self, stream: TextIO, escape: Callable[[str], str] = shown_lines) -> None:
        self._stream, self._escape = stream, escape

    def write(self, text: str) -> int:
        self._stream.write(self._escape(text))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty, encoding...
        return getattr(self._stream, name)


__all__ = ["shown", "shown_lines", "shown_json", "ShownStream"]
