"""Reading a source file as Python would: BOM and PEP 263 coding cookies honoured."""

from __future__ import annotations

import ast
import codecs
import re
import io
import os
import stat
import tokenize
import warnings
from dataclasses import dataclass


class UnreadableSource(Exception):
    """The file cannot be read or decoded; the message is one line for the user."""


@dataclass(frozen=True)
class Source:
    """A decoded file and how it was stored, so a rewrite can keep both."""

    text: str  # newlines kept as they are in the file
    encoding: str
    bom: bool


def decode(data: bytes) -> Source:
    """Decode the bytes of a Python file (raises UnreadableSource)."""
    if b"\x00" in data:
        offset = data.index(b"\x00")
        raise UnreadableSource(f"binary file (NUL byte at offset {offset})")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        if exc.msg.startswith("unknown encoding"):
            name = exc.msg.split(":", 1)[-1].strip()
            raise UnreadableSource(f"unknown encoding {name!r} in its coding cookie") from None
        # No cookie and the first lines are not UTF-8: report where decoding fails.
        encoding = "utf-8"
    bom = data.startswith(codecs.BOM_UTF8)
    payload = data[len(codecs.BOM_UTF8):] if bom else data
    codec = "utf-8" if encoding == "utf-8-sig" else encoding
    try:
        text = payload.decode(codec)
    except UnicodeDecodeError as exc:
        raise UnreadableSource(
            f"cannot decode as {codec} (byte 0x{payload[exc.start]:02x} at offset "
            f"{exc.start + (3 if bom else 0)}); add a coding cookie or save it as UTF-8"
        ) from None
    except LookupError:
        raise UnreadableSource(f"unknown encoding {encoding!r} in its coding cookie") from None
    return Source(text=text, encoding=codec, bom=bom)


def read_bytes(path: str, max_bytes: int | None = None) -> bytes:
    """Read a file (raises UnreadableSource with a one-line reason), at most ``max_bytes``."""
    try:
        # O_NONBLOCK: opening a named pipe must not wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise UnreadableSource("not a regular file")
            if max_bytes is not None and info.st_size > max_bytes:
                raise UnreadableSource(_too_large(info.st_size, max_bytes))
            data = handle.read() if max_bytes is None else handle.read(max_bytes + 1)
            if max_bytes is not None and len(data) > max_bytes:  # it grew while read
                raise UnreadableSource(_too_large(len(data), max_bytes))
    except FileNotFoundError:
        raise UnreadableSource("no such file (deleted or a dangling link)") from None
    except IsADirectoryError:
        raise UnreadableSource("is a directory") from None
    except PermissionError:
        raise UnreadableSource("permission denied") from None
    except OSError as exc:
        raise UnreadableSource(f"cannot be read ({exc.strerror or exc})") from None
    return data


def _too_large(size: int, limit: int) -> str:
    return (f"larger than max-file-size ({size} bytes, the limit is {limit}); raise "
            "max-file-size to check it")


_LINE_END = re.compile(r"\r\n|\r|\n")


def split_lines(text: str) -> list[str]:
    """The lines of a source as Python numbers them (only CR, LF and CRLF end a line;
    ``str.splitlines`` also splits at form feeds and other separators), without their ends."""
    lines = _LINE_END.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def line_starts(text: str) -> list[int]:
    """The offset in ``text`` where each line starts (line 1 at index 0), plus the end."""
    starts = [0]
    starts.extend(match.end() for match in _LINE_END.finditer(text))
    if starts[-1] != len(text):
        starts.append(len(text))
    return starts


def newline_of(text: str) -> str:
    """The file's newline style: that of its first line end (LF when it has none)."""
    match = _LINE_END.search(text)
    return match.group(0) if match else "\n"


def parse_quietly(text: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse`` without printing the warnings a file's own code raises (an invalid
    escape, ``1()``): they are the file's, not the tool's."""

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return ast.parse(text, filename=filename)


class Columns:
    """The one place where the parser's column offsets become the columns reviewbot reports.

    CPython's ``ast`` gives ``col_offset`` and ``end_col_offset`` in UTF-8 bytes of the line;
    every finding, fix edit, suggestion and SARIF region counts 1-based characters (Unicode
    code points), as LibCST, ``SyntaxError`` and the fixer do. An ``é`` before a call on its
    line is two bytes but one character: the call's column is one less than its byte offset
    plus one. Lines of ASCII text (most of them) are counted without decoding anything.
    """

    __slots__ = ("_text", "_lines", "_ascii")

    def __init__(self, text: str) -> None:
        self._text = text
        self._ascii = text.isascii()
        self._lines: list[str] | None = None

    def column(self, line: int, offset: int) -> int:
        """The 1-based character column of the UTF-8 byte ``offset`` on 1-based ``line``."""
        if self._ascii:
            return offset + 1
        if self._lines is None:
            self._lines = split_lines(self._text)
        if not 0 < line <= len(self._lines):
            return offset + 1
        text = self._lines[line - 1]
        if text.isascii():
            return offset + 1
        return len(text.encode("utf-8")[:offset].decode("utf-8", "replace")) + 1

    def offset(self, line: int, column: int) -> int:
        """The UTF-8 byte offset of the 0-based character ``column`` on 1-based ``line``
        (the inverse of :meth:`column`, for LibCST's character positions)."""
        if self._ascii:
            return column
        if self._lines is None:
            self._lines = split_lines(self._text)
        if not 0 < line <= len(self._lines):
            return column
        text = self._lines[line - 1]
        return column if text.isascii() else len(text[:column].encode("utf-8"))

    def span(self, node: ast.AST) -> tuple[int, int, int, int]:
        """An ``ast`` node's (line, column, end_line, end_column), 1-based characters, the
        end exclusive (a node without an end ends where it starts)."""
        line: int = getattr(node, "lineno")
        offset: int = getattr(node, "col_offset")
        end_line = getattr(node, "end_lineno", None) or line
        end_offset = getattr(node, "end_col_offset", None)
        if end_offset is None:
            end_offset = offset
        return line, self.column(line, offset), end_line, self.column(end_line, end_offset)
