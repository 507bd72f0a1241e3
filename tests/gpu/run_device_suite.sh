#!/usr/bin/env bash
# The pointops GPU suite, run on a machine with an NVIDIA GPU from the repository root:
#
#   tests/gpu/run_device_suite.sh [SITE_DIR]
#
# SITE_DIR holds an installed pointops (e.g. built elsewhere with POINTOPS_CUDA=1 and
# `pip install --target`); this proves one binary works under the torch found here. Without it,
# pointops is built here first (pip install --no-build-isolation, arch list from
# TORCH_CUDA_ARCH_LIST or the GPU's own capability). Runs:
#   1. the whole tests/ops suite (CUDA-parametrized and CUDA-only tests included);
#   2. compute-sanitizer memcheck and racecheck over tests/gpu/sanitizer_workload.py.
# Logs go to ${OUT:-/tmp/pointops-gpu}; the exit status is non-zero if any step failed.
# POINTOPS_PYTEST_ARGS adds pytest arguments, split on spaces with no quoting (so a -k
# expression belongs in POINTOPS_PYTEST_K); PYTEST_TIMEOUT / SANITIZER_TIMEOUT bound each step (seconds);
# SANITIZER_TOOLS (default 'memcheck racecheck') picks the compute-sanitizer tools;
# POINTOPS_PYTEST_K selects tests by keyword (e.g. 'cuda or gpu' for the CUDA cases only).
set -uo pipefail
cd "$(dirname "$0")/../.."
LOGS="${OUT:-/tmp/pointops-gpu}"
mkdir -p "$LOGS"
PY="${PYTHON:-python3}"
status=0

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

echo "== environment"
$PY - <<'PY' | tee "$LOGS/env.txt"
import torch, pointops
print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.get_device_name(0))
print("pointops", pointops.__file__)
print("build_info", pointops.build_info())
PY

echo "== pytest tests/ops"
# shellcheck disable=SC2086
timeout "${PYTEST_TIMEOUT:-1200}" $PY -m pytest -q -p no:cacheprovider tests/ops -rs \
  ${POINTOPS_PYTEST_K:+-k "$POINTOPS_PYTEST_K"} ${POINTOPS_PYTEST_ARGS:-} 2>&1 | tee "$LOGS/pytest.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

# Second pass: force the spatial-grid search and the non-cluster FPS paths on small clouds.
for paths in default small-clouds-on-large-paths; do
  if [ "$paths" = default ]; then knobs=(); else knobs=(POINTOPS_GRID_MIN_POINTS=64 POINTOPS_FPS_NO_CLUSTER=1); fi
  for tool in ${SANITIZER_TOOLS-memcheck racecheck}; do
    echo "== compute-sanitizer --tool $tool ($paths)"
    env "${knobs[@]}" timeout "${SANITIZER_TIMEOUT:-600}" compute-sanitizer --tool "$tool" --error-exitcode 3 \
      --target-processes all $PY tests/gpu/sanitizer_workload.py > "$LOGS/sanitizer-$tool-$paths.log" 2>&1
    rc=$?
    tail -5 "$LOGS/sanitizer-$tool-$paths.log"
    [ "$rc" -eq 0 ] || { echo "compute-sanitizer $tool ($paths): exit $rc"; status=1; }
  done
done
exit $status
