"""Reading a source file as Python would: BOM and PEP 263 coding cookies honoured."""

from __future__ import annotations

import codecs
import io
import os
import stat
import tokenize
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


def read_bytes(path: str) -> bytes:
    """Read a file (raises UnreadableSource with a one-line reason)."""
    try:
        # O_NONBLOCK: opening a named pipe must not wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise UnreadableSource("not a regular file")
            data = handle.read()
    except FileNotFoundError:
        raise UnreadableSource("no such file (deleted or a dangling link)") from None
    except IsADirectoryError:
        raise UnreadableSource("is a directory") from None
    except PermissionError:
        raise UnreadableSource("permission denied") from None
    except OSError as exc:
        raise UnreadableSource(f"cannot be read ({exc.strerror or exc})") from None
    return data
