"""Each finding's line, then the code it points at with the reported columns underlined,
as ruff's ``full`` format shows it::

    runner.py:105:35: RB101 [*] `.tolist()` on `ids` in hot path ...
        |
    104 |         ids = self.model(batch)
    105 |         valid = ids.tolist()
        |                 ^^^^^^^^^^^^ RB101
    106 |         return valid
        |
        = help: copy into a pinned buffer ...

The code comes from the checked file and is untrusted: tabs are expanded, and control
characters, terminal escapes, line separators and bidirectional controls are shown as
escapes (``\\x1b``), with the underline following what is shown. Every code line starts
with its number, so none can read as a workflow command.
"""

from __future__ import annotations

import unicodedata
from typing import Sequence, TextIO

from reviewbot.finding import Finding
from reviewbot.reporters import text
from reviewbot.reporters.sources import Sources
from reviewbot.textsafe import printable

TAB_WIDTH = 4
# A finding over more lines than this shows its first and last ones.
MAX_LINES = 6
# A line longer than this (minified code) is cut around the underline.
MAX_WIDTH = 200
_BLUE, _RED, _YELLOW, _RESET = "\033[34m", "\033[31m", "\033[33m", "\033[0m"


def _cells(line: str) -> list[tuple[str, int]]:
    """What each character of ``line`` is shown as, and how many columns that takes."""
    cells = []
    column = 0
    for char in line:
        if char == "\t":
            shown = " " * (TAB_WIDTH - column % TAB_WIDTH)
            width = len(shown)
        else:
            shown = printable(char)
            if shown != char:
                width = len(shown)
            elif unicodedata.combining(char):
                width = 0
            elif unicodedata.east_asian_width(char) in ("W", "F"):
                width = 2
            else:
                width = 1
        cells.append((shown, width))
        column += width
    return cells


def render(line: str, start: int = 0, end: int = 0) -> tuple[str, int, int]:
    """``line`` as shown, and the shown columns (0-based, end exclusive) of its characters
    ``start`` to ``end`` (0-based, end exclusive). A line wider than MAX_WIDTH columns is
    cut to that many around them, ``...`` marking what was cut."""
    cells = _cells(line)
    offsets = [0]
    for _, width in cells:
        offsets.append(offsets[-1] + width)
    start = min(max(start, 0), len(cells))
    end = min(max(end, start), len(cells))
    first, last = offsets[start], offsets[end]
    if offsets[-1] <= MAX_WIDTH:
        return "".join(shown for shown, _ in cells), first, last
    begin = max(0, min(first - 20, offsets[-1] - MAX_WIDTH))
    kept = [i for i in range(len(cells))
            if offsets[i] >= begin and offsets[i + 1] <= begin + MAX_WIDTH]
    lead = "..." if kept and kept[0] > 0 else ""
    tail = "..." if kept and kept[-1] < len(cells) - 1 else ""
    origin = offsets[kept[0]] if kept else 0
    shown = lead + "".join(cells[i][0] for i in kept) + tail
    limit = (offsets[kept[-1] + 1] if kept else 0) - origin
    return (shown, min(max(first - origin, 0), limit) + len(lead),
            min(max(last - origin, 0), limit) + len(lead))


def _spans(f: Finding, lines: list[str]) -> list[tuple[int, int, int]]:
    """(line number, start, end) of each reported line and the characters to underline
    on it (start == end: nothing on that line)."""
    last = min(max(f.end_line, f.line), len(lines))
    spans = []
    for number in range(f.line, last + 1):
        content = lines[number - 1]
        start = f.column - 1 if number == f.line else len(content) - len(content.lstrip())
        end = f.end_column - 1 if number == f.end_line else len(content)
        if number == f.line:
            end = max(end, start + 1)  # an empty range: one caret where it starts
        spans.append((number, start, max(end, start)))
    return spans


def snippet(f: Finding, lines: list[str], color: bool) -> tuple[list[str], int]:
    """The framed code of one finding (no rows when its line is not in ``lines``), and the
    width of the line numbers."""
    if not 0 < f.line <= len(lines):
        return [], 0
    spans = _spans(f, lines)
    if len(spans) > MAX_LINES:
        spans = spans[:MAX_LINES - 1] + [None] + spans[-1:]  # type: ignore[list-item]
    before = f.line - 1 if f.line > 1 else None
    after_line = max(f.end_line, f.line) + 1
    after = after_line if after_line <= len(lines) else None
    numbers = [n for n in (before, after, *(s[0] for s in spans if s)) if n]
    width = len(str(max(numbers)))

    def paint(code: str, value: str) -> str:
        return f"{code}{value}{_RESET}" if color and value else value

    def gutter(number: int | None) -> str:
        label = str(number) if number is not None else ""
        return paint(_BLUE, f"{label.rjust(width)} |")

    caret = _RED if f.severity == "error" else _YELLOW
    labelled = max(i for i, span in enumerate(spans) if span and span[2] > span[1])
    out = [gutter(None)]
    if before is not None:
        shown, _, _ = render(lines[before - 1])
        out.append(f"{gutter(before)} {shown}".rstrip())
    for index, span in enumerate(spans):
        if span is None:
            out.append(paint(_BLUE, f"{'.' * min(width, 3):>{width}} |") + " ...")
            continue
        number, start, end = span
        shown, first, last = render(lines[number - 1], start, end)
        out.append(f"{gutter(number)} {shown}".rstrip())
        if end > start:
            marks = "^" * max(last - first, 1)
            label = f" {printable(f.code)}" if index == labelled else ""
            out.append(f"{gutter(None)} {' ' * first}{paint(caret, marks + label)}")
    if after is not None:
        shown, _, _ = render(lines[after - 1])
        out.append(f"{gutter(after)} {shown}".rstrip())
    out.append(gutter(None))
    return out, width


def write(findings: Sequence[Finding], out: TextIO, color: bool, summary: bool = True,
          source: Sources | None = None) -> None:
    """Each finding's report line, its code, and the fix's message; then the summary."""
    for f in findings:
        text.write([f], out, color, summary=False)
        lines = source.lines(f.path) if source is not None else None
        framed, width = snippet(f, lines, color) if lines is not None else ([], 1)
        for row in framed:
            out.write(row + "\n")
        if f.fix is not None and f.fix.message:
            out.write(f"{' ' * (width + 1)}= help: {printable(f.fix.message)}\n")
        out.write("\n")
    if summary:
        text.write_summary(findings, out, color)
