"""Precision of reviewbot's buffer rules (RB201, RB202) on the newest engine trees.

RB2xx findings are few and each is a judgement about intent (is this pinned buffer sized
by the wrong bound, does this allocation run every step?), so their precision is measured
on a random sample judged by reading the code, as the sync rules' sampled precision is:

    python benchmarks/rb2_precision.py --sample 40 --seed 2

draws (unless the file exists) up to N RB201/RB202 findings per tree into
`corpus/samples/rb2xx-<engine>-<release>-seed<S>.yml`, each with an empty `verdict`
(`true` | `false`) and `reason`; once filled, the same command prints the precision, per
rule, of the judged findings that this checkout still reports.

Runs outside CI: the trees are unpacked wheels (`trees.py`).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trees import DATA, BenchError, tree_for  # noqa: E402

HERE = Path(__file__).resolve().parent
SAMPLES = HERE / "corpus" / "samples"
TREES = (("vllm", "0.33.0"), ("sglang", "0.5.23"))
CODES = "RB201,RB202"


def findings(tree: Path) -> list[dict]:
    """RB201/RB202 findings of a whole tree, engine packs on (reviewbot's defaults)."""
    marker = tree / "pyproject.toml"
    if not marker.exists():
        marker.write_text("# the root of this project (written by a benchmark)\n")
    config = DATA / "rb2-config.yml"
    config.write_text("respect-gitignore: false\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "reviewbot", "check", ".", "--config",
                           str(config), "--select", CODES, "--output-format", "json"],
                          cwd=tree, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise BenchError(f"reviewbot check failed in {tree}: {done.stderr.strip()}")
    return json.loads(done.stdout)


def draw(found: list[dict], key: str, n: int, seed: int) -> Path:
    target = SAMPLES / f"rb2xx-{key}-seed{seed}.yml"
    if target.exists():
        return target
    ordered = sorted(found, key=lambda f: (f["path"], f["line"], f["code"]))
    picked = random.Random(seed).sample(ordered, min(n, len(ordered)))
    entries = [{"path": f["path"], "line": f["line"], "code": f["code"],
                "message": f["message"][:300], "verdict": "", "reason": ""}
               for f in sorted(picked, key=lambda f: (f["path"], f["line"]))]
    SAMPLES.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump({"tree": key, "seed": seed, "findings": entries},
                                     sort_keys=False, allow_unicode=True, width=100),
                      encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=int, default=40)
    parser.add_argument("--seed", type=int, default=2)
    args = parser.parse_args(argv)
    try:
        print("| tree | RB2xx findings | judged, still reported | true | precision |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for engine, release in TREES:
            key = f"{engine}-{release}"
            found = findings(tree_for(release, engine))
            sample = yaml.safe_load(draw(found, key, args.sample, args.seed)
                                    .read_text(encoding="utf-8"))
            now = {(f["path"], f["line"], f["code"]) for f in found}
            kept = [e for e in sample["findings"] if (e["path"], e["line"], e["code"]) in now
                    and str(e.get("verdict", "")).lower() in ("true", "false")]
            for code in (*sorted({e["code"] for e in kept}), "all"):
                rows = [e for e in kept if code in ("all", e["code"])]
                good = sum(1 for e in rows if str(e["verdict"]).lower() == "true")
                total = Counter(f["code"] for f in found)
                count = sum(total.values()) if code == "all" else total[code]
                precision = f"{good / len(rows):.2f}" if rows else "-"
                print(f"| {key} {code} | {count} | {len(rows)} | {good} | {precision} |")
    except BenchError as exc:
        print(f"rb2_precision: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
