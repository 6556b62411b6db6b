"""JSON for logs: every string on the line it starts on.

JSON escapes the control characters below U+0020 but not U+0085, U+2028 or U+2029,
which some readers end a line at; written as ``\\uXXXX`` they are the same JSON.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

_SEPARATORS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def dump(data: Any, out: TextIO, **options: Any) -> None:
    """``json.dump`` with the line-ending characters JSON leaves raw escaped."""
    out.write(json.dumps(data, **options).translate(_SEPARATORS))
