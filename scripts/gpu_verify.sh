#!/usr/bin/env bash
# GPU verification of `kvsize --engine hf` on one CUDA GPU (sized for an H200, 141 GB), for docs/verification.md.
#
# For four model shapes (random weights; --layers where a full model would not fit or would take too long),
# at two contexts x two batch sizes, `kvsize verify --device cuda` runs a prefill plus 4 decode steps and
# compares, layer by layer, the bytes the transformers cache holds with kvsize's prediction, and the CUDA
# allocator's delta (memory_allocated after - before) with a 2% tolerance. A CUDA OOM is recorded as a finding.
#
# Usage:   scripts/gpu_verify.sh [OUT_DIR]          (default OUT_DIR: $OUT or ./gpu-verify-out)
# Needs:   a CUDA build of torch, transformers and kvsize's dependencies (the repo's .venv, KVSIZE=path/to/kvsize,
#          or PYTHON=a python that has them: the checkout is then run with `python -m kvsize`). No network.
# Knobs:   DEVICE=meta runs the same plan without a GPU (a dry run of this script); PER_MODEL_TIMEOUT (s).
# Output:  OUT_DIR/<model>.json and .md per model, OUT_DIR/gpu_table.md (the table for docs/verification.md),
#          OUT_DIR/environment.txt; exit status 1 if any scenario mismatched or a run failed.
# Budget:  ~6-8 minutes on an H200 (torch import and random init dominate); every model is capped by a timeout.
set -uo pipefail

OUT=${1:-${OUT:-gpu-verify-out}}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# The kvsize to run: $KVSIZE, else the repository's .venv, else one on PATH, else `python3 -m kvsize` from the
# checkout (then torch, transformers and kvsize's own dependencies must be importable by $PYTHON).
if [ -z "${KVSIZE:-}" ]; then
    if [ -x "$ROOT/.venv/bin/kvsize" ]; then KVSIZE=$ROOT/.venv/bin/kvsize; else KVSIZE=$(command -v kvsize || true); fi
fi
if [ -n "$KVSIZE" ]; then
    RUN=("$KVSIZE")
    PYTHON=${PYTHON:-$(dirname "$KVSIZE")/python}
else
    PYTHON=${PYTHON:-python3}
    RUN=("$PYTHON" -m kvsize)
    export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
fi
[ -x "$PYTHON" ] || PYTHON=$(command -v python3)
DEVICE=${DEVICE:-cuda}
PER_MODEL_TIMEOUT=${PER_MODEL_TIMEOUT:-150}
export HF_HUB_OFFLINE=1 # registry configs ship with kvsize: no network needed
mkdir -p "$OUT"

{
    date -u
    "$PYTHON" -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda,
"transformers", transformers.__version__);
print(torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA device")'
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
} >"$OUT/environment.txt" 2>&1

# model | extra kvsize verify arguments. Contexts and batches: two each.
PLAN=(
    "meta-llama/Llama-3.1-8B|--ctx 4k,32k --batch 1,8"
    "Qwen/Qwen3-30B-A3B|--layers 12 --ctx 4k,32k --batch 1,8"
    "google/gemma-3-4b-it|--ctx 4k,32k --batch 1,8"
    "deepseek-ai/DeepSeek-V3|--layers 4 --ctx 4k,32k --batch 1,4"
)

status=0
for entry in "${PLAN[@]}"; do
    model=${entry%%|*}
    args=${entry#*|}
    name=${model//\//--}
    echo "== $model ($args, $DEVICE)" >&2
    # shellcheck disable=SC2086  # $args holds several options on purpose
    timeout "$PER_MODEL_TIMEOUT" "${RUN[@]}" verify "$model" --device "$DEVICE" $args \
        --json --report "$OUT/$name.md" >"$OUT/$name.json" 2>"$OUT/$name.log"
    rc=$?
    echo "   exit $rc" >&2
    if [ "$rc" -ne 0 ]; then status=1; fi
done

"$PYTHON" - "$OUT" <<'PY' >"$OUT/gpu_table.md"
import json, sys
from pathlib import Path

out = Path(sys.argv[1])


def n(value):
    return "-" if value is None else f"{value:,}"


print("| model | device | layers | ctx | batch | predicted (B) | measured (B) | allocator delta (B) | alloc diff % "
      "| peak (B) | full model predicted (B) | result |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
for path in sorted(out.glob("*.json")):
    try:
        data = json.loads(path.read_text())
    except ValueError:
        print(f"| {path.stem} | run failed: see {path.stem}.log | | | | | | | | | | |")
        continue
    for s in data["scenarios"]:
        full = s.get("full_model") or {}
        pct = s.get("allocator_difference_pct")
        print(f"| {data['model']} | {data['device']} | {data['layers_built']}/{data['layers_total']} | {s['ctx']} "
              f"| {s['batch']} | {n(s['predicted_bytes'])} | {n(s['measured_bytes'])} "
              f"| {n(s.get('allocator_delta_bytes'))} | {'-' if pct is None else f'{pct:+.3f}'} "
              f"| {n(s.get('allocator_peak_bytes'))} | {n(full.get('predicted_bytes', s['predicted_bytes']))} "
              f"| {s['status']}{': ' + s['finding'] if s.get('finding') else ''} |")
PY
cat "$OUT/gpu_table.md"
exit $status
