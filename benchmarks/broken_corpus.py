"""Syntax errors at every position of a real file, through `check` and `fix --apply`.

From the seed-shaped runner fixture: the file cut at every character, and the file with
each line deleted in turn (thousands of broken files). `reviewbot check` must give each
one a finding or pass it, never crash a rule (RB002); `reviewbot fix --apply` must leave
every file that does not parse exactly as it was and change others only into code that
compiles.

    python benchmarks/broken_corpus.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "fixtures" / "fix" / "before" / "seed_runner.py"


def main() -> int:
    text = SOURCE.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp) / "corpus"
        folder.mkdir()
        for offset in range(len(text)):
            (folder / f"cut_{offset:05d}.py").write_text(text[:offset], encoding="utf-8")
        for index in range(len(lines)):
            (folder / f"dropped_{index:04d}.py").write_text(
                "".join(lines[:index] + lines[index + 1:]), encoding="utf-8")
        files = sorted(folder.glob("*.py"))
        before = {p: p.read_bytes() for p in files}
        flags = ["--no-cache", "--select", "ALL"]
        start = time.perf_counter()
        check = subprocess.run([sys.executable, "-P", "-m", "reviewbot", "check", ".", *flags,
                                "--output-format", "json"], cwd=folder, capture_output=True,
                               text=True)
        check_s = time.perf_counter() - start
        findings = json.loads(check.stdout)
        codes = Counter(f["code"] for f in findings)
        start = time.perf_counter()
        fix = subprocess.run([sys.executable, "-P", "-m", "reviewbot", "fix", "--apply",
                              "--unsafe-fixes", ".", *flags], cwd=folder, capture_output=True,
                             text=True)
        fix_s = time.perf_counter() - start
        broken_changed, bad_fixes, fixed = [], [], 0
        for path in files:
            data = path.read_bytes()
            if data == before[path]:
                continue
            fixed += 1
            try:
                compile(before[path], path.name, "exec")
            except SyntaxError:
                broken_changed.append(path.name)
                continue
            try:
                compile(data, path.name, "exec")
            except SyntaxError as exc:
                bad_fixes.append(f"{path.name}: {exc.msg}")
    parses = sum(1 for p in files if _parses(before[p]))
    result = {"files": len(files), "parse": parses, "do_not_parse": len(files) - parses,
              "check_seconds": round(check_s, 1), "check_exit": check.returncode,
              "findings_by_code": dict(sorted(codes.items())),
              "rule_crashes": codes.get("RB002", 0), "fix_seconds": round(fix_s, 1),
              "fix_exit": fix.returncode,
              "fix_summary": fix.stderr.strip().splitlines()[-1] if fix.stderr.strip() else "",
              "files_fixed": fixed, "unparsable_files_changed": broken_changed,
              "fixes_that_do_not_compile": bad_fixes,
              "tracebacks": "Traceback" in check.stderr + fix.stderr}
    print(json.dumps(result, indent=2))
    out = ROOT / "benchmarks" / "results" / "broken-corpus.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    ok = not (result["rule_crashes"] or broken_changed or bad_fixes or result["tracebacks"])
    return 0 if ok else 1


def _parses(data: bytes) -> bool:
    try:
        compile(data, "x", "exec")
    except SyntaxError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
