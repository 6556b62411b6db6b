"""Docstring coverage of the definitions a change adds or touches.

The pull-request review's pre-merge check and ``reviewbot check --since REF`` count the
same definitions: a function whose lines the change touches, a class whose header it
touches (a new file's module docstring too), with RB301's options and per-file-ignores.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Sequence

from reviewbot.finding import Finding


def _spans(tree: ast.Module) -> dict[int, range]:
    """The lines that make each definition "touched": a function's whole body, a class's
    header (up to its first statement)."""
    spans: dict[int, range] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            spans[node.lineno] = range(node.lineno, (node.end_lineno or node.lineno) + 1)
        elif isinstance(node, ast.ClassDef):
            header_end = node.body[0].lineno if node.body else node.lineno + 1
            spans[node.lineno] = range(node.lineno, header_end + 1)
    return spans


def changed_coverage(files: Sequence[Path], changed: Any, config: Any,
                     cwd: Path) -> dict[str, Any]:
    """Docstring coverage of the definitions the change adds or changes in ``files``.

    ``changed`` is a :class:`reviewbot.github.diff.ChangedLines` whose paths are relative
    to ``cwd``; a file outside ``cwd`` or not in the change counts nothing. RB301's
    ``exclude`` and per-file-ignores are matched relative to the configuration's folder.
    """
    from reviewbot.analysis.definitions import collect_definitions, counted
    from reviewbot.discovery import relative_to_root
    from reviewbot.rules._docstring_options import excluded
    from reviewbot.source import Columns, UnreadableSource, decode, parse_quietly, read_bytes

    settings = config.settings.get("RB301", {})
    ignore_specs = [spec for spec, codes in config.per_file_ignore_specs() if "RB301" in codes]
    root = Path(config.root).resolve()
    base = cwd.resolve()
    documented = total = 0
    missing: list[str] = []
    first_missing: tuple[str, int] | None = None
    for file in files:
        resolved = Path(file).resolve()
        try:
            rel = resolved.relative_to(base).as_posix()
        except ValueError:
            continue
        change = changed.files.get(rel)
        if change is None or change.status == "removed":
            continue
        config_rel = relative_to_root(resolved, root)
        if excluded(config_rel, settings) or any(s.match_file(config_rel)
                                                 for s in ignore_specs):
            continue
        try:
            text = decode(read_bytes(str(file), config.max_file_size)).text
            tree = parse_quietly(text)
        except (UnreadableSource, SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # reported as RB001 / RB003 by the file rules
        spans = _spans(tree)
        for definition in counted(collect_definitions(tree, Columns(text)), settings):
            if definition.kind == "module":
                touched = change.status == "added"
            else:
                span = spans.get(definition.line)
                touched = span is not None and any(n in change.added for n in span)
            if not touched:
                continue
            total += 1
            if definition.documented:
                documented += 1
            else:
                missing.append(f"{rel}:{definition.line} {definition.name}")
                if first_missing is None:
                    first_missing = (rel, definition.line)
    threshold = float(settings.get("threshold", 80.0))
    percent = round(100.0 * documented / total, 2) if total else 100.0
    result = {"documented": documented, "total": total, "coverage": percent,
              "threshold": threshold, "passed": total == 0 or percent >= threshold,
              "missing": missing}
    if first_missing is not None:
        result["first_missing"] = first_missing
    return result


def coverage_finding(coverage: dict[str, Any], root_display: str, cwd: Path) -> Finding | None:
    """RB301's finding about the changed definitions (None when they pass): reported for
    what was checked, as the run's RB301 is, and shown by file-based viewers at the first
    undocumented definition."""
    from reviewbot.discovery import display_path
    from reviewbot.rules.rb301_docstring_coverage import DocstringCoverage

    if coverage["passed"]:
        return None
    location = None
    if "first_missing" in coverage:
        rel, line = coverage["first_missing"]
        location = {"path": display_path(cwd / rel, cwd), "line": line}
    return Finding(
        code=DocstringCoverage.code,
        name=DocstringCoverage.name,
        message=(f"Docstring coverage of the changed definitions is "
                 f"{coverage['coverage']:.2f}% ({coverage['documented']} of "
                 f"{coverage['total']} definitions documented), below the threshold of "
                 f"{coverage['threshold']:.2f}%"),
        path=root_display,
        line=1, column=1, end_line=1, end_column=1,
        severity=DocstringCoverage.severity,
        details=(("coverage", coverage["coverage"]), ("documented", coverage["documented"]),
                 *((("location", location),) if location is not None else ()),
                 ("missing", list(coverage["missing"])), ("threshold", coverage["threshold"]),
                 ("total", coverage["total"])),
    )
