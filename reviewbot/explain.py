"""``reviewbot explain FILE:LINE``: what the analysis believes about one line, and why.

For each expression on the line: its device label (cuda, cpu, value, unknown, ...) and
the evidence; for the function holding the line: whether it is hot, and the chain of
calls (across modules) that makes it so. The project is indexed and linked exactly as
``reviewbot check`` does it, so the answers match the findings.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, TextIO

from reviewbot.errors import ReviewbotError
from reviewbot.textsafe import line_start, printable


def parse_target(spec: str) -> tuple[str, int]:
    """``path:line`` -> (path, line); a one-line error for anything else."""
    path, sep, line = spec.rpartition(":")
    if not sep or not path or not line.isdigit() or int(line) < 1:
        raise ReviewbotError(f"{printable(spec)}: expected FILE:LINE, e.g. src/runner.py:120")
    return path, int(line)


def linked_facts(root: Path, files: list[Path], packs: Any, index_cache: Any) -> Any:
    """The link phase's facts for a project (summaries from the index cache)."""
    from reviewbot.analysis.project import Linker, build_index

    index = build_index(root, files, index_cache)
    index_cache.save()
    return Linker(index, packs).link()


def explain(path: Path, line: int, shown: str, packs: Any, facts: Any, root: Path | None,
            out: TextIO) -> int:
    """Print the labels of the line's expressions and the hotness of its function."""
    from reviewbot.analysis import gpu
    from reviewbot.source import UnreadableSource, decode, parse_quietly, read_bytes

    try:
        text = decode(read_bytes(str(path))).text
        tree = parse_quietly(text)
    except UnreadableSource as exc:
        raise ReviewbotError(f"{printable(shown)}: cannot be read ({exc})") from None
    except (SyntaxError, ValueError, RecursionError):
        raise ReviewbotError(f"{printable(shown)}: does not parse, so nothing on it is "
                             "analysed") from None
    lines = text.splitlines()
    if line > len(lines):
        raise ReviewbotError(f"{printable(shown)}:{line}: the file has {len(lines)} lines")
    rel = None
    if root is not None and facts is not None:
        try:
            rel = path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            rel = None
    hot = facts.for_file(rel) if rel is not None else {}
    devices = facts.devices_for(rel) if rel is not None else {}
    analyzer = gpu.ModuleAnalyzer(tree, packs, text=text, linked_hot=hot,
                                  linked_devices=devices)
    chains = analyzer.hot_paths()
    func = _function_at(analyzer, line)
    out.write(f"{line_start(shown)}:{line}: {printable(lines[line - 1].strip())}\n")
    if func is None:
        out.write("  not inside a function: module-level code runs once, never per step\n")
        return 0
    chain = chains.get(func.qualname)
    if chain is not None:
        out.write(printable(f"  function {func.qualname}: hot, through {' -> '.join(chain)}")
                  + "\n")
    elif analyzer.is_startup(func):
        out.write(f"  function {func.qualname}: start-up code (a startup pattern of the packs)"
                  ", never hot\n")
    else:
        out.write(f"  function {func.qualname}: not hot (no chain of calls from an entry "
                  f"point reaches it; packs: {', '.join(packs.names) or 'none'})\n")
    seen = _labels_on_line(analyzer, func, line)
    if not seen:
        out.write("  no expression on this line was labelled\n")
    for text_, label in seen:
        why = f": {label.why}" if label.why else ""
        out.write(printable(f"  {text_} -> {label.kind}{' (boolean)' if label.boolean else ''}"
                            f"{why}") + "\n")
    return 0


def _function_at(analyzer: Any, line: int) -> Any:
    best = None
    for func in analyzer.functions.values():
        node = func.node
        if node.lineno <= line <= (node.end_lineno or node.lineno):
            if best is None or node.lineno >= best.node.lineno:
                best = func
    return best


def _labels_on_line(analyzer: Any, func: Any, line: int) -> list[tuple[str, Any]]:
    """Walk the function as the check does, recording each expression's label on ``line``."""
    from reviewbot.analysis import gpu

    analyzer.prepare_classes([func])
    walker = _recording_walker(gpu.FunctionWalker)(analyzer, func, report=True)
    walker.line = line
    walker.run()
    return [walker.recorded[key] for key in sorted(walker.recorded)]


def _recording_walker(base: type) -> type:
    """A walker that also keeps the label of every expression on one line."""
    return type("RecordingWalker", (base,), {"label": _recording_label, "line": 0,
                                              "recorded": None})


def _recording_label(self: Any, node: ast.expr, read: bool = False, write: bool = False) -> Any:
    result = type(self).__mro__[1].label(self, node, read, write)
    if self.recorded is None:
        self.recorded = {}
    if getattr(node, "lineno", None) == self.line and not isinstance(node, ast.Constant):
        key = (node.col_offset, getattr(node, "end_col_offset", 0) or 0, id(node))
        self.recorded[key] = (_text(node), result)
    return result


def _text(node: ast.expr) -> str:
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."
