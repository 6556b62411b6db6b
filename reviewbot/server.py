"""``reviewbot server``: a language server (LSP, through pygls) for editors.

Each open Python file of the workspace is checked as ``reviewbot check --force-exclude
FILE`` run in its workspace folder would check it: the same configuration (the file's
nearest, read again on every check, so an edited ``pyproject.toml`` counts at once), the
same project index (the editor's unsaved text of every open file in place of what the
disk holds, as ``check --stdin-filename`` names a text it did not read from disk) and the
same cache. Its findings become diagnostics, the hot-path chain in each message, and each
fix becomes a quick fix. Positions are converted to the position encoding negotiated with
the client (UTF-16 unless it offers UTF-8 or UTF-32); findings count characters.

Nothing outside the workspace folders is read for a document: a URI elsewhere, or one
that is not a ``file:`` URI, gets no diagnostics. A failure while checking is one line in
the client's log; the server goes on.
"""

from __future__ import annotations

import asyncio
import difflib
import functools
import logging
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from reviewbot.finding import Edit, Finding, Fix
from reviewbot.source import _LINE_END, line_starts, newline_of
from reviewbot.textsafe import printable

# How long an edit waits for the next one before the file is checked (seconds).
DEBOUNCE = 0.25
UTF8, UTF16, UTF32 = "utf-8", "utf-16", "utf-32"


# Positions ------------------------------------------------------------------------------
def document_lines(text: str) -> list[str]:
    """The lines of a document as the LSP numbers them (CR, LF and CRLF end a line; after
    a final line end comes an empty last line), without their ends."""
    return _LINE_END.split(text)


def units(text: str, encoding: str) -> int:
    """How many code units of ``encoding`` ``text`` takes (the LSP's ``character``)."""
    if encoding == UTF32 or text.isascii():
        return len(text)
    if encoding == UTF8:
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def to_lsp(lines: Sequence[str], line: int, column: int, encoding: str) -> tuple[int, int]:
    """A finding's 1-based line and character column as an LSP (line, character)."""
    index = max(line - 1, 0)
    if index >= len(lines):  # past the last line: where the text ends
        return len(lines) - 1, units(lines[-1], encoding)
    text = lines[index]
    return index, units(text[:max(column - 1, 0)], encoding)


def from_lsp(lines: Sequence[str], line: int, character: int, encoding: str) -> tuple[int, int]:
    """An LSP (line, character) as a 1-based line and character column."""
    if line >= len(lines):
        return line + 1, 1
    text = lines[line]
    if encoding == UTF32 or text.isascii():
        return line + 1, min(character, len(text)) + 1
    count = 0
    for index, char in enumerate(text):
        if count >= character:
            return line + 1, index + 1
        count += units(char, encoding)
    return line + 1, len(text) + 1


# Checking -------------------------------------------------------------------------------
def encode_buffer(text: str) -> bytes:
    """An editor's text as the bytes its file would hold: in the encoding its coding
    cookie names (UTF-8 without one, or when the text cannot be written in it)."""
    import io
    import tokenize

    head = "".join(text.splitlines(keepends=True)[:2]).encode("utf-8", "surrogatepass")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(head).readline)
    except SyntaxError:
        encoding = "utf-8"
    if encoding not in ("utf-8", "utf-8-sig"):
        try:
            return text.encode(encoding)
        except (UnicodeEncodeError, LookupError):
            pass
    return text.encode("utf-8", "surrogatepass")


def check_document(path: Path, workspace: Path, texts: Mapping[Path, str]) -> list[Finding]:
    """The findings ``reviewbot check --force-exclude PATH`` run in ``workspace`` reports
    in the file, the text of each file in ``texts`` (open buffers) standing for what its
    file holds. Findings about the whole run (RB301's coverage) are left out: they have
    no place in the file. Raises ReviewbotError for bad configuration."""
    from reviewbot.cli import _prepare, build_parser
    from reviewbot.discovery import display_path

    args = build_parser().parse_args(["check", "--force-exclude", str(path)])
    args.stdin = False
    prepared = _prepare(args, workspace)
    if path not in prepared.files:
        return []  # excluded by the configuration
    allowed = {p: encode_buffer(t) for p, t in texts.items()}
    engine = prepared.engine(1)
    result = engine.run(prepared.files, prepared.run_context(), prepared.cwd, allowed)
    shown = display_path(path, prepared.cwd)
    return [f for f in result.findings if f.path == shown and not f.run_level]


@dataclass
class Checked:
    """What was last published for a document: its findings, for its text."""

    version: int | None
    lines: list[str]
    text: str
    findings: list[Finding]


def fix_edits(text: str, fix: Fix) -> list[Edit] | None:
    """The edits of ``fix`` on ``text`` (1-based character positions), with those adding
    the imports it needs; None when the fixed text would not be valid Python."""
    from reviewbot.fixer import _compiles, _offset, add_imports, apply_edits

    newline = newline_of(text)
    edits = [Edit(e.line, e.column, e.end_line, e.end_column,
                  e.content.replace("\n", newline) if newline != "\n" else e.content)
             for e in fix.edits]
    edited = apply_edits(text, fix.edits)
    try:
        final = add_imports(edited, fix.imports)
    except Exception:  # LibCST cannot parse the edited text
        return None
    if _compiles(final, "<fix>") is not None and _compiles(text, "<fix>") is None:
        return None
    if final == edited:
        return edits
    # The imports: lines LibCST inserted above the first edit keep their place in the
    # original text; anything else is one replacement of the region that changed.
    starts = line_starts(text)
    first = min((_offset(starts, text, e.line, e.column) for e in fix.edits),
                default=len(text))
    before, after = edited.splitlines(keepends=True), final.splitlines(keepends=True)
    inserted: list[Edit] = []
    offset_of = line_starts(edited)
    for tag, i1, _, j1, j2 in difflib.SequenceMatcher(None, before, after,
                                                      autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        at = offset_of[i1] if i1 < len(offset_of) else len(edited)
        if tag != "insert" or at > first:
            return [_whole(text, final)]
        inserted.append(Edit(i1 + 1, 1, i1 + 1, 1, "".join(after[j1:j2])))
    return inserted + edits


def _whole(old: str, new: str) -> Edit:
    """One edit turning ``old`` into ``new``: the region between what they share at the
    start and at the end."""
    start = 0
    limit = min(len(old), len(new))
    while start < limit and old[start] == new[start]:
        start += 1
    end = 0
    while end < limit - start and old[len(old) - 1 - end] == new[len(new) - 1 - end]:
        end += 1
    starts = line_starts(old)

    def position(offset: int) -> tuple[int, int]:
        import bisect

        line = bisect.bisect_right(starts, offset) - 1
        line = min(line, len(starts) - 1)
        return line + 1, offset - starts[line] + 1

    line, column = position(start)
    end_line, end_column = position(len(old) - end)
    return Edit(line, column, end_line, end_column, new[start:len(new) - end])


# The server -----------------------------------------------------------------------------
def _inside(path: Path, folders: Sequence[Path]) -> Path | None:
    """The innermost of ``folders`` holding ``path`` (every link followed), or None."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError):
        return None
    best = None
    for folder in folders:
        if real == folder or folder in real.parents:
            if best is None or len(folder.parts) > len(best.parts):
                best = folder
    return best


class _Server:
    """The state of a running server: what was published for each document, the checks
    waiting for their debounce, and the lock that runs one check at a time (they share
    the caches on disk)."""

    def __init__(self) -> None:
        from lsprotocol import types
        from pygls.lsp.server import LanguageServer

        from reviewbot import __version__

        self.types = types
        self.lsp = LanguageServer(
            "reviewbot", __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.checked: dict[str, Checked] = {}
        self.pending: dict[str, asyncio.Task[None]] = {}
        self.lock = threading.Lock()
        # pygls marks the functions it registers: partials of the methods take the marks.
        feature = self.lsp.feature
        own = type(self)
        feature(types.TEXT_DOCUMENT_DID_OPEN)(functools.partial(own.did_open, self))
        feature(types.TEXT_DOCUMENT_DID_CHANGE)(functools.partial(own.did_change, self))
        feature(types.TEXT_DOCUMENT_DID_SAVE)(functools.partial(own.did_save, self))
        feature(types.TEXT_DOCUMENT_DID_CLOSE)(functools.partial(own.did_close, self))
        feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix]))(
                functools.partial(own.code_action, self))

    # The client -------------------------------------------------------------------------
    def log(self, message: str) -> None:
        """One line in the client's log (and on standard error)."""
        line = printable(message)
        sys.stderr.write(line + "\n")
        try:
            self.lsp.window_log_message(self.types.LogMessageParams(
                type=self.types.MessageType.Error, message=line))
        except Exception:  # no client to tell
            pass

    def encoding(self) -> str:
        """The position encoding agreed with the client."""
        chosen = str(self.lsp.workspace.position_encoding or UTF16)
        return chosen if chosen in (UTF8, UTF16, UTF32) else UTF16

    def folders(self) -> list[Path]:
        """The workspace folders (resolved); without any, the server's working folder."""
        from pygls.uris import to_fs_path

        found = []
        for folder in self.lsp.workspace.folders.values():
            path = to_fs_path(folder.uri)
            if path:
                found.append(Path(path))
        if not found and self.lsp.workspace.root_path:
            found.append(Path(self.lsp.workspace.root_path))
        if not found:
            found.append(Path.cwd())
        resolved = []
        for folder in found:
            try:
                resolved.append(folder.resolve())
            except (OSError, RuntimeError):
                continue
        return resolved

    def local(self, uri: str) -> tuple[Path, Path] | None:
        """The file of a document and its workspace folder, when it may be read."""
        from pygls.uris import to_fs_path

        from reviewbot.discovery import PYTHON_SUFFIXES

        path = to_fs_path(uri)
        if not path or not path.endswith(PYTHON_SUFFIXES):
            return None
        absolute = Path(os.path.abspath(path))
        folder = _inside(absolute, self.folders())
        if folder is None:
            return None
        return absolute, folder

    def diagnostic(self, finding: Finding, lines: list[str], unit: str) -> Any:
        """A finding as an LSP diagnostic."""
        from reviewbot import registry
        from reviewbot.links import rule_url

        types = self.types
        start = to_lsp(lines, finding.line, finding.column, unit)
        end = max(start, to_lsp(lines, finding.end_line, finding.end_column, unit))
        rule = registry.BY_CODE.get(finding.code)
        return types.Diagnostic(
            range=types.Range(start=types.Position(*start), end=types.Position(*end)),
            message=printable(finding.message),
            severity=types.DiagnosticSeverity.Error if finding.severity == "error"
            else types.DiagnosticSeverity.Warning,
            code=finding.code, source="reviewbot",
            code_description=types.CodeDescription(href=rule_url(rule))
            if rule is not None else None)

    def publish(self, uri: str, version: int | None, diagnostics: list[Any]) -> None:
        """Send a document's diagnostics."""
        self.lsp.text_document_publish_diagnostics(self.types.PublishDiagnosticsParams(
            uri=uri, version=version, diagnostics=diagnostics))

    # Checking ---------------------------------------------------------------------------
    def snapshot(self, uri: str) -> tuple[Path, Path, int | None, str, dict[Path, str]] | None:
        """What a check of ``uri`` needs, taken in the server's own thread: the file, its
        workspace folder, the version and text checked, and every open file's text."""
        document = self.lsp.workspace.text_documents.get(uri)
        where = self.local(uri) if document is not None else None
        if document is None or where is None:
            return None  # closed, outside the workspace, or not a Python file: not read
        texts = {}
        for other_uri, other in list(self.lsp.workspace.text_documents.items()):
            other_where = self.local(other_uri)
            if other_where is not None:
                texts[other_where[0]] = other.source
        texts[where[0]] = document.source
        return where[0], where[1], document.version, document.source, texts

    def safely(self, path: Path, folder: Path,
               texts: dict[Path, str]) -> tuple[list[Finding] | None, str]:
        """The findings, or None and the one line saying why checking failed."""
        from reviewbot.errors import ReviewbotError

        try:
            with self.lock:
                return check_document(path, folder, texts), ""
        except ReviewbotError as exc:
            return None, f"reviewbot: error: {path}: {exc}"
        except Exception as exc:  # never the end of the server
            return None, (f"reviewbot: internal error while checking {path}: "
                          f"{exc.__class__.__name__}: {exc}")

    async def run_check(self, uri: str, delay: float) -> None:
        """Check a document (after ``delay`` seconds) and publish its diagnostics, unless
        it changed or closed meanwhile."""
        if delay:
            await asyncio.sleep(delay)
        taken = self.snapshot(uri)
        if taken is None:
            return
        path, folder, version, text, texts = taken
        findings, failure = await asyncio.to_thread(self.safely, path, folder, texts)
        if failure:
            self.log(failure)
        current = self.lsp.workspace.text_documents.get(uri)
        if findings is None or current is None or current.version != version \
                or current.source != text:
            return  # the next check publishes
        lines = document_lines(text)
        self.checked[uri] = Checked(version, lines, text, findings)
        unit = self.encoding()
        self.publish(uri, version, [self.diagnostic(f, lines, unit) for f in findings])

    def schedule(self, uri: str, delay: float) -> None:
        """Check ``uri`` after ``delay``, in place of a check still waiting."""
        task = self.pending.pop(uri, None)
        if task is not None and not task.done():
            task.cancel()
        self.pending[uri] = asyncio.get_running_loop().create_task(self.run_check(uri, delay))

    # The protocol -----------------------------------------------------------------------
    async def did_open(self, params: Any) -> None:
        """textDocument/didOpen: check it now."""
        self.schedule(params.text_document.uri, 0)

    async def did_change(self, params: Any) -> None:
        """textDocument/didChange: check it once the edits pause."""
        self.schedule(params.text_document.uri, DEBOUNCE)

    async def did_save(self, params: Any) -> None:
        """textDocument/didSave: check it now (the files around it may have changed)."""
        self.schedule(params.text_document.uri, 0)

    async def did_close(self, params: Any) -> None:
        """textDocument/didClose: forget it and clear its diagnostics."""
        uri = params.text_document.uri
        task = self.pending.pop(uri, None)
        if task is not None and not task.done():
            task.cancel()
        self.checked.pop(uri, None)
        self.publish(uri, None, [])

    def code_action(self, params: Any) -> list[Any]:
        """textDocument/codeAction: a quick fix for each fixable finding in the range."""
        types = self.types
        uri = params.text_document.uri
        state = self.checked.get(uri)
        document = self.lsp.workspace.text_documents.get(uri)
        if state is None or document is None or document.version != state.version:
            return []  # no findings for the text as it is now
        unit = self.encoding()
        lines = state.lines
        start = from_lsp(lines, params.range.start.line, params.range.start.character, unit)
        end = from_lsp(lines, params.range.end.line, params.range.end.character, unit)
        actions = []
        for finding in state.findings:
            fix = finding.fix
            if fix is None or fix.applicability == "display" or not fix.edits:
                continue
            if (finding.end_line, finding.end_column) < start \
                    or (finding.line, finding.column) > end:
                continue  # not at the range asked about
            edits = fix_edits(state.text, fix)
            if edits is None:
                continue
            text_edits = []
            for edit in edits:
                a = to_lsp(lines, edit.line, edit.column, unit)
                b = to_lsp(lines, edit.end_line, edit.end_column, unit)
                text_edits.append(types.TextEdit(
                    range=types.Range(start=types.Position(*a), end=types.Position(*b)),
                    new_text=edit.content))
            unsafe = " (unsafe)" if fix.applicability == "unsafe" else ""
            actions.append(types.CodeAction(
                title=printable(f"{finding.code}: {fix.message}{unsafe}"),
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[self.diagnostic(finding, lines, unit)],
                is_preferred=fix.applicability == "safe",
                edit=types.WorkspaceEdit(changes={uri: text_edits})))
        return actions


def build_server() -> Any:
    """The language server (a pygls LanguageServer), its features registered."""
    return _Server().lsp


def main() -> int:
    """Serve over standard input and output until the client says exit."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="reviewbot server: %(message)s")
    build_server().start_io()
    return 0
