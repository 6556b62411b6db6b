"""Check, on real code, that LibCST expressions meet their ``ast`` twins.

For a random sample of a tree's files, each function's expressions are paired as the
providers pair them (``reviewbot.providers.pair_twins``) and every twin's span is compared
with LibCST's ``PositionProvider`` range of the node (a tuple's ``ast`` span holds its
parentheses: there the LibCST range must lie inside it). Prints how many functions did not
pair (their spans are then computed by generating code) and how many spans disagree.

    python benchmarks/twin_spans.py benchmarks/data/vllm-0.33.0 --files 300 --seed 1
"""

from __future__ import annotations

import argparse
import ast
import random
import sys
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from reviewbot.providers import _ast_functions, _cst_functions, _cst_twins, pair_twins


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    files = sorted(args.tree.rglob("*.py"))
    random.Random(args.seed).shuffle(files)
    stats = {"files": 0, "functions": 0, "unpaired": 0, "nodes": 0, "disagree": 0}
    shown: list[str] = []
    for path in files[:args.files]:
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            tree, module = ast.parse(text), cst.parse_module(text)
        except (SyntaxError, ValueError, cst.ParserSyntaxError, RecursionError):
            continue
        ours: list = []
        for stmt in module.body:
            if isinstance(stmt, cst.BaseCompoundStatement):
                if isinstance(stmt, cst.FunctionDef):
                    ours.append(stmt)
                _cst_functions(stmt, ours)
        theirs: list = []
        _ast_functions(tree, theirs)
        if len(ours) != len(theirs):
            continue
        stats["files"] += 1
        positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        lines = text.splitlines(True)

        def column(line: int, offset: int) -> int:
            return len(lines[line - 1].encode("utf-8")[:offset].decode("utf-8", "replace"))

        for func, node in zip(ours, theirs):
            stats["functions"] += 1
            paired = pair_twins(func, node)
            if paired is None:
                stats["unpaired"] += 1
                shown.append(f"not paired: {path}:{node.lineno} {node.name}")
                continue
            nodes: list = []
            _cst_twins(func, nodes)
            for item in nodes:
                twin, place = paired[0][id(item)], positions[item]
                stats["nodes"] += 1
                got = (twin.lineno, column(twin.lineno, twin.col_offset),
                       twin.end_lineno, column(twin.end_lineno, twin.end_col_offset))
                want = (place.start.line, place.start.column, place.end.line, place.end.column)
                if isinstance(item, cst.Tuple):
                    ok = got[:2] <= want[:2] and got[2:] >= want[2:]
                else:
                    ok = got == want
                if not ok:
                    stats["disagree"] += 1
                    shown.append(f"disagree: {path}:{twin.lineno} {type(item).__name__} "
                                 f"{got} {want}")
    print(" ".join(f"{k}={v}" for k, v in stats.items()))
    for line in shown[:30]:
        print(line)
    return 1 if stats["unpaired"] or stats["disagree"] else 0


if __name__ == "__main__":
    sys.exit(main())
