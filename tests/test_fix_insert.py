"""The helper a fix adds is placed with LibCST, in the file's own layout.

Each file is fixed with `reviewbot fix --apply`, fixed again (nothing is left to do) and
parsed; the helper must be where the tree puts it, indented with the file's unit and
ending its lines as the file does.
"""

from __future__ import annotations

import ast
import shutil

import libcst as cst

from conftest import FIXTURES
from reviewbot.fixes.cst_insert import add_after_imports, add_to_class
from reviewbot.source import split_lines

BEFORE = FIXTURES / "fix" / "before"

CLASS = '''\
import torch


class Loop:
    """A runner."""

    def __init__(self, hidden):
        self.proj = torch.nn.Linear(hidden, hidden)

    def step(self, batch):
        out = self.proj(batch)
        return out.argmax(-1).tolist()
'''


def _fix(run_cli, tmp_path, name: str, data: bytes) -> bytes:
    """The file fixed, after checking that a second run has nothing left to do."""
    target = tmp_path / name
    target.write_bytes(data)
    result = run_cli(["fix", "--apply", "--no-cache", name], cwd=tmp_path)
    assert result.code == 0, result.err
    again = run_cli(["fix", "--no-cache", name], cwd=tmp_path)
    assert (again.code, again.out) == (0, ""), again.out
    fixed = target.read_bytes()
    ast.parse(fixed)
    return fixed


def _helper(tree: ast.Module, owner: str | None = None) -> ast.FunctionDef:
    body = tree.body if owner is None else next(
        n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == owner).body
    return next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == "_to_list")


def test_a_tab_indented_crlf_module_gets_a_tab_indented_crlf_helper(run_cli, tmp_path):
    source = (BEFORE / "free_functions.py").read_text(encoding="utf-8")
    data = source.replace("    ", "\t").replace("\n", "\r\n").encode()
    fixed = _fix(run_cli, tmp_path, "decode.py", data)
    assert b"\n" not in fixed.replace(b"\r\n", b"")
    text = fixed.decode().replace("\r\n", "\n")
    helper = _helper(ast.parse(text))
    lines = text.split("\n")
    # The state and the helper follow the imports, before the function that calls it.
    assert lines.index("_TO_LIST_LOCAL = threading.local()") < helper.lineno < \
        text.split("\n").index("def greedy_decode(model, prompt: torch.Tensor, steps: int)"
                               " -> list[list[int]]:")
    body = lines[helper.lineno:helper.end_lineno]
    assert body[0] == '\t"""Return ``tensor.tolist()``, waiting for this copy only, not for ' \
        'the whole GPU.'
    assert "\t``tolist()`` on a CUDA tensor copies into pageable memory: the host waits " \
        "for every" in body
    assert "\t\thost.copy_(tensor, non_blocking=True)" in body
    assert not [line for line in body if line.startswith(" ")]


def test_a_two_space_class_gets_a_two_space_helper_at_its_end(run_cli, tmp_path):
    data = CLASS.replace("    ", "  ").encode()
    text = _fix(run_cli, tmp_path, "runner.py", data).decode()
    tree = ast.parse(text)
    helper = _helper(tree, "Loop")
    lines = text.split("\n")
    assert lines[helper.lineno - 1] == "  def _to_list(self, tensor: torch.Tensor):"
    assert lines[helper.lineno - 3] == "  _to_list_local = threading.local()"
    assert "      host.copy_(tensor, non_blocking=True)" in lines
    assert "    ``tolist()`` on a CUDA tensor copies into pageable memory: the host waits " \
        "for every" in lines


def test_comments_after_the_last_method_keep_their_place(run_cli, tmp_path):
    source = CLASS.replace("tolist()\n", "tolist()\n        # about step's return\n"
                           "    # the class ends here\n\n\n# the module goes on\nLIMIT = 1\n")
    text = _fix(run_cli, tmp_path, "runner.py", source.encode()).decode()
    lines = text.split("\n")
    step_end = lines.index("        return self._to_list(out.argmax(-1))")
    # The comment inside `step` stays with it; the helper follows; the class's last
    # comment still ends the class, and the module's code is where it was.
    assert lines[step_end + 1] == "        # about step's return"
    assert lines[step_end + 3] == "    # State of _to_list(): per thread, an event and a " \
        "pinned buffer per device."
    helper = _helper(ast.parse(text), "Loop")
    assert lines[helper.end_lineno] == "    # the class ends here"
    assert text.endswith("\n\n\n# the module goes on\nLIMIT = 1\n")


def test_a_class_ending_with_a_nested_class_gets_the_helper_after_it(run_cli, tmp_path):
    source = CLASS + "\n    class Options:\n        greedy = True\n"
    text = _fix(run_cli, tmp_path, "runner.py", source.encode()).decode()
    tree = ast.parse(text)
    loop = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    names = [getattr(n, "name", None) for n in loop.body]
    assert names[-3:] == ["Options", None, "_to_list"]  # None: the state's assignment
    assert "        greedy = True\n\n    # State of _to_list()" in text


def test_a_module_header_stays_first(run_cli, tmp_path):
    # No docstring, no imports: the helper goes after the shebang and the coding line,
    # which must stay the file's first lines.
    source = (BEFORE / "free_functions.py").read_text(encoding="utf-8")
    body = source.split("import torch\n", 1)[1].lstrip("\n")
    header = "#!/usr/bin/env python\n# -*- coding: utf-8 -*-\n"
    text = _fix(run_cli, tmp_path, "decode.py", (header + body).encode()).decode()
    assert text.startswith(header)
    tree = ast.parse(text)
    assert [getattr(n, "name", None) for n in tree.body if not isinstance(n, ast.Import)] \
        == [None, "_to_list", "greedy_decode"]


def test_a_class_not_where_the_text_says_gets_no_edit():
    # The rendered class must be the file's text: lines that do not match give no edit,
    # never a misplaced one.
    text = CLASS
    tree = ast.parse(text)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    module = cst.parse_module(text)

    def build(indent: str) -> list[cst.BaseStatement]:
        return [cst.parse_statement("x = 1\n")]

    lines = split_lines(text)
    edit = add_to_class(module, tree, cls, lines, build)
    assert edit is not None and (edit.line, edit.content) == (13, "\n    x = 1\n")
    shifted = ["# a line the tree does not have", *lines]
    assert add_to_class(module, tree, cls, shifted, build) is None
    assert add_after_imports(module, shifted, build) is None
