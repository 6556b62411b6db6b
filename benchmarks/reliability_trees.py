"""`check` and `fix --apply` over large real trees: no crash, no broken or unstable file.

Trees: the vLLM 0.11.0 wheel's Python files, this Python's standard library, and the
installed torch package's Python files. For each: `reviewbot check --select ALL` (every
rule, off-by-default ones too), counting RB002 (a rule crashed) and RB003 findings; then
`reviewbot fix --apply --unsafe-fixes` on a copy, after which every changed file must
compile and a second `fix` must change nothing.

    python benchmarks/reliability_trees.py [--only NAME]   # NAME: vllm, stdlib, torch
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trees import DATA, BenchError, tree_for  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
# -P: the tree's own modules (torch/types.py) must not shadow the standard library's.
_ISOLATED = ["-P"] if sys.version_info >= (3, 11) else []


def trees() -> dict[str, Path]:
    found = {}
    try:
        found["vllm-0.11.0"] = tree_for("0.11.0") / "vllm"
    except BenchError as exc:
        print(f"reliability_trees: skipping vLLM: {exc}", file=sys.stderr)
    found["stdlib"] = Path(sysconfig.get_paths()["stdlib"])
    try:
        import torch

        found["torch"] = Path(torch.__file__).parent
    except ImportError:
        print("reliability_trees: skipping torch: not installed", file=sys.stderr)
    return found


def reviewbot(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, *_ISOLATED, "-m", "reviewbot", *args], cwd=cwd,
                          capture_output=True, text=True)
    return proc, time.perf_counter() - start


def run_tree(name: str, source: Path, config: Path) -> dict:
    with tempfile.TemporaryDirectory() as temp:
        copy = Path(temp) / name
        # Copy the Python files only (the torch package also holds large binaries).
        shutil.copytree(source, copy, ignore=lambda d, names: [
            n for n in names if n == "site-packages"
            or not (Path(d, n).is_dir() or n.endswith(".py"))], symlinks=True)
        files = sorted(p for p in copy.rglob("*.py") if "site-packages" not in p.parts)
        flags = ["--no-cache", "--config", str(config), "--select", "ALL",
                 "--extend-exclude", "site-packages/"]
        check, check_s = reviewbot(["check", ".", *flags, "--output-format", "json"], copy)
        try:
            findings = json.loads(check.stdout)
        except ValueError:
            return {"tree": name, "error": f"check exited {check.returncode}: "
                                           f"{check.stderr.strip()[-500:]}"}
        codes = collections.Counter(f["code"] for f in findings)
        crashes = [f"{f['path']}: {f['message']}" for f in findings if f["code"] == "RB002"]
        before = {p: p.read_bytes() for p in files}
        fix, fix_s = reviewbot(["fix", "--apply", "--unsafe-fixes", ".", *flags], copy)
        changed = [p for p in files if p.exists() and p.read_bytes() != before[p]]
        not_compiling = []
        for path in changed:
            try:
                compile(path.read_bytes(), str(path), "exec")
            except (SyntaxError, ValueError) as exc:
                not_compiling.append(f"{path.relative_to(copy)}: {exc}")
        snapshot = {p: p.read_bytes() for p in changed}
        again, _ = reviewbot(["fix", "--apply", "--unsafe-fixes", ".", *flags], copy)
        unstable = [str(p.relative_to(copy)) for p in changed if p.read_bytes() != snapshot[p]]
        warnings = [line for line in fix.stderr.splitlines() if "warning:" in line]
        return {
            "tree": name, "files": len(files), "check_seconds": round(check_s, 1),
            "check_exit": check.returncode, "findings": len(findings),
            "findings_by_code": dict(sorted(codes.items())), "rule_crashes": crashes,
            "fix_seconds": round(fix_s, 1), "fix_exit": fix.returncode,
            "fix_summary": fix.stderr.strip().splitlines()[-1] if fix.stderr.strip() else "",
            "files_changed": len(changed), "files_left_unchanged": warnings,
            "not_compiling": not_compiling, "not_idempotent": unstable,
            "second_fix_summary": again.stderr.strip().splitlines()[-1]
            if again.stderr.strip() else "",
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="")
    opts = parser.parse_args()
    config = DATA / "reviewbot-defaults.yml"
    DATA.mkdir(parents=True, exist_ok=True)
    config.write_text("# reviewbot's defaults\n", encoding="utf-8")
    results = []
    for name, path in trees().items():
        if opts.only and opts.only not in name:
            continue
        print(f"{name}: {path}", flush=True)
        result = run_tree(name, path, config)
        results.append(result)
        print(json.dumps({k: v for k, v in result.items() if k != "findings_by_code"}),
              flush=True)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "reliability-trees.json"
    earlier = json.loads(out.read_text(encoding="utf-8")) if out.exists() else []
    merged = {r["tree"]: r for r in earlier}  # a run of one tree keeps the others' results
    merged.update({r["tree"]: r for r in results})
    out.write_text(json.dumps(list(merged.values()), indent=2) + "\n", encoding="utf-8")
    bad = any(r.get("error") or r.get("rule_crashes") or r.get("not_compiling")
              or r.get("not_idempotent") for r in results)
    print(f"written: {out}; {'PROBLEMS FOUND' if bad else 'no crash, no broken file'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
