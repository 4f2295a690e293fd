#!/usr/bin/env bash
# The GPU check (issue 58): what one GPU does with this repository, in under 8 minutes of one H200
# by issue 47's measured numbers, with no network.
#
#   PYTHON=/opt/py/bin/python WHEELS=wheels scripts/gpu_check.sh [--cpu] [OUT]
#
# PYTHON: a Python with torch (a CUDA build; default .venv/bin/python). WHEELS: a folder of the
# wheels in scripts/gpu_check_requirements.txt (pip download, where there is a network), installed
# with --no-index; without it the packages must be there already. OUT: where everything goes
# (default outputs/gpu_check). --cpu runs every part on the CPU (what the tests run, tiny).
#
# 1. versions (python, torch, CUDA, the GPU, the notebook packages, the commit);
# 2. every notebook at the paper profile's shapes (d, P, depths, ranks, batch) for two steps, four
#    at a time on a GPU (GPU_CHECK_JOBS), into OUT/smoke/. A two-step smoke spends its time not in
#    the two steps but in the untrained subspace ensembles (`baselines.all_curves`, ~3 s a (task,
#    rank) at depths to 256 on the host, whatever the evaluation set: 36 in notebook 03, more in
#    07) and in groups trained per seed and spectrum; so beside `--smoke`'s small sets it keeps one
#    spectrum of each kind and three seeds (gpu_check.py's CUTS says why three). Notebook 08's
#    loops now follow the smoke too (plan.SMOKE's context_*: they trained the profile's 4,000 steps);
# 3. issue 47's two measured groups timed again (scripts/gpu_check.py groups);
# 4. one quick-shape config on the CPU and on the device, several seeds, compared in distribution;
# 5. OUT/gpu_check.md, the report.
# Sizes (the defaults are the GPU run's; tests/test_gpu_check.py shrinks them): GPU_CHECK_PROFILE,
# GPU_CHECK_ONLY (notebooks, space-separated), GPU_CHECK_JOBS, GPU_CHECK_GROUP_STEPS, GPU_CHECK_GROUP_DEPTHS
# (comma-separated), GPU_CHECK_COMPARE_STEPS, GPU_CHECK_COMPARE_SEEDS, GPU_CHECK_COMPARE_DEPTHS.
# A part that fails is reported and the next one runs; the exit status is the first failure's.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
DEVICE=cuda
if [ "${1:-}" = --cpu ]; then DEVICE=cpu; shift; fi
OUT=$(realpath -m "${1:-${OUT:-outputs/gpu_check}}")
PY=${PYTHON:-.venv/bin/python}
PROFILE=${GPU_CHECK_PROFILE:-paper}
# notebooks at once in the smoke (each one thread); the CPU's check one at a time, so that its times are a notebook's own
JOBS=${GPU_CHECK_JOBS:-$([ "$DEVICE" = cuda ] && echo 4 || echo 1)}
GROUP_DEPTHS=${GPU_CHECK_GROUP_DEPTHS:+--depths $GPU_CHECK_GROUP_DEPTHS}
COMPARE_DEPTHS=${GPU_CHECK_COMPARE_DEPTHS:+--depths $GPU_CHECK_COMPARE_DEPTHS}
# the notebook kernels import this checkout's icl, installed or not
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"
START=$(date +%s)
say() { echo "gpu_check: $*"; }
status=0
fail() { say "FAILED: $*"; [ "$status" != 0 ] || status=1; }

if [ -n "${WHEELS:-}" ]; then
  say "installing scripts/gpu_check_requirements.txt from $WHEELS (no network)"
  "$PY" -m pip install -q --no-index --find-links "$WHEELS" -r scripts/gpu_check_requirements.txt
fi
if ! "$PY" -c 'import torch, numpy, scipy, pandas, matplotlib, papermill, ipykernel, yaml, tqdm' 2>/dev/null; then
  say "$PY lacks torch or a notebook package; give WHEELS=<folder of the wheels in scripts/gpu_check_requirements.txt>" >&2
  exit 2
fi
if [ "$DEVICE" = cuda ] && ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  say "the torch of $PY sees no CUDA device; give PYTHON=<a Python with a CUDA build of torch>, or --cpu" >&2
  exit 2
fi

say "[1/5] versions"
"$PY" scripts/gpu_check.py versions "$OUT/versions.json" || fail versions

say "[2/5] every notebook of the $PROFILE profile for two steps on $DEVICE"
# shellcheck disable=SC2086  # GPU_CHECK_ONLY is a list of words
mapfile -t CUTS < <("$PY" scripts/gpu_check.py cuts "$PROFILE" ${GPU_CHECK_ONLY:-})
[ "${#CUTS[@]}" -gt 0 ] || { say "no smoke parameters for $PROFILE ${GPU_CHECK_ONLY:-}" >&2; exit 2; }
rm -rf "$OUT/smoke"
start=$(date +%s)
# shellcheck disable=SC2086  # GPU_CHECK_ONLY is a list of words
ICL_OUTPUT_ROOT="$OUT" "$PY" -m icl reproduce --profile "$PROFILE" --device "$DEVICE" --jobs "$JOBS" --yes \
  --outputs "$OUT/smoke" ${GPU_CHECK_ONLY:+--only $GPU_CHECK_ONLY} "${CUTS[@]}" 2>&1 | tee "$OUT/smoke.log" \
  || fail "a notebook (see $OUT/smoke.log)"
echo $(( $(date +%s) - start )) > "$OUT/smoke_seconds.txt"

say "[3/5] the two measured groups, timed again"
# shellcheck disable=SC2086
"$PY" scripts/gpu_check.py groups "$OUT/groups.json" --device "$DEVICE" --steps "${GPU_CHECK_GROUP_STEPS:-400}" \
  $GROUP_DEPTHS || fail groups

say "[4/5] the CPU against $DEVICE in distribution"
# shellcheck disable=SC2086
"$PY" scripts/gpu_check.py compare "$OUT/compare.json" --device "$DEVICE" --steps "${GPU_CHECK_COMPARE_STEPS:-300}" \
  --seeds "${GPU_CHECK_COMPARE_SEEDS:-8}" $COMPARE_DEPTHS || fail "compare (the CPU and $DEVICE disagree, or it broke)"

say "[5/5] the report"
echo $(( $(date +%s) - START )) > "$OUT/total_seconds.txt"
"$PY" scripts/gpu_check.py report "$OUT" || fail report
say "done: $OUT/gpu_check.md"
exit "$status"
