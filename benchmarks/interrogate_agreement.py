"""RB301 against interrogate on a real tree: the same files, equivalent settings.

    python benchmarks/interrogate_agreement.py [--version 0.11.0]

Prints, for each pair of equivalent settings, both tools' "documented / total" and the
difference in percentage points (the target is at most 0.1). Needs interrogate installed
(`pip install -e ".[test]"`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from interrogate.config import InterrogateConfig
from interrogate.coverage import InterrogateCoverage

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trees import BenchError, tree_for  # noqa: E402

EVERYTHING = {"ignore-module": False, "ignore-private": False, "ignore-magic": False,
              "ignore-init": False, "ignore-nested": False, "ignore-overload": False,
              "ignore-setters": False}
# (name, RB301 options, the equivalent interrogate settings)
CASES = [
    ("count everything", EVERYTHING, {}),
    ("reviewbot's defaults except nested functions",
     {**EVERYTHING, "ignore-module": True, "ignore-magic": True, "ignore-init": True,
      "ignore-overload": True, "ignore-setters": True},
     {"ignore_module": True, "ignore_magic": True, "ignore_init_method": True,
      "ignore_overloaded_functions": True, "ignore_property_setters": True}),
    ("no module docstrings, no nested functions",
     {**EVERYTHING, "ignore-module": True, "ignore-nested": True},
     {"ignore_module": True, "ignore_nested_functions": True}),
]


def reviewbot_counts(tree: Path, options: dict) -> tuple[int, int]:
    """(documented, total) as RB301 counts them with ``options``."""
    defaults = tree.parent / "reviewbot-defaults.yml"
    defaults.write_text("# reviewbot's defaults\n")
    args = [sys.executable, "-m", "reviewbot", "check", "vllm", "--no-cache", "--config",
            str(defaults), "--select", "RB301", "--output-format", "json", "--exit-zero",
            "--option", "RB301.threshold=100", "--option", "RB301.exclude=[]"]
    for key, value in options.items():
        args += ["--option", f"RB301.{key}={str(value).lower()}"]
    report = json.loads(subprocess.run(args, cwd=tree, capture_output=True, text=True).stdout)
    details = next(f for f in report if f["code"] == "RB301")["details"]
    return details["documented"], details["total"]


def main() -> int:
    """Compare both tools on every case."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="0.11.0", help="vLLM version (default 0.11.0)")
    args = parser.parse_args()
    try:
        tree = tree_for(args.version)
    except BenchError as exc:
        print(f"interrogate_agreement.py: error: {exc}", file=sys.stderr)
        return 2
    worst = 0.0
    for name, ours, theirs in CASES:
        cov = InterrogateCoverage(paths=[str(tree / "vllm")],
                                  conf=InterrogateConfig(**theirs)).get_coverage()
        documented, total = reviewbot_counts(tree, ours)
        mine = 100 * documented / total
        worst = max(worst, abs(mine - cov.perc_covered))
        print(f"{name}: reviewbot {documented}/{total} = {mine:.2f}%, interrogate "
              f"{cov.covered}/{cov.total} = {cov.perc_covered:.2f}%, "
              f"difference {mine - cov.perc_covered:+.2f} points")
    return 0 if worst <= 0.1 else 1


if __name__ == "__main__":
    sys.exit(main())
