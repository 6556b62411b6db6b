#!/usr/bin/env bash
# On a CUDA machine: the GPU tests and `reviewbot verify` on the bundled seed-shaped runner.
# Usage: benchmarks/gpu_verify.sh OUTDIR   (writes gpu-tests.log, verify-*.json/.txt there)
set -uo pipefail
out="${1:?usage: gpu_verify.sh OUTDIR}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
py=${PYTHON:-python3}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt"
$py -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
        torch.cuda.get_device_name(0))' | tee -a "$out/gpu.txt"

$py -m pytest -q -p no:cacheprovider -m gpu tests/test_verify_gpu.py tests/test_fix_helper.py \
    tests/test_security.py 2>&1 | tee "$out/gpu-tests.log"

# What the helper's per-thread state costs, and two threads on one object.
$py benchmarks/event_sync_overhead.py --output "$out/event-sync-overhead.json" \
    > /dev/null
echo "event-sync overhead: exit $?" | tee -a "$out/gpu.txt"

render() {  # JSON report -> the text report
    $py -c 'import json, sys; from reviewbot.verify.run import write_text
write_text(json.load(open(sys.argv[1])), sys.stdout)' "$1" > "$2"
}

# The seed-shaped runner: helpers, stall at 20 ms and 3 ms pending, and the scenario.
$py -m reviewbot verify fixtures/fix/after/seed_runner.py --before fixtures/fix/before \
    --scenario fixtures/verify/seed_runner_scenario.py --min-stall-ratio 30 \
    --output-format json -o "$out/verify-seed-runner.json"
echo "verify seed runner: exit $?" | tee -a "$out/gpu.txt"
render "$out/verify-seed-runner.json" "$out/verify-seed-runner.txt"

# Every helper the fixer inserted into the fix fixtures (class and module-level ones).
$py -m reviewbot verify fixtures/fix/after --iterations 15 --output-format json \
    -o "$out/verify-fix-fixtures.json"
echo "verify fix fixtures: exit $?" | tee -a "$out/gpu.txt"
render "$out/verify-fix-fixtures.json" "$out/verify-fix-fixtures.txt"
cat "$out/verify-seed-runner.txt"
