"""`reviewbot check` on a synthetic tree of 20,000 files: time, peak memory, progress bar.

The tree holds copies of the bundled runner fixtures and small generated modules in
nested packages. `check` runs under a pseudo-terminal (so the progress bar is drawn) with
its peak memory read from the kernel (the largest resident set of the process and its
workers, via `resource.getrusage`).

    python benchmarks/scale.py [--files 20000] [--jobs N]
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [ROOT / "fixtures" / "fix" / "before" / "seed_runner.py",
           ROOT / "fixtures" / "sync" / "runner_hazards.py",
           ROOT / "fixtures" / "buffers" / "seed_helper.py"]


def build_tree(root: Path, count: int) -> None:
    texts = [p.read_text(encoding="utf-8") for p in SOURCES]
    for index in range(count):
        folder = root / f"pkg{index // 1000:02d}" / f"sub{(index // 50) % 20:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        if index % 4 == 0:
            text = texts[(index // 4) % len(texts)]
        else:
            text = (f'"""Module {index}."""\n\n\ndef f{index}(x):\n    """Double x."""\n'
                    f"    return x * {index % 7 + 2}\n\n\nclass C{index}:\n"
                    f"    def g(self, y):\n        return [y] * {index % 5}\n")
        (folder / f"m{index:05d}.py").write_text(text, encoding="utf-8")


def run_on_tty(args: list[str], cwd: Path) -> tuple[int, str, float]:
    """Run a command with its output on a pseudo-terminal; exit code, output, seconds."""
    start = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(cwd)
        os.execv(sys.executable, [sys.executable, "-P", *args])
    chunks = []
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), b"".join(chunks).decode("utf-8", "replace"), \
        time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20000)
    parser.add_argument("--jobs", type=int, default=None)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        tree = Path(temp) / "tree"
        start = time.perf_counter()
        build_tree(tree, opts.files)
        built = time.perf_counter() - start
        config = Path(temp) / "empty.yml"
        config.write_text("# defaults\n", encoding="utf-8")
        args = ["-m", "reviewbot", "check", ".", "--no-cache", "--config", str(config),
                "--output-file", os.devnull]
        if opts.jobs:
            args += ["--jobs", str(opts.jobs)]
        code, output, seconds = run_on_tty(args, tree)
        peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    frames = re.findall(r"\r[^\r\n]*?(\d+)/(\d+) files", output)
    result = {"files": opts.files, "tree_built_seconds": round(built, 1),
              "check_seconds": round(seconds, 1), "exit": code,
              "peak_memory_mib": round(peak_kib / 1024, 1),
              "progress_updates": len(frames),
              "progress_last": "/".join(frames[-1]) if frames else None,
              "output_tail": output[-300:]}
    print(json.dumps(result, indent=2))
    out = ROOT / "benchmarks" / "results" / f"scale-{opts.files}.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0 if code in (0, 1) and frames else 1


if __name__ == "__main__":
    sys.exit(main())
