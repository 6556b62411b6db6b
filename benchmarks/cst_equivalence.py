"""The LibCST rules against the code before them, and their gate on and off.

For each tree (default: the unpacked vLLM 0.33.0 and SGLang 0.5.23 wheels under
``benchmarks/data``), with the configuration `benchmarks/accuracy.py` uses (packs on, the
RB1 rules):

1. ``reviewbot check . --output-format json --no-cache`` with ``--baseline`` (the console
   script of an install of the code before the port) and with this checkout's, cold,
   timed (wall and CPU of the whole run); the two finding sets compared (code, place,
   message, severity and fix).
2. The same check with the LibCST gate off (``Checker.cst_gate``: every LibCST rule on
   every file that holds its trigger words, every function walked, every file parsed
   whole), compared with the gated run.
3. How many files the gate sends to LibCST, and how many functions are parsed alone.

    python benchmarks/cst_equivalence.py --baseline ../old/.venv/bin/reviewbot

writes ``benchmarks/results/cst-equivalence.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
RESULTS = HERE / "results"
TREES = ("vllm-0.33.0", "sglang-0.5.23")


def _key(finding: dict) -> tuple:
    return (finding["code"], finding["path"].removeprefix("./"), finding["line"],
            finding["column"], finding["end_line"], finding["end_column"], finding["message"],
            finding["severity"], json.dumps(finding.get("fix"), sort_keys=True))


def _timed(cmd: list[str], cwd: Path, env: dict | None = None) -> tuple[list[dict], dict]:
    """Run a check; its findings, wall and CPU seconds (the process and its workers)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(proc.stdout), {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}


def _check_args(config: Path) -> list[str]:
    return ["check", ".", "--output-format", "json", "--exit-zero", "--no-cache",
            "--config", str(config)]


def _difference(old: list[dict], new: list[dict]) -> dict:
    a, b = set(map(_key, old)), set(map(_key, new))
    return {"only_before": [list(k[:7]) for k in sorted(a - b)],
            "only_after": [list(k[:7]) for k in sorted(b - a)], "identical": a == b,
            # the same finding twice in one output
            "repeated_before": len(old) - len(a), "repeated_after": len(new) - len(b)}


def child(args: list[str]) -> int:
    """``--child on|off COUNTS_DIR CHECK_ARGS...``: run the check in this process with the
    LibCST gate on or off, each process appending what it parsed to COUNTS_DIR."""
    gate, counts = args[0], Path(args[1])
    from reviewbot import cli, cst_parse, engine
    from reviewbot.context import FileContext

    engine.Checker.cst_gate = gate == "on"

    def note(kind: str, path: str, functions: int = 0) -> None:
        with open(counts / f"{os.getpid()}.txt", "a", encoding="utf-8") as out:
            out.write(f"{kind}\t{path}\t{functions}\n")

    parse_functions = cst_parse.parse_functions

    def counted_parse(ctx, infos):  # type: ignore[no-untyped-def]
        wrapper = parse_functions(ctx, infos)
        if wrapper is not None:
            note("functions", ctx.path, len(wrapper.roots))
        return wrapper

    cst_parse.parse_functions = counted_parse  # the engine imports it when it parses
    whole = FileContext.cst_module.fget

    def counted_module(self):  # type: ignore[no-untyped-def]
        if self._cst is None:
            note("module", self.path)
        return whole(self)

    FileContext.cst_module = property(counted_module)  # type: ignore[assignment]
    return cli.main(args[2:])


def _counted(tree: Path, config: Path, gate: str) -> tuple[list[dict], dict, dict]:
    with tempfile.TemporaryDirectory() as counts:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", gate, counts,
               *_check_args(config)]
        findings, timing = _timed(cmd, tree)
        modules: set[str] = set()
        partial: dict[str, int] = {}
        for file in Path(counts).glob("*.txt"):
            for line in file.read_text(encoding="utf-8").splitlines():
                kind, path, functions = line.split("\t")
                if kind == "module":
                    modules.add(path)
                else:
                    partial[path] = partial.get(path, 0) + int(functions)
    return findings, timing, {
        "files_to_libcst": len(modules | set(partial)),
        "files_parsed_whole": len(modules),
        "files_parsed_by_function": len(set(partial) - modules),
        "functions_parsed_alone": sum(partial.values())}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        return child(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True,
                        help="the reviewbot console script of the code before the port")
    parser.add_argument("--tree", action="append", help="a folder under benchmarks/data")
    parser.add_argument("--config", type=Path, default=DATA / "accuracy-packs-on.yml")
    parser.add_argument("--skip-gate-off", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS / "cst-equivalence.json")
    args = parser.parse_args()
    current = str(Path(sys.executable).with_name("reviewbot"))
    selected = next((line.split(":", 1)[1].strip(" []\n") for line in
                     args.config.read_text(encoding="utf-8").splitlines()
                     if line.startswith("select:")), "RB1") if args.config.exists() else "RB1"
    report: dict = {"config": args.config.name, "select": selected, "trees": {}}
    if args.tree and args.out.exists():  # a tree measured again: keep the others
        report = json.loads(args.out.read_text(encoding="utf-8"))
    for name in args.tree or TREES:
        tree = DATA / name
        print(f"{name}: before ...", file=sys.stderr)
        old, old_time = _timed([args.baseline, *_check_args(args.config)], tree)
        print(f"{name}: after ...", file=sys.stderr)
        new, new_time = _timed([current, *_check_args(args.config)], tree)
        print(f"{name}: gate on, counted ...", file=sys.stderr)
        counted, _, counts = _counted(tree, args.config, "on")
        entry = {
            "files": sum(1 for _ in tree.rglob("*.py")),
            "findings_before": len(old), "findings_after": len(new),
            "before": old_time, "after": new_time,
            "after_over_before_wall": round(new_time["wall_s"] / old_time["wall_s"], 2),
            "after_over_before_cpu": round(new_time["cpu_s"] / old_time["cpu_s"], 2),
            "before_vs_after": _difference(old, new),
            "counted_run_vs_after": _difference(new, counted), **counts}
        if not args.skip_gate_off:
            print(f"{name}: gate off ...", file=sys.stderr)
            ungated, ungated_time, ungated_counts = _counted(tree, args.config, "off")
            entry.update({"gate_off": ungated_time, "findings_gate_off": len(ungated),
                          "gate_on_vs_off": _difference(new, ungated),
                          "files_to_libcst_gate_off": ungated_counts["files_to_libcst"]})
        report["trees"][name] = entry
        print(json.dumps({k: v for k, v in entry.items() if not isinstance(v, dict)}),
              file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    args.out.with_suffix(".md").write_text(_markdown(report), encoding="utf-8")
    return 0


def _markdown(report: dict) -> str:
    selected = report.get("select", "RB1")
    lines = ["# LibCST rules: equivalence, gate and cost", "",
             f"`python benchmarks/cst_equivalence.py --baseline <reviewbot before the port>`, "
             f"configuration `{report['config']}` (packs on, `select: [{selected}]`), cold "
             "(`--no-cache`), default jobs. CPU is the whole run's, workers included.", "",
             "| tree | files | findings before / after / gate off | identical | gate on = off "
             "| files to LibCST (by function / whole) | functions parsed | wall before / after "
             "| CPU before / after |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    notes = []
    for name, e in report["trees"].items():
        off = e.get("findings_gate_off", "-")
        same_gate = e["gate_on_vs_off"]["identical"] if "gate_on_vs_off" in e else "-"
        lines.append(
            f"| {name} | {e['files']} | {e['findings_before']} / {e['findings_after']} / {off} "
            f"| {e['before_vs_after']['identical']} | {same_gate} | {e['files_to_libcst']} "
            f"({e['files_parsed_by_function']} / {e['files_parsed_whole']}) "
            f"| {e['functions_parsed_alone']} "
            f"| {e['before']['wall_s']} s / {e['after']['wall_s']} s "
            f"({e['after_over_before_wall']}x) | {e['before']['cpu_s']} s / "
            f"{e['after']['cpu_s']} s ({e['after_over_before_cpu']}x) |")
        repeated = e["before_vs_after"].get("repeated_before", 0)
        if repeated:
            notes.append(f"- {name}: the rules before the port reported {repeated} findings "
                         "twice (the same code, place and message); the sets are compared.")
    if notes:
        lines += ["", *notes]
    for name, e in report["trees"].items():
        for label, diff in (("before -> after", e["before_vs_after"]),
                            ("gate on -> off", e.get("gate_on_vs_off"))):
            if diff and not diff["identical"]:
                lines += ["", f"## {name}: {label}", ""]
                lines += [f"- only before: `{row}`" for row in diff["only_before"]]
                lines += [f"- only after: `{row}`" for row in diff["only_after"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
