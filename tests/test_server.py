"""`reviewbot server`, driven end to end by pytest-lsp's client as an editor drives it:
initialize, open, change, code action, save, close; positions in the negotiated encoding."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

import pytest

pytest.importorskip("pygls")
pytest_lsp = pytest.importorskip("pytest_lsp")

from hypothesis import given, strategies as st  # noqa: E402
from lsprotocol import types  # noqa: E402
from pygls.uris import from_fs_path  # noqa: E402

from reviewbot import server as lsp  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
SERVER = [sys.executable, "-m", "reviewbot", "server"]

# A hot readback reached only through another module (the project index's doing), on a
# line with non-ASCII text before it (astral, so UTF-16 counts it twice), below another
# non-ASCII line.
HELPERS = '''import torch


def first_ids(n):
    """Ids of the first requests: «premières» 😀."""
    ids = torch.arange(n, device="cuda")
    label = "😀é"; out = ids.tolist()
    return out, label
'''
# The same readback in the entry point itself: `reviewbot check --fix` fixes this one.
LOCAL = '''import torch


class LocalModelRunner:
    """Runs the model: «étape» 😀."""

    def execute_model(self, n):
        """One step."""
        ids = torch.arange(n, device="cuda")
        label = "😀é"; out = ids.tolist()
        return out, label
'''
RUNNER = '''"""The runner."""
from pkg.helpers import first_ids


class ModelRunner:
    """Runs the model."""

    def execute_model(self, n):
        """One step."""
        return first_ids(n)
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (root / "pkg" / "helpers.py").write_text(HELPERS, encoding="utf-8")
    (root / "pkg" / "runner.py").write_text(RUNNER, encoding="utf-8")
    (root / "pkg" / "local.py").write_text(LOCAL, encoding="utf-8")
    return root


def cli_findings(root: Path, rel: str) -> list[dict[str, Any]]:
    """What `reviewbot check` reports in the file, as JSON."""
    done = subprocess.run([sys.executable, "-m", "reviewbot", "check", "--no-cache",
                           "--force-exclude", "--output-format", "json", rel],
                          cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    return [f for f in json.loads(done.stdout) if f["path"] == rel and "details" not in f]


def code_units(text: str, encoding: str) -> int:
    """The text's length in the encoding's code units, counted by Python's codecs."""
    if encoding == "utf-8":
        return len(text.encode("utf-8"))
    if encoding == "utf-16":
        return len(text.encode("utf-16-le")) // 2
    return len(text.encode("utf-32-le")) // 4


def lsp_position(text: str, line: int, column: int, encoding: str) -> tuple[int, int]:
    """A 1-based (line, character column) of ``text`` as an LSP position."""
    lines = text.split("\n")
    return line - 1, code_units(lines[line - 1][:column - 1], encoding)


def apply_text_edits(text: str, edits: list[types.TextEdit], encoding: str) -> str:
    """Apply LSP edits as an editor does: each range in the original text; edits at the
    same place go in in their order."""
    lines = text.split("\n")

    def offset(position: types.Position) -> int:
        before = sum(len(line) + 1 for line in lines[:position.line])
        line = lines[position.line] if position.line < len(lines) else ""
        count = index = 0
        while index < len(line) and count < position.character:
            count += code_units(line[index], encoding)
            index += 1
        return before + index

    spans = [(offset(e.range.start), offset(e.range.end), i, e.new_text)
             for i, e in enumerate(edits)]
    for start, end, _, new in sorted(spans, key=lambda s: (s[0], s[2]), reverse=True):
        text = text[:start] + new + text[end:]
    return text


class Published:
    """Every publishDiagnostics the client receives, in order."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.items: list[types.PublishDiagnosticsParams] = []
        self._arm()

    def _arm(self) -> None:
        future = self.client.protocol.wait_for_notification(
            types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        future.add_done_callback(self._got)

    def _got(self, future: Any) -> None:
        if future.cancelled() or future.exception() is not None:
            return  # the server has gone (the end of a session)
        self.items.append(future.result())
        self._arm()

    async def wait(self, uri: str, version: int | None, timeout: float = 90) -> list[Any]:
        """The diagnostics published for ``uri`` at ``version``."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            for params in self.items:
                if params.uri == uri and params.version == version:
                    return list(params.diagnostics)
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"no diagnostics for {uri} at version {version}; "
                                     f"got {[(p.uri, p.version) for p in self.items]}")
            await asyncio.sleep(0.05)

    def uris(self) -> set[str]:
        return {params.uri for params in self.items}


async def wait_for_log(client: Any, needle: str, timeout: float = 90) -> list[str]:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        found = [m.message for m in client.log_messages if needle in m.message]
        if found:
            return found
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"no log message with {needle!r}: "
                                 f"{[m.message for m in client.log_messages]}")
        await asyncio.sleep(0.05)


@asynccontextmanager
async def session(root: Path, encodings: list[str] | None = None,
                  command: list[str] = SERVER) -> AsyncIterator[tuple[Any, Any, Published]]:
    """A client connected to a server, initialised with ``root`` as its workspace."""
    env = {**os.environ, "XDG_CACHE_HOME": str(root.parent / "xdg")}
    config = pytest_lsp.ClientServerConfig(server_command=command, server_env=env)
    client = await config.start()
    published = Published(client)
    general = types.GeneralClientCapabilities(position_encodings=encodings) \
        if encodings is not None else None
    result = await client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities(general=general),
        root_uri=from_fs_path(str(root)),
        workspace_folders=[types.WorkspaceFolder(uri=from_fs_path(str(root)), name="proj")]))
    try:
        yield client, result, published
    finally:
        await client.shutdown_session()
        await client.stop()


def open_document(client: Any, path: Path, text: str, version: int = 1) -> str:
    uri = from_fs_path(str(path))
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="python", version=version,
                                             text=text)))
    return uri


@pytest.mark.asyncio
@pytest.mark.parametrize("offered, negotiated", [
    (None, "utf-16"),                      # a client that names no encoding
    (["utf-8", "utf-16"], "utf-8"),
    (["utf-32"], "utf-32"),
])
async def test_findings_match_check_in_the_negotiated_encoding(project, offered, negotiated):
    expected = cli_findings(project, "pkg/helpers.py")
    assert [f["code"] for f in expected] == ["RB101"]
    async with session(project, offered) as (client, result, published):
        assert result.capabilities.position_encoding == negotiated
        uri = open_document(client, project / "pkg" / "helpers.py", HELPERS)
        diagnostics = await published.wait(uri, 1)
    assert len(diagnostics) == len(expected)
    for diagnostic, finding in zip(diagnostics, expected):
        assert diagnostic.code == finding["code"] and diagnostic.source == "reviewbot"
        assert diagnostic.message == finding["message"]
        assert "hot path ModelRunner.execute_model -> first_ids" in diagnostic.message
        assert diagnostic.severity == types.DiagnosticSeverity.Error
        start = lsp_position(HELPERS, finding["line"], finding["column"], negotiated)
        end = lsp_position(HELPERS, finding["end_line"], finding["end_column"], negotiated)
        assert (diagnostic.range.start.line, diagnostic.range.start.character) == start
        assert (diagnostic.range.end.line, diagnostic.range.end.character) == end
    # The encodings disagree on this line, so each was really converted to.
    line = HELPERS.split("\n")[expected[0]["line"] - 1][:expected[0]["column"] - 1]
    assert len({code_units(line, e) for e in ("utf-8", "utf-16", "utf-32")}) == 3


@pytest.mark.asyncio
async def test_open_change_code_action_save_and_close(project, tmp_path):
    local = project / "pkg" / "local.py"
    async with session(project, ["utf-16"]) as (client, _, published):
        uri = open_document(client, local, LOCAL)
        first = await published.wait(uri, 1)
        assert [d.code for d in first] == ["RB101"]

        # An unsaved edit above the finding (a non-ASCII comment line) moves it down.
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[types.TextDocumentContentChangePartial(
                range=types.Range(start=types.Position(0, 0), end=types.Position(0, 0)),
                text="# é😀 note\n")]))
        text = "# é😀 note\n" + LOCAL
        moved = await published.wait(uri, 2)
        assert [d.code for d in moved] == ["RB101"]
        assert moved[0].range.start.line == first[0].range.start.line + 1
        assert moved[0].range.start.character == first[0].range.start.character

        # The quick fix, applied as an editor would, gives what `check --fix` writes.
        actions = await client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), range=moved[0].range,
            context=types.CodeActionContext(diagnostics=moved)))
        assert len(actions) == 1
        action = actions[0]
        assert action.kind == types.CodeActionKind.QuickFix and action.is_preferred
        assert action.title.startswith("RB101: ")
        edits = action.edit.changes[uri]
        fixed = apply_text_edits(text, edits, "utf-16")
        other = tmp_path / "copy"
        shutil.copytree(project, other)
        (other / "pkg" / "local.py").write_text(text, encoding="utf-8")
        done = subprocess.run([sys.executable, "-m", "reviewbot", "check", "--no-cache",
                               "--fix-only", "pkg/local.py"], cwd=other,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert fixed == (other / "pkg" / "local.py").read_text(encoding="utf-8")
        assert fixed != text and "import threading" in fixed

        # No action away from the finding.
        elsewhere = await client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(start=types.Position(1, 0), end=types.Position(1, 0)),
            context=types.CodeActionContext(diagnostics=[])))
        assert list(elsewhere or []) == []

        # The fix applied in the editor: the finding is gone.
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=3),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=fixed)]))
        assert await published.wait(uri, 3) == []

        client.text_document_did_close(types.DidCloseTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))
        assert await published.wait(uri, None) == []


@pytest.mark.asyncio
async def test_other_open_buffers_are_part_of_the_project(project):
    """The runner, changed but not saved, no longer calls the helper: not hot any more."""
    async with session(project) as (client, _, published):
        runner = open_document(client, project / "pkg" / "runner.py",
                               RUNNER.replace("return first_ids(n)", "return n"))
        await published.wait(runner, 1)
        uri = open_document(client, project / "pkg" / "helpers.py", HELPERS)
        assert await published.wait(uri, 1) == []


@pytest.mark.asyncio
async def test_configuration_changes_count_at_the_next_check(project):
    helpers = project / "pkg" / "helpers.py"
    async with session(project) as (client, _, published):
        uri = open_document(client, helpers, HELPERS)
        assert [d.code for d in await published.wait(uri, 1)] == ["RB101"]

        (project / "pyproject.toml").write_text(
            '[tool.reviewbot]\nignore = ["RB101"]\n', encoding="utf-8")
        client.text_document_did_save(types.DidSaveTextDocumentParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))
        # A save publishes for the same version: wait for the second publication.
        while len([p for p in published.items if p.uri == uri]) < 2:
            await asyncio.sleep(0.05)
        latest = [p for p in published.items if p.uri == uri][-1].diagnostics
        assert list(latest) == []

        # A mistake in it: one line in the log, the server still answers.
        (project / "pyproject.toml").write_text('[tool.reviewbot]\nignor = ["RB101"]\n',
                                                encoding="utf-8")
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=HELPERS)]))
        logged = await wait_for_log(client, "unknown key")
        assert len(logged) == 1 and "\n" not in logged[0]
        assert "pyproject.toml" in logged[0] and "Traceback" not in logged[0]

        (project / "pyproject.toml").unlink()
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=3),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=HELPERS)]))
        assert [d.code for d in await published.wait(uri, 3)] == ["RB101"]


@pytest.mark.asyncio
async def test_documents_outside_the_workspace_are_not_checked(project, tmp_path):
    outside = tmp_path / "elsewhere"
    (outside / "pkg").mkdir(parents=True)
    (outside / ".git").mkdir()
    for name in ("__init__.py", "helpers.py", "runner.py"):
        shutil.copy(project / "pkg" / name, outside / "pkg" / name)
    (project / "pkg" / "linked.py").symlink_to(outside / "pkg" / "helpers.py")
    async with session(project) as (client, _, published):
        far = open_document(client, outside / "pkg" / "helpers.py", HELPERS)
        linked = open_document(client, project / "pkg" / "linked.py", HELPERS)
        web = "untitled:Untitled-1"
        client.text_document_did_open(types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=web, language_id="python", version=1,
                                                 text=HELPERS)))
        uri = open_document(client, project / "pkg" / "helpers.py", HELPERS)
        assert [d.code for d in await published.wait(uri, 1)] == ["RB101"]
        await asyncio.sleep(1)
        assert published.uris() == {uri}
        assert far and linked


@pytest.mark.asyncio
async def test_a_crash_while_checking_is_logged_and_the_server_goes_on(project):
    command = [sys.executable, "-c",
               "import reviewbot.server as s\n"
               "def broken(*args):\n"
               "    raise RuntimeError('the checker broke')\n"
               "s.check_document = broken\n"
               "raise SystemExit(s.main())\n"]
    async with session(project, command=command) as (client, _, published):
        uri = open_document(client, project / "pkg" / "helpers.py", HELPERS)
        logged = await wait_for_log(client, "the checker broke")
        assert len(logged) == 1 and "\n" not in logged[0]
        assert "RuntimeError" in logged[0] and "helpers.py" in logged[0]
        actions = await client.text_document_code_action_async(types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(start=types.Position(0, 0), end=types.Position(0, 0)),
            context=types.CodeActionContext(diagnostics=[])))
        assert list(actions or []) == []
        assert uri not in published.uris()


def test_server_without_pygls_is_one_line_and_exit_2(run_cli, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pygls" else real(name, *a))
    result = run_cli(["server"])
    assert result.code == 2
    assert result.err == "reviewbot: error: reviewbot server needs pygls: " \
                         "pip install 'reviewbot[lsp]'\n"


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",),
                                      blacklist_characters="\r\n"), max_size=30),
       st.integers(min_value=0, max_value=31), st.sampled_from(["utf-8", "utf-16", "utf-32"]))
def test_positions_convert_both_ways(line, index, encoding):
    column = min(index, len(line)) + 1
    lines = [line]
    position = lsp.to_lsp(lines, 1, column, encoding)
    assert position == (0, code_units(line[:column - 1], encoding))
    assert lsp.from_lsp(lines, *position, encoding) == (1, column)
