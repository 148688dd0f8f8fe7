"""Text a person reads, made safe to read: what they approve is what runs.

A file name, a command or a title comes from the model (or from a cloned repository's
file names) and may hold characters that change how it looks: bidirectional controls
(``rtl\\u202etxt.exe`` reads "rtlexe.txt"), C0/C1 controls, and line breaks (a command
with a newline hides its second line; a name with one lists as two files). Both doors
show people only the escaped form; the model and the tools always get the raw text.

- :func:`shown`: one line: every such character escaped, newlines included
  (``\\n``, ``\\r``, ``\\t``, otherwise ``\\uXXXX``, lowercase hex, e.g. ``\\u202e``).
- :func:`shown_lines`: text whose lines are meant (a diff, a tool's output): the same,
  but ``\\n`` and ``\\t`` stay as they are.

Escaped: U+0000-U+001F, U+007F-U+009F, U+061C, U+200E, U+200F, U+202A-U+202E,
U+2066-U+2069, and the line and paragraph separators U+2028, U+2029 (which break lines
too). A backslash is left alone (commands are full of them), so ``\\u202e`` typed as six
characters looks the same as an escaped U+202E: either way, nothing is hidden.
"""

from __future__ import annotations

# Defined once, in layer 0 (dshd.formats), so that the tools' own listings escape names
# with the same function the doors use.
from dshd.formats import shown, shown_lines

__all__ = ["shown", "shown_lines"]
