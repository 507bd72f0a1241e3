#!/usr/bin/env bash
# A/B timing of CUDA FPS kernels on the GPU host: each fps.cu is linked alone into driver.cu
# (with the tree's CPU kernel as the oracle: every run's indices must equal the CPU's), then the
# binaries run in turn, twice, so that drift between runs shows beside the difference.
#
#   bash benchmarks/fps_ab/run.sh NAME=FILE.cu ...   # default: tree=ops-src/csrc/cuda/fps.cu
#   SANITIZE=1 ...   # also compute-sanitizer memcheck and racecheck over the "quick" shapes
#
# A version from git, made before the call: git show REV:ops-src/csrc/cuda/fps.cu > out/fps-main.cu
# Builds in OUT_DIR (default /tmp/fps-ab), side by side; ARCH (default native).
set -u
cd "$(dirname "$0")/../.."
out=${OUT_DIR:-/tmp/fps-ab}
csrc=ops-src/csrc
mkdir -p "$out"
[ $# -gt 0 ] || set -- tree=$csrc/cuda/fps.cu
names=()
for spec in "$@"; do
  name=${spec%%=*}
  names+=("$name")
  rm -f "$out/$name"  # a failed build must not leave an earlier binary to be timed
  nvcc -O3 -std=c++17 -arch="${ARCH:-native}" --expt-relaxed-constexpr -I$csrc -I$csrc/cuda \
    benchmarks/fps_ab/driver.cu $csrc/tuning.cpp $csrc/cpu/fps_cpu.cpp $csrc/cpu/fps_kdtree.cpp \
    $csrc/cpu/parallel.cpp "${spec#*=}" -o "$out/$name" > "$out/$name.build.log" 2>&1 &
done
wait  # (a version's includes resolve through -I, so it may live anywhere)
status=0
for name in "${names[@]}"; do
  [ -x "$out/$name" ] || { echo "$name: build failed"; cat "$out/$name.build.log"; status=1; }
done
[ $status = 0 ] || exit 1
for round in 1 2; do
  for name in "${names[@]}"; do "$out/$name" "$name" || status=1; done
done
if [ "${SANITIZE:-0}" = 1 ]; then
  for name in "${names[@]}"; do
    for tool in memcheck racecheck; do
      compute-sanitizer --tool $tool --error-exitcode 3 "$out/$name" "$name" quick > "$out/$name.$tool.log" 2>&1
      echo "$name $tool rc=$? $(grep -h 'SUMMARY' "$out/$name.$tool.log" | tail -1)"
    done
  done
fi
exit $status
