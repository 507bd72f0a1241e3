#!/usr/bin/env bash
# The pointops GPU release checks, run on a machine with an NVIDIA GPU from the repository root:
#
#   tests/gpu/run_device_suite.sh [SITE_DIR]
#
# SITE_DIR holds an installed pointops (e.g. built elsewhere with POINTOPS_CUDA=1 and
# `pip install --target`); this proves one binary works under the torch found here. Without it,
# pointops is built here first (pip install --no-build-isolation, arch list from
# TORCH_CUDA_ARCH_LIST or the GPU's own capability).
#
# Steps (STEPS, default "oracle pytest memcheck racecheck bench"):
#   oracle     tests/gpu/kernel_oracle.cu `check`: every CUDA path against the CPU kernels, no torch
#              (ORACLE names a prebuilt binary; otherwise nvcc builds one here)
#   pytest     tests/ops, CUDA cases included (POINTOPS_PYTEST_K selects, POINTOPS_PYTEST_ARGS adds)
#   memcheck   compute-sanitizer over tests/gpu/sanitizer_workload.py (default paths, and small
#   racecheck  clouds forced onto the grid and non-cluster FPS paths) and over the oracle
#   bench      benchmarks/bench_gpu.py --quick
# oracle and pytest run side by side, then memcheck and racecheck side by side, then bench alone
# (timings need an idle GPU). Each step is bounded by STEP_TIMEOUT seconds (default 600) and by
# DEADLINE (seconds since the start, default none). Logs go to ${OUT:-/tmp/pointops-gpu};
# summary.txt there has one line per step: name, exit status, seconds, the log's last result line.
# The exit status is non-zero if any step failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
LOGS="${OUT:-/tmp/pointops-gpu}"
mkdir -p "$LOGS"
PY="${PYTHON:-python3}"
STEPS=" ${STEPS:-oracle pytest memcheck racecheck bench} "
START=$SECONDS
SUMMARY="$LOGS/summary.txt"
: > "$SUMMARY"

if [ $# -ge 1 ]; then
  export PYTHONPATH="$(cd "$1" && pwd)${PYTHONPATH:+:$PYTHONPATH}"
else
  SITE=/tmp/pointops-site
  if [ -z "${TORCH_CUDA_ARCH_LIST:-}" ]; then
    TORCH_CUDA_ARCH_LIST="$($PY -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability())')"
    export TORCH_CUDA_ARCH_LIST
  fi
  POINTOPS_CUDA=1 $PY -m pip install -q --no-deps --no-build-isolation --target "$SITE" ./ops-src \
    > "$LOGS/build.log" 2>&1 || { echo "build failed, see $LOGS/build.log"; tail -40 "$LOGS/build.log"; exit 1; }
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi

# shellcheck source=tests/gpu/bounded_steps.sh
RESULT_LINE="passed|failed|failure|ERROR SUMMARY|RACECHECK SUMMARY|PASS|MISS|error"
source tests/gpu/bounded_steps.sh  # (the script runs from the repository root)

status=0
echo "== environment"
$PY - <<'PY' | tee "$LOGS/env.txt"
import torch, pointops
print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.get_device_name(0))
print("pointops", pointops.__file__)
print("build_info", pointops.build_info())
PY

ORACLE_BIN=${ORACLE:-}
if wanted oracle && [ -z "$ORACLE_BIN" ]; then
  ORACLE_BIN="$LOGS/kernel_oracle"
  nvcc -O3 -std=c++17 -arch=native --expt-relaxed-constexpr -Iops-src/csrc tests/gpu/kernel_oracle.cu \
    ops-src/csrc/cuda/*.cu ops-src/csrc/cpu/*.cpp ops-src/csrc/tuning.cpp -o "$ORACLE_BIN" \
    > "$LOGS/oracle-build.log" 2>&1 || { echo "oracle build-failed" >> "$SUMMARY"; status=1; STEPS=${STEPS/ oracle / }; }
fi

pids=()
if wanted oracle; then
  step oracle "$LOGS/oracle.log" "$ORACLE_BIN" check &
  pids+=($!)
fi
if wanted pytest; then
  # shellcheck disable=SC2086
  step pytest "$LOGS/pytest.log" $PY -m pytest -q -p no:cacheprovider tests/ops -rs \
    ${POINTOPS_PYTEST_K:+-k "$POINTOPS_PYTEST_K"} ${POINTOPS_PYTEST_ARGS:-} &
  pids+=($!)
fi
for pid in "${pids[@]}"; do wait "$pid" || status=1; done

# memcheck: the whole workload on both path sets, and the oracle's `small` run. racecheck is far
# slower (159 s did not finish the whole workload on an H200): the small-cloud pass without the
# large clouds, and the oracle's `tiny` run.
pids=()
sanitize() {  # sanitize TOOL NAME COMMAND...
  local tool=$1 name=$2
  shift 2
  step "$tool-$name" "$LOGS/sanitizer-$tool-$name.log" compute-sanitizer --tool "$tool" --error-exitcode 3 \
    --target-processes all "$@" &
  pids+=($!)
}
SMALL_ON_LARGE=(env POINTOPS_GRID_MIN_POINTS=64 POINTOPS_FPS_NO_CLUSTER=1 POINTOPS_BALL_QUERY_LANES=1)
if wanted memcheck; then
  sanitize memcheck default $PY tests/gpu/sanitizer_workload.py
  sanitize memcheck small-clouds-on-large-paths "${SMALL_ON_LARGE[@]}" $PY tests/gpu/sanitizer_workload.py
  [ -n "$ORACLE_BIN" ] && sanitize memcheck oracle-small "$ORACLE_BIN" small
fi
if wanted racecheck; then
  sanitize racecheck small-clouds-on-large-paths "${SMALL_ON_LARGE[@]}" SANITIZER_WORKLOAD_LARGE=0 \
    $PY tests/gpu/sanitizer_workload.py
  [ -n "$ORACLE_BIN" ] && sanitize racecheck oracle-tiny "$ORACLE_BIN" tiny
fi
for pid in "${pids[@]}"; do wait "$pid" || status=1; done

if wanted bench; then
  step bench "$LOGS/bench_gpu.txt" $PY benchmarks/bench_gpu.py --quick --json "$LOGS/bench_gpu.json" || status=1
fi

echo "== summary ($((SECONDS - START)) s)"
cat "$SUMMARY"
exit $status
