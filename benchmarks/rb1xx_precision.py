"""Precision of the RB1xx rules on a real tree, from hand labels.

    python benchmarks/rb1xx_precision.py            # vLLM 0.10.1, as labelled

Runs `reviewbot check --select RB1` over the Python files of the vLLM 0.10.1 wheel
(downloaded once, see trees.py), matches each finding with the hand labels in
benchmarks/labels/vllm-0.10.1-rb1xx-labels.tsv (TP / FP and one line of reasoning per
finding) and prints the precision. Findings without a label are listed: label them
before quoting a figure. Exit status 1 when the seed's `.tolist()` in
`GPUModelRunner.execute_model` is not found or a finding is unlabelled.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trees import BenchError, tree_for  # noqa: E402

LABELS = Path(__file__).resolve().parent / "labels" / "vllm-0.10.1-rb1xx-labels.tsv"
SEED = ("vllm/v1/worker/gpu_model_runner.py", "RB101", "sampled_token_ids")


def main() -> int:
    """Check the tree, join with the labels, print the figures."""
    try:
        tree = tree_for("0.10.1")
    except BenchError as exc:
        print(f"rb1xx_precision.py: error: {exc}", file=sys.stderr)
        return 2
    # reviewbot's defaults, not this repository's own [tool.reviewbot] (found by walking up).
    defaults = tree.parent / "reviewbot-defaults.yml"
    defaults.write_text("# reviewbot's defaults\n")
    proc = subprocess.run([sys.executable, "-m", "reviewbot", "check", "vllm", "--no-cache",
                           "--config", str(defaults), "--select", "RB1", "--output-format",
                           "json", "--exit-zero"], cwd=tree, capture_output=True, text=True)
    findings = json.loads(proc.stdout)
    with open(LABELS, encoding="utf-8") as handle:
        labels = {(r["path"], int(r["line"]), r["code"]): r
                  for r in csv.DictReader(handle, delimiter="\t")}
    counts = {"TP": 0, "FP": 0}
    unlabelled = []
    for f in findings:
        row = labels.get((f["path"], f["line"], f["code"]))
        if row is None:
            unlabelled.append(f)
        else:
            counts[row["label"]] += 1
    seed = any(f["path"] == SEED[0] and f["code"] == SEED[1] and SEED[2] in f["message"]
               for f in findings)
    labelled = counts["TP"] + counts["FP"]
    print(f"{len(findings)} RB1xx findings; labelled {labelled}: {counts['TP']} true, "
          f"{counts['FP']} false positives; precision "
          f"{100 * counts['TP'] / max(labelled, 1):.1f}%")
    print(f"seed finding (.tolist() of sampled_token_ids in execute_model): "
          f"{'found' if seed else 'MISSING'}")
    for f in unlabelled:
        print(f"unlabelled: {f['path']}:{f['line']} {f['code']} {f['message'][:80]}")
    return 0 if seed and not unlabelled else 1


if __name__ == "__main__":
    sys.exit(main())
