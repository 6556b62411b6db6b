"""Untrusted text (file names, code) made safe for a line-oriented log.

A CI log reads a line that starts with ``::`` or ``##[`` as a workflow command: a file
named ``a\\n::add-mask::X.py`` printed raw would inject one. Every human-readable output
shows control characters, line and paragraph separators and bidirectional controls
escaped as ``repr`` does (``\\n``, ``\\x1b``, ``\\u202e``), so one value is one line and
looks like what it is.
"""

from __future__ import annotations

import re

# Bidirectional embeddings, overrides and isolates, marks, and zero-width characters.
_INVISIBLE = "\u061c\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e" \
             "\u2060\u2066\u2067\u2068\u2069\ufeff"
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029" + _INVISIBLE + "]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(match: re.Match[str]) -> str:
    char = match.group(0)
    if char in _NAMED:
        return _NAMED[char]
    point = ord(char)
    return f"\\x{point:02x}" if point < 0x100 else f"\\u{point:04x}"


def printable(text: str) -> str:
    """``text`` with every character that could end a line, move the cursor or reorder
    what is shown replaced by its escape."""
    return _UNSAFE.sub(_escape_char, text)



def line_start(path: str) -> str:
    """A file name that begins a line of output: :func:`printable`, and ``./`` in front of
    one that would otherwise start the line with ``::`` or ``##[``."""
    shown = printable(path)
    if shown.lstrip().startswith(("::", "##[")):
        return "./" + shown
    return shown
