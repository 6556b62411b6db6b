"""JSON for logs: every string on the line it starts on, and shown as it is stored.

JSON escapes the control characters below U+0020 but not U+0085, U+2028 or U+2029,
which some readers end a line at, nor DEL and the other C1 controls (U+009B starts a
terminal escape) or the bidirectional and zero-width characters that reorder or hide
text; written as ``\\uXXXX`` they are the same JSON.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

_ESCAPED = "".join(chr(c) for c in range(0x7F, 0xA0)) + "\u2028\u2029" + \
    "\u061c\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e" \
    "\u2060\u2066\u2067\u2068\u2069\ufeff"
_SEPARATORS = {ord(c): f"\\u{ord(c):04x}" for c in _ESCAPED}


def dump(data: Any, out: TextIO, **options: Any) -> None:
    """``json.dump`` with the line-ending characters JSON leaves raw escaped."""
    out.write(json.dumps(data, **options).translate(_SEPARATORS))
