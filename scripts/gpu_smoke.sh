#!/usr/bin/env bash
# GPU smoke check, a few minutes on one GPU; not part of CI.
#
#   scripts/gpu_smoke.sh                      # uses .venv, building it with the Makefile's TORCH if missing
#   TORCH="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128" scripts/gpu_smoke.sh
#
# 1. builds .venv if needed (`make install`, honouring TORCH when it is set);
# 2. stops with a clear message unless that torch sees a CUDA device;
# 3. `python -m icl bench --device cuda` (icl against plain full attention, on the GPU);
# 4. the paper profile's plan on the GPU (`icl reproduce --profile paper --device cuda --plan`:
#    runs, steps, FLOPs, the largest group's memory against the GPU's, a time from steps timed there);
# 5. a short paper-profile-like sweep on the GPU: softmax, difficult task, depths 1..256 in one
#    batched stack, dim 32, context 128, key_dim 8, batch 512, STEPS steps (default 300);
# and prints steps per second for both. Everything lands in OUT (default outputs/gpu_smoke/).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT="${OUT:-outputs/gpu_smoke}"
STEPS="${STEPS:-300}"
PY=.venv/bin/python
mkdir -p "$OUT"

if [ -n "${TORCH:-}" ]; then make install TORCH="$TORCH"; else make install; fi

if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "gpu_smoke: the torch in .venv ($("$PY" -c 'import torch; print(torch.__version__)')) sees no CUDA device." >&2
  echo "gpu_smoke: on a GPU machine rerun with a CUDA build, e.g." >&2
  echo "  TORCH=\"torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128\" $0" >&2
  exit 1
fi
"$PY" -c 'import torch; print("gpu_smoke:", torch.__version__, torch.cuda.get_device_name(0))'

echo "gpu_smoke: [1/3] bench on cuda"
"$PY" -m icl bench --device cuda --json "$OUT/bench.json"

echo "gpu_smoke: [2/3] the paper profile's plan on cuda"
"$PY" -m icl reproduce --profile paper --device cuda --plan 2>&1 | tee "$OUT/plan.txt"

echo "gpu_smoke: [3/3] paper-like softmax sweep, depths 1..256, $STEPS steps"
cat > "$OUT/sweep.yaml" <<EOF
# written by scripts/gpu_smoke.sh
model: softmax
task: difficult
device: cuda
dim: 32
context_length: 128
key_dim: 8
batch_size: 512
steps: $STEPS
eval_contexts: 4096
eval_points: 4
depths: [1, 2, 4, 8, 16, 32, 64, 128, 256]
EOF
rm -rf "$OUT/runs"  # a fresh cache, so the sweep really trains
start=$(date +%s)
"$PY" -m icl sweep "$OUT/sweep.yaml" --cache "$OUT/runs" --json "$OUT/sweep.json" --no-progress
echo "gpu_smoke: sweep took $(( $(date +%s) - start )) s in all (with start-up and evaluation)"
"$PY" - "$OUT/sweep.json" <<'EOF'
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
r = runs[0]
print(f"gpu_smoke: sweep of {len(runs)} models ({sum(x['config']['depth'] for x in runs)} layers) in one pass: "
      f"{r['steps_per_second']:.1f} steps/s on {r['device']}")
for x in runs:
    print(f"  depth {x['config']['depth']:>3}: relative loss {x['initial_loss']:.3f} -> {x['final_loss']:.3f}")
EOF
echo "gpu_smoke: done; results in $OUT/"
