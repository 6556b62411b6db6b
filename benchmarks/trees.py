"""Real trees for the benchmarks: an engine wheel's Python files, downloaded once.

`pip download --no-deps --only-binary :all: PACKAGE==VERSION` into benchmarks/data/wheel,
then only its `*.py` files unpacked into benchmarks/data/PACKAGE-VERSION (git-ignored).
PACKAGE is `vllm` unless given (`sglang` for SGLang).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
WHEELS = DATA / "wheel"


class BenchError(Exception):
    """A step of a benchmark failed; the message says which and why."""


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "no output"


def download_wheel(version: str, package: str = "vllm") -> Path:
    """The package's wheel, downloaded with pip unless it is already there."""
    existing = sorted(WHEELS.glob(f"{package}-{version}-*.whl"))
    if existing:
        return existing[0]
    WHEELS.mkdir(parents=True, exist_ok=True)
    print(f"downloading {package}=={version} (up to a few hundred MB) ...", flush=True)
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                           "--only-binary", ":all:", f"{package}=={version}", "-d", str(WHEELS)],
                          capture_output=True, text=True)
    existing = sorted(WHEELS.glob(f"{package}-{version}-*.whl"))
    if proc.returncode != 0 or not existing:
        raise BenchError(f"could not download {package}=={version} "
                         f"(pip exited {proc.returncode}: {_last_line(proc.stderr)})")
    return existing[0]


def extract_sources(wheel: Path, target: Path) -> None:
    """Unzip only the wheel's ``*.py`` files into ``target`` (atomically, via a temp folder)."""
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                parts = Path(member).parts
                if not member.endswith(".py") or member.startswith("/") or ".." in parts:
                    continue
                archive.extract(member, staging)
    except (OSError, zipfile.BadZipFile) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise BenchError(f"could not unpack {wheel.name}: {exc}") from None
    staging.rename(target)


def tree_for(version: str, package: str = "vllm") -> Path:
    """The folder holding the Python files of the ``package`` ``version`` wheel."""
    tree = DATA / f"{package}-{version}"
    if not tree.is_dir():
        extract_sources(download_wheel(version, package), tree)
    return tree
