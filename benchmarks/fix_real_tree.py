"""`reviewbot fix --apply` on a copy of a vLLM wheel's Python tree.

Copies the tree, applies every safe fix (``--unsafe`` adds the unsafe ones), then checks
that each changed file still compiles, that a second `reviewbot fix` finds nothing left,
and that the seed's readback in `vllm/v1/worker/gpu_model_runner.py` now goes through the
helper. Writes the counts and that file's diff to `benchmarks/results/`.

    python benchmarks/fix_real_tree.py [--version 0.10.1] [--unsafe]
"""

from __future__ import annotations

import argparse
import difflib
import filecmp
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trees import DATA, BenchError, tree_for  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
# -P: the tree's own modules (torch/types.py) must not shadow the standard library's.
_ISOLATED = ["-P"] if sys.version_info >= (3, 11) else []
RUNNER = "vllm/v1/worker/gpu_model_runner.py"


def changed_files(original: Path, copy: Path) -> list[str]:
    """Paths (relative) of the files that differ between the two trees."""
    changed = []
    for path in sorted(original.rglob("*.py")):
        rel = path.relative_to(original)
        if not filecmp.cmp(path, copy / rel, shallow=False):
            changed.append(str(rel))
    return changed


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *_ISOLATED, "-m", "reviewbot", *args], cwd=cwd,
                          capture_output=True, text=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="0.10.1")
    parser.add_argument("--unsafe", action="store_true", help="also apply unsafe fixes")
    opts = parser.parse_args()
    try:
        tree = tree_for(opts.version)
    except BenchError as exc:
        print(f"fix_real_tree: {exc}", file=sys.stderr)
        return 2
    config = DATA / "reviewbot-defaults.yml"
    config.write_text("# reviewbot's defaults\n", encoding="utf-8")
    flags = ["--no-cache", "--config", str(config)] + (["--unsafe-fixes"] if opts.unsafe else [])
    with tempfile.TemporaryDirectory() as temp:
        copy = Path(temp) / "tree"
        shutil.copytree(tree, copy)
        start = time.perf_counter()
        applied = run(["fix", "--apply", "vllm", *flags], copy)
        seconds = time.perf_counter() - start
        second = run(["fix", "vllm", *flags], copy)
        changed = changed_files(tree, copy)
        not_compiling = []
        for rel in changed:
            try:
                compile((copy / rel).read_text(encoding="utf-8"), rel, "exec")
            except SyntaxError as exc:
                not_compiling.append(f"{rel}: {exc.msg}")
        runner_diff = "".join(difflib.unified_diff(
            (tree / RUNNER).read_text(encoding="utf-8").splitlines(keepends=True),
            (copy / RUNNER).read_text(encoding="utf-8").splitlines(keepends=True),
            f"a/{RUNNER}", f"b/{RUNNER}"))
    summary = applied.stderr.strip().splitlines()[-1] if applied.stderr.strip() else ""
    fixes = int(re.search(r"Applied (\d+) fix", summary).group(1)) if "Applied" in summary else 0
    warnings = [line for line in applied.stderr.splitlines() if "warning:" in line]
    rewritten = "+            valid_sampled_token_ids = self._to_list(sampled_token_ids)" \
        in runner_diff
    already = "valid_sampled_token_ids = self._to_list(sampled_token_ids)" in \
        (tree / RUNNER).read_text(encoding="utf-8")
    result = {
        "version": opts.version, "unsafe": opts.unsafe, "exit": applied.returncode,
        "seconds": round(seconds, 2), "fixes_applied": fixes, "files_changed": len(changed),
        "changed": changed, "files_skipped": warnings, "not_compiling": not_compiling,
        "second_run_exit": second.returncode, "second_run_summary": second.stderr.strip(),
        "seed_readback_rewritten": rewritten, "seed_readback_already_fixed": already,
    }
    RESULTS.mkdir(exist_ok=True)
    name = f"fix-vllm-{opts.version}{'-unsafe' if opts.unsafe else ''}"
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    lines = [f"# `reviewbot fix --apply{' --unsafe-fixes' if opts.unsafe else ''}` on the "
             f"vLLM {opts.version} wheel's Python files", "",
             f"- fixes applied: {fixes}, files changed: {len(changed)}, in {seconds:.2f} s",
             f"- files skipped: {len(warnings)}" + "".join(f"\n  - {w}" for w in warnings),
             f"- changed files that no longer compile: {len(not_compiling)}",
             f"- second `reviewbot fix`: exit {second.returncode}, "
             f"`{second.stderr.strip()}`",
             f"- seed readback in `{RUNNER}`: " + (
                 "rewritten to the helper" if rewritten else
                 "already read through the helper in this version" if already else
                 "NOT rewritten"), "",
             "Changed files:", "", *[f"- `{rel}`" for rel in changed], "",
             f"## The diff of `{RUNNER}`", "", "```diff", runner_diff.rstrip("\n"), "```", ""]
    (RESULTS / f"{name}.md").write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines[:8]))
    ok = not not_compiling and second.returncode == 0 and (rewritten or already) \
        and applied.returncode == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
