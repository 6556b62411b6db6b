"""``reviewbot check --add-noqa``: the text of a file with ``# noqa: RBxxx`` comments added.

Each reported line gets ``  # noqa: CODES`` at its end, or its codes merged into a
``# noqa: X`` comment already there (never twice). A line that ends inside a multi-line
string cannot hold a comment: its codes go where the string ends (the suppression parser
reads them there); a line continued with a backslash takes them on its statement's first
line. Where neither works, the line is left alone and the caller is told why.
"""

from __future__ import annotations

import re
import tokenize
from dataclasses import dataclass, field
from typing import Mapping

from reviewbot.suppression import ALL, _DIRECTIVE, _codes, string_spans

_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


@dataclass
class NoqaResult:
    """The new text, how many codes were written, and the lines left alone (and why)."""

    text: str
    added: int = 0
    skipped: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class _Layout:
    comments: dict[int, tuple[int, str]]  # line -> (column, comment text)
    in_string: dict[int, int]  # a line ending inside a multi-line string -> where it ends
    statement_start: dict[int, int]


def _layout(text: str) -> _Layout:
    comments: dict[int, tuple[int, str]] = {}
    in_string: dict[int, int] = {}
    starts: dict[int, int] = {}
    logical: int | None = None
    for tok, first, last in string_spans(text):
        for line in range(first, last):
            in_string[line] = last
        if tok is None:
            continue
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = (tok.start[1], tok.string)
        if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT, tokenize.INDENT,
                        tokenize.DEDENT, tokenize.ENDMARKER):
            if tok.type == tokenize.NEWLINE and logical is not None:
                for line in range(logical, tok.end[0] + 1):
                    starts[line] = logical
                logical = None
            continue
        if logical is None:
            logical = tok.start[0]
    return _Layout(comments, in_string, starts)


def _body(line: str) -> tuple[str, str]:
    """A physical line split into its text and its line end."""
    stripped = line.rstrip("\r\n")
    return stripped, line[len(stripped):]


def add_noqa(text: str, wanted: Mapping[int, set[str]]) -> NoqaResult:
    """``text`` with the codes of ``wanted`` (line -> codes) written as noqa comments."""
    try:
        layout = _layout(text)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return NoqaResult(text, 0, [(line, "the file does not tokenize") for line in
                                    sorted(wanted)])
    lines = _LINES.findall(text)
    result = NoqaResult(text)

    def continued(number: int) -> bool:
        body = _body(lines[number - 1])[0] if 0 < number <= len(lines) else ""
        return body.rstrip(" \t\f").endswith("\\") and number not in layout.comments

    def usable(number: int) -> bool:
        return 0 < number <= len(lines) and number not in layout.in_string \
            and not continued(number)

    targets: dict[int, set[str]] = {}
    for line, codes in sorted(wanted.items()):
        target: int | None = line
        why = ""
        if line in layout.in_string:
            target = layout.in_string[line]
            if not usable(target):
                target, why = None, "inside a multi-line string whose last line cannot hold a comment"
        elif not usable(line):
            start = layout.statement_start.get(line, line)
            if start != line and usable(start):
                target = start
            else:
                target, why = None, ("continued with a backslash" if continued(line)
                                     else "not a line of the file")
        if target is None:
            result.skipped.append((line, why))
            continue
        targets.setdefault(target, set()).update(codes)

    for number, codes in targets.items():
        body, end = _body(lines[number - 1])
        comment = layout.comments.get(number)
        if comment is not None:
            column, existing = comment
            present = _codes(existing)
            if ALL in present:
                continue  # a blanket comment already covers every code
            new = sorted(codes - present)
            if not new:
                continue
            directive = next((m for m in _DIRECTIVE.finditer(existing)
                              if m.group("noqa") is not None), None)
            if directive is not None:  # merge into `# noqa: X`
                at = column + directive.end("noqa")
                body = body[:at] + ", " + ", ".join(new) + body[at:]
            else:
                body = body.rstrip(" \t") + "  # noqa: " + ", ".join(new)
        else:
            new = sorted(codes)
            body = body.rstrip(" \t") + "  # noqa: " + ", ".join(new)
        lines[number - 1] = body + end
        result.added += len(new)
    result.text = "".join(lines)
    return result
