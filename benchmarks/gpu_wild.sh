#!/usr/bin/env bash
# On a CUDA machine: each wild reproduction's before/after equivalence (reviewbot verify
# --scenario, sync debug mode listing the lines that still synchronise) and its syncs per
# step, host wait and other threads' stall (benchmarks/wild/measure.py).
# Then each line's syncs per step as `reviewbot trace` counts them (trace-<case>-<side>.json,
# trace-counts.md).
# Usage: benchmarks/gpu_wild.sh OUTDIR [--trace-only]
set -uo pipefail
out="$(mkdir -p "${1:?usage: gpu_wild.sh OUTDIR [--trace-only]}" && cd "$1" && pwd)"
only_trace="${2:-}"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
py=${PYTHON:-python3}

for case in benchmarks/wild/*/; do
    name=$(basename "$case")
    [ -f "$case/scenario.py" ] && [ "$only_trace" != "--trace-only" ] || continue
    (cd "$case" && $py -m reviewbot verify --scenario scenario.py --before before after \
        --require-gpu --output-format json -o "$out/verify-$name.json")
    echo "verify $name: exit $?" | tee -a "$out/wild.txt"
    $py -c 'import json, sys; from reviewbot.verify.run import write_text
write_text(json.load(open(sys.argv[1])), sys.stdout)' "$out/verify-$name.json" \
        > "$out/verify-$name.txt"
done
if [ "$only_trace" != "--trace-only" ]; then
    $py benchmarks/wild/measure.py -o "$out/measure.json"
    echo "measure: exit $?" | tee -a "$out/wild.txt"
fi

# How often each line synchronises per step, as the tracer counts it (10 steps after warm-up).
for case in benchmarks/wild/*/; do
    name=$(basename "$case")
    [ -f "$case/scenario.py" ] || continue
    for side in before after; do
        $py -m reviewbot trace --wait-for-start -o "$out/trace-$name-$side.json" -- \
            $py benchmarks/wild/drive.py "$case" "$side" --steps 10
        echo "trace $name $side: exit $?" | tee -a "$out/wild.txt"
    done
done
$py - "$out" <<'PY' | tee "$out/trace-counts.md"
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
print("| case | side | line | kind | stalls other threads | per step (count / 10) |")
print("| --- | --- | --- | --- | --- | ---: |")
for path in sorted(out.glob("trace-*-*.json")):
    case, side = path.stem[len("trace-"):].rsplit("-", 1)
    doc = json.loads(path.read_text())
    rows = [s for s in doc["syncs"] if "/wild/" in "/" + s["path"]]
    for s in rows or [None]:
        if s is None:
            print(f"| {case} | {side} | none | | | 0 |")
            continue
        print(f"| {case} | {side} | {s['path'].split('/wild/')[-1]}:{s['line']} | {s['kind']} | "
              f"{s['stalls_other_threads']} | {s['count'] / 10:g} |")
PY
