"""Real trees for the benchmarks: a vLLM wheel's Python files, downloaded once.

`pip download --no-deps --only-binary :all: vllm==VERSION` into benchmarks/data/wheels,
then only its `*.py` files unpacked into benchmarks/data/vllm-VERSION (git-ignored).
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"


class BenchError(Exception):
    """A step of a benchmark failed; the message says which and why."""


def tree_for(version: str) -> Path:
    """Download the wheel (once) and unpack its Python files; return the tree's folder."""
    tree = DATA / f"vllm-{version}"
    if tree.is_dir() and any(tree.rglob("*.py")):
        return tree
    wheels = DATA / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    found = list(wheels.glob(f"vllm-{version}-*.whl"))
    if not found:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                               "--only-binary", ":all:", f"vllm=={version}", "-d", str(wheels)],
                              capture_output=True, text=True)
        found = list(wheels.glob(f"vllm-{version}-*.whl"))
        if proc.returncode != 0 or not found:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise BenchError(f"could not download vllm=={version}: {last}")
    with zipfile.ZipFile(found[0]) as archive:
        for member in archive.namelist():
            if member.endswith(".py"):
                archive.extract(member, tree)
    return tree
