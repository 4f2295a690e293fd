#!/usr/bin/env bash
# GPU smoke check on one GPU (the two smoke runs take longest: each is every notebook at the
# paper's shapes for two steps); not part of CI.
#
#   scripts/gpu_smoke.sh                      # uses .venv, building it with the Makefile's TORCH if missing
#   TORCH="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128" scripts/gpu_smoke.sh
#
# 1. builds .venv if needed (`make install`, honouring TORCH when it is set: a changed TORCH reinstalls torch);
# 2. stops with a clear message unless that torch sees a CUDA device;
# 3. `python -m benchmarks.bench --device cuda` (make bench's tool) (icl against plain full attention, on the GPU);
# 4. the paper profile's plan on the GPU (`icl reproduce --profile paper --device cuda --plan`);
# 5. `icl reproduce --profile paper --device cuda --smoke` twice, and checks that both give the same
#    bits: every notebook's results.json (its timings aside) and tables (*.csv), byte for byte;
# 6. a short paper-profile-like sweep on the GPU: softmax, difficult task, depths 1..256 in one
#    batched stack, dim 32, context 128, key_dim 8, batch 512, STEPS steps (default 300);
# and prints steps per second. Everything lands in OUT (default outputs/gpu_smoke/). It stops at
# the first step that fails, except that two smoke runs that differ fail it only at the end.
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

echo "gpu_smoke: [1/4] bench on cuda"
"$PY" -m benchmarks.bench --device cuda --json "$OUT/bench.json"

echo "gpu_smoke: [2/4] the paper profile's plan on cuda"
"$PY" -m icl reproduce --profile paper --device cuda --plan 2>&1 | tee "$OUT/plan.txt"

echo "gpu_smoke: [3/4] the paper profile's smoke run on cuda, twice: the same bits?"
for run in 1 2; do
  start=$(date +%s)
  "$PY" -m icl reproduce --profile paper --device cuda --smoke 2>&1 | tee "$OUT/smoke_$run.txt"
  echo "gpu_smoke: smoke run $run took $(( $(date +%s) - start )) s"
  rm -rf "$OUT/smoke_$run" && cp -r outputs/smoke/paper "$OUT/smoke_$run"
done
same_bits=yes
"$PY" - "$OUT/smoke_1" "$OUT/smoke_2" <<'EOF' | tee "$OUT/smoke_bits.txt" || same_bits=no
import json, sys
from pathlib import Path

TIMES = ("seconds", "wall", "per_second")  # keys whose values are timings, not results

def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if not any(t in k for t in TIMES)}
    return [strip(v) for v in x] if isinstance(x, list) else x

a, b = map(Path, sys.argv[1:])
files = sorted(p.relative_to(a) for p in a.glob("*/*") if p.suffix in (".json", ".csv"))
same = lambda f: (strip(json.loads((a / f).read_text())) == strip(json.loads((b / f).read_text())) if f.suffix == ".json"
                  else (a / f).read_bytes() == (b / f).read_bytes())
differ = [f for f in files if not (b / f).exists() or not same(f)]
print(f"gpu_smoke: {len(files) - len(differ)} of {len(files)} result files are the same in both smoke runs")
for f in differ:
    print(f"gpu_smoke: DIFFERS: {f}")
if differ:
    print("gpu_smoke: two CUDA runs differ (icl does not set torch.use_deterministic_algorithms; the backward "
          "of indexing, e.g., adds with atomics)")
sys.exit(1 if differ else 0)
EOF

echo "gpu_smoke: [4/4] paper-like softmax sweep, depths 1..256, $STEPS steps"
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
[ "$same_bits" = yes ] || { echo "gpu_smoke: FAILED: the two smoke runs differ (see $OUT/smoke_bits.txt)" >&2; exit 1; }
