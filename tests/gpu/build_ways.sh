#!/usr/bin/env bash
# pointops built every way a user builds it, on the GPU host, each put through the GPU suite:
#
#   tests/gpu/build_ways.sh [NAME=SITE_DIR ...]
#
# Source builds here, side by side from private copies of ops-src, for this GPU's arch:
#   source-default   the compiler first on PATH (where it links libstdc++ statically, setup.py
#                    must refuse it with its message: that refusal counts as passing)
#   source-system    CXX=/usr/bin/g++, the system compiler torch was built to run with
# NAME=SITE_DIR adds builds made elsewhere (a wheel built on the CPU machine, a conda package
# unpacked), each already installed under SITE_DIR.
#
# Each build that exists then runs run_device_suite.sh's STEPS (default "pytest memcheck"; the
# oracle needs no build and runs once when asked: ORACLE_ONCE=1), one after another so that a
# crashed worker or a sanitizer error is charged to the build that caused it. pytest runs
# tests/ops and tests/compat on PYTEST_WORKERS (default 8) xdist workers: a crashed worker fails
# the step. Logs and summary.txt (one line per build and step) go to ${OUT:-/tmp/pointops-ways}.
set -uo pipefail
cd "$(dirname "$0")/../.."
LOGS="${OUT:-/tmp/pointops-ways}"
mkdir -p "$LOGS"
PY="${PYTHON:-python3}"
SUMMARY="$LOGS/summary.txt"
: > "$SUMMARY"
WORK=/tmp/pointops-ways
rm -rf "$WORK" && mkdir -p "$WORK"
ARCH="${TORCH_CUDA_ARCH_LIST:-$($PY -c 'import torch; print("%d.%d" % torch.cuda.get_device_capability())')}"

{
  echo "== compilers"
  for c in $(which -a g++ c++ 2>/dev/null | sort -u); do
    echo "$c -> $(readlink -f "$c"): $("$c" --version | head -1)"
    file -b "$(readlink -f "$c")" | grep -q script && sed -n 1,5p "$(readlink -f "$c")"
  done
} | tee "$LOGS/compilers.txt"

build() {  # build NAME [VAR=VALUE ...]: pip install --target from a private copy of ops-src
  local name=$1 began=$SECONDS rc
  shift
  cp -r ops-src "$WORK/src-$name"
  (cd "$WORK/src-$name" && env "$@" TORCH_CUDA_ARCH_LIST="$ARCH" POINTOPS_CUDA=1 MAX_JOBS=8 \
    $PY -m pip install -v --no-deps --no-build-isolation --target "$WORK/site-$name" .) \
    > "$LOGS/build-$name.log" 2>&1
  rc=$?
  local said
  said=$(grep -m1 -o "pointops build error: .\{0,300\}" "$LOGS/build-$name.log")
  echo "build $name rc=$rc $((SECONDS - began))s ${said:-}" >> "$SUMMARY"
}

build source-default &
build source-system CXX=/usr/bin/g++ &
wait

SITES=()
for name in source-default source-system; do
  if [ -d "$WORK/site-$name/pointops" ]; then
    SITES+=("$name=$WORK/site-$name")
  elif grep -q -e "links libstdc++ statically" -e "a C++ runtime other than the one torch uses" \
    "$LOGS/build-$name.log"; then
    # refused before compiling (a static-libstdc++ linker) or after linking (the load check)
    echo "$name refused by setup.py (its own C++ runtime): as intended" >> "$SUMMARY"
  fi
done
SITES+=("$@")
# the suite's own build tests compile ops-src again: with the compiler that works here
if grep -q "pointops build error" "$LOGS/build-source-default.log" && [ -z "${CXX:-}" ]; then
  export CXX=/usr/bin/g++
  echo "suites run with CXX=$CXX (the default compiler was refused)" >> "$SUMMARY"
fi

export POINTOPS_PYTEST_ARGS="tests/compat -n ${PYTEST_WORKERS:-8} ${POINTOPS_PYTEST_ARGS:-}"
oracle=" oracle"
[ "${ORACLE_ONCE:-0}" = 1 ] || oracle=""
status=0
for entry in "${SITES[@]}"; do
  name=${entry%%=*}
  site=${entry#*=}
  OUT="$LOGS/$name" STEPS="${STEPS:-pytest memcheck}$oracle" tests/gpu/run_device_suite.sh "$site" \
    > "$LOGS/suite-$name.log" 2>&1 || status=1
  oracle=""
  sed "s/^/$name /" "$LOGS/$name/summary.txt" >> "$SUMMARY"
done
echo "== summary"
cat "$SUMMARY"
exit $status
