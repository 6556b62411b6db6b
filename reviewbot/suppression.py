"""Suppression comments: ``# reviewbot: ignore[RB101]``, ``# reviewbot: ignore``, ``# noqa: RB101``,
and the file-level ``# reviewbot: ignore-file``.

A comment suppresses findings reported on its own line, anywhere in a multi-line
statement when it stands on the statement's first line, and on the lines of a multi-line
string when it stands on the line where the string ends (a line inside the string cannot
hold a comment; ruff reads its ``# noqa`` there too). Unused suppressions are fine.
``# reviewbot: ignore-file``, on a line of its own among the first
:data:`FILE_DIRECTIVE_LINES` lines, leaves the whole file unchecked (as ruff's
``# ruff: noqa``).
"""

from __future__ import annotations

import io
import re
import tokenize
from typing import Iterable, Iterator

from reviewbot.finding import Finding

ALL = "*"
# A blanket `# noqa` or one that names a code (RB101, or a project rule's ENG101; it is
# looked for only in a file with findings). It starts at the `#`: a pattern that starts
# with a literal is scanned ten times faster.
_CANDIDATE = re.compile(r"#[^\n]*?(?:reviewbot\s*:\s*ignore(?!-)|noqa(?!\s*:)|noqa\s*:[^\n]*[A-Z]\d)",
                        re.IGNORECASE)
_DIRECTIVE = re.compile(
    r"#\s*(?:reviewbot\s*:\s*ignore(?![-\w])(?:\[(?P<rb>[^\]]*)\])?|noqa(?::\s*(?P<noqa>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?)",
    re.IGNORECASE,
)

# The file-level directive: the whole comment, on a line of its own, near the top.
FILE_DIRECTIVE_LINES = 10
_FILE_DIRECTIVE = re.compile(r"#\s*reviewbot\s*:\s*ignore-file\s*(?:#.*)?", re.IGNORECASE)


def file_ignore_line(text: str) -> int | None:
    """The line of a ``# reviewbot: ignore-file`` comment among the file's first lines
    (None: there is none). Only a real comment counts, not the text of a string."""
    head = text.split("\n", FILE_DIRECTIVE_LINES)[:FILE_DIRECTIVE_LINES]
    if not any("ignore-file" in line.lower() for line in head):
        return None
    lines = iter(line + "\n" for line in head)
    try:
        for tok in tokenize.generate_tokens(lambda: next(lines, "")):
            if tok.start[0] > FILE_DIRECTIVE_LINES:
                break
            if tok.type == tokenize.COMMENT and not tok.line[:tok.start[1]].strip() \
                    and _FILE_DIRECTIVE.fullmatch(tok.string):
                return tok.start[0]
    except (tokenize.TokenError, SyntaxError):
        return None  # the head ends inside a string or a bracket before any directive
    return None


def _codes(comment: str) -> set[str]:
    codes: set[str] = set()
    for match in _DIRECTIVE.finditer(comment):
        listed = match.group("rb") if match.group("rb") is not None else match.group("noqa")
        if listed is None or not listed.strip():
            codes.add(ALL)
        else:
            codes.update(c.upper() for c in re.split(r"[\s,]+", listed.strip()) if c)
    return codes


_FSTRING_START = getattr(tokenize, "FSTRING_START", None)  # Python 3.12+
_FSTRING_END = getattr(tokenize, "FSTRING_END", None)


def string_spans(text: str) -> Iterator[tuple[tokenize.TokenInfo | None, int, int]]:
    """Each token of ``text`` as ``(token, 0, 0)``, and after the token that closes a
    string spanning several lines, ``(None, first_line, last_line)`` of that string (an
    f-string of Python 3.12 counts from its start to its end token). Raises what
    ``tokenize`` raises."""
    open_fstrings: list[int] = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        yield tok, 0, 0
        if tok.type == tokenize.STRING and tok.end[0] > tok.start[0] and not open_fstrings:
            yield None, tok.start[0], tok.end[0]
        elif _FSTRING_START is not None and tok.type == _FSTRING_START:
            open_fstrings.append(tok.start[0])
        elif _FSTRING_END is not None and tok.type == _FSTRING_END and open_fstrings:
            first = open_fstrings.pop()
            if not open_fstrings and tok.end[0] > first:
                yield None, first, tok.end[0]


class Suppressions:
    """The suppression comments of one file, by line."""

    def __init__(self, by_line: dict[int, set[str]], statement_start: dict[int, int],
                 string_end: dict[int, int] | None = None) -> None:
        self.by_line = by_line
        self.statement_start = statement_start
        # A line that ends inside a multi-line string -> the line where that string ends.
        self.string_end = string_end or {}

    @classmethod
    def parse(cls, text: str) -> "Suppressions":
        """Find the suppression comments (tokenizing only a file that may have one)."""
        if not _CANDIDATE.search(text):
            return cls({}, {})
        by_line: dict[int, set[str]] = {}
        starts: dict[int, int] = {}
        string_end: dict[int, int] = {}
        try:
            logical_start: int | None = None
            for tok, first, last in string_spans(text):
                for line in range(first, last):
                    string_end[line] = last
                if tok is None:
                    continue
                if tok.type == tokenize.COMMENT:
                    codes = _codes(tok.string)
                    if codes:
                        by_line.setdefault(tok.start[0], set()).update(codes)
                if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT,
                                tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
                    if tok.type == tokenize.NEWLINE and logical_start is not None:
                        for line in range(logical_start, tok.end[0] + 1):
                            starts[line] = logical_start
                        logical_start = None
                    continue
                if logical_start is None:
                    logical_start = tok.start[0]
        except (tokenize.TokenError, SyntaxError, IndentationError):
            # A file that does not tokenize: read comments line by line instead.
            for number, line in enumerate(text.splitlines(), start=1):
                if "#" in line:
                    codes = _codes(line[line.index("#"):])
                    if codes:
                        by_line.setdefault(number, set()).update(codes)
        return cls(by_line, starts, string_end)

    def suppresses(self, finding: Finding) -> bool:
        """Whether a comment on the finding's line (or its statement's first) covers it."""
        if not self.by_line:
            return False
        lines = {finding.line, self.statement_start.get(finding.line, finding.line)}
        if finding.line in self.string_end:
            lines.add(self.string_end[finding.line])
        for line in lines:
            codes = self.by_line.get(line)
            if codes and (ALL in codes or finding.code in codes):
                return True
        return False

    def filter(self, findings: Iterable[Finding]) -> list[Finding]:
        """The findings that no comment suppresses."""
        return [f for f in findings if not self.suppresses(f)]
