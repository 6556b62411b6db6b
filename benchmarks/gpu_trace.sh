#!/usr/bin/env bash
# On a CUDA machine: the tests of `reviewbot trace` (GPU and CPU ones) and traces of the
# bundled seed-shaped runner before and after `reviewbot fix --apply`.
# Usage: benchmarks/gpu_trace.sh OUTDIR
# Writes there: gpu.txt (device and torch), trace-tests-gpu.log, trace-tests-cpu.log,
# trace-before.json, trace-after.json (the runner's traces), check-before.txt and
# check-after.json (`reviewbot check --trace` on them), status.txt (each step's exit).
# Needs: torch with CUDA, and reviewbot's dependencies (libcst, pyyaml, pathspec, unidiff,
# pytest); reviewbot itself is used from this checkout (PYTHONPATH), not installed.
set -uo pipefail
out="${1:?usage: gpu_trace.sh OUTDIR}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
py=${PYTHON:-python3}
: > "$out/status.txt"

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/gpu.txt" 2>&1
$py -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
        torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no device")' \
    >> "$out/gpu.txt" 2>&1
cat "$out/gpu.txt"

REVIEWBOT_TRACE_OUT="$out" $py -m pytest -q -p no:cacheprovider -m gpu \
    tests/test_trace_gpu.py 2>&1 | tee "$out/trace-tests-gpu.log"
echo "gpu tests: exit ${PIPESTATUS[0]}" | tee -a "$out/status.txt"

$py -m pytest -q -p no:cacheprovider tests/test_trace.py 2>&1 \
    | tee "$out/trace-tests-cpu.log" | tail -3
echo "cpu tests of the tracer: exit ${PIPESTATUS[0]}" | tee -a "$out/status.txt"

# The traces' headline figures, for the README.
for name in trace-before trace-after; do
    [ -f "$out/$name.json" ] || { echo "$name: missing" | tee -a "$out/status.txt"; continue; }
    $py - "$out/$name.json" <<'PY' | tee -a "$out/status.txt"
import json, sys
doc = json.load(open(sys.argv[1]))
print(sys.argv[1].rsplit("/", 1)[-1])
for s in doc["syncs"]:
    w = s["waited"]
    print(f"  {s['path']}:{s['line']} {s['function']} {s['kind']} op={s['op']} "
          f"count={s['count']} waited={w['total_ms']} ms in {w['samples']} "
          f"stalls_other_threads={s['stalls_other_threads']} intended={s['intended']}")
for p in doc["processes"]:
    print(f"  process torch={p['torch']} debug_mode={p['debug_mode']} gpu_trace={p['gpu_trace']} "
          f"windows={p['profiler_windows']}")
PY
done
ls -la "$out"
