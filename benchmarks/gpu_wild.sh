#!/usr/bin/env bash
# On a CUDA machine: each wild reproduction's before/after equivalence (reviewbot verify
# --scenario, sync debug mode listing the lines that still synchronise) and its syncs per
# step, host wait and other threads' stall (benchmarks/wild/measure.py).
# Usage: benchmarks/gpu_wild.sh OUTDIR   (writes verify-<case>.json/.txt, measure.json/.md)
set -uo pipefail
out="$(mkdir -p "${1:?usage: gpu_wild.sh OUTDIR}" && cd "$1" && pwd)"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
py=${PYTHON:-python3}

for case in benchmarks/wild/*/; do
    name=$(basename "$case")
    [ -f "$case/scenario.py" ] || continue
    (cd "$case" && $py -m reviewbot verify --scenario scenario.py --before before after \
        --require-gpu --output-format json -o "$out/verify-$name.json")
    echo "verify $name: exit $?" | tee -a "$out/wild.txt"
    $py -c 'import json, sys; from reviewbot.verify.run import write_text
write_text(json.load(open(sys.argv[1])), sys.stdout)' "$out/verify-$name.json" \
        > "$out/verify-$name.txt"
done
$py benchmarks/wild/measure.py -o "$out/measure.json"
echo "measure: exit $?" | tee -a "$out/wild.txt"
