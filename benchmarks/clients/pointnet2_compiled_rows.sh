#!/usr/bin/env bash
# The H200 baseline's compiled PointNet++ rows (issue 48): each case of pointnet2_training.py with
# pointnet2_ops eager against pointops eager, compiled and CUDA graphs (mode "reduce-overhead"),
# a fresh process each, one case after another, then `compare` over what ran.
#
#   bash benchmarks/clients/pointnet2_compiled_rows.sh OUT_DIR [CASE...]    # default: all six
#
# No case starts after DEADLINE seconds (default 3000), and a running one is stopped there, so
# that a short device call still reports the cases it finished. Env: PEER
# (.peers/Pointnet2_PyTorch), PN2_OPS (.peers/build/pointnet2_ops, from build_peers.sh), STEPS
# (20), WARMUP (5), ROUNDS (3): the three runs in a row are three rounds of STEPS timed steps in
# each process, one after another, so that a model compiles once for all three (a case took about
# 110 s on an H100, most of it four interpreters starting and two compilations); a row passes
# only if every round does.
set -u
out=${1:?usage: pointnet2_compiled_rows.sh OUT_DIR [CASE...]}
shift
cases=${*:-cls-ssg-1024 cls-ssg-4096 cls-msg-1024 cls-msg-4096 sem-ssg-4096 sem-msg-4096}
harness=benchmarks/clients/pointnet2_training.py
end=$((SECONDS + ${DEADLINE:-3000}))
mkdir -p "$out"
for case in $cases; do
  left=$((end - SECONDS))
  if [ $left -lt 30 ]; then
    echo "$case: not started (deadline)" | tee -a "$out/skipped.txt"
    continue
  fi
  start=$SECONDS
  timeout -k 5 $left python3 $harness all --peer "${PEER:-.peers/Pointnet2_PyTorch}" \
    --pointnet2-ops "${PN2_OPS:-.peers/build/pointnet2_ops}" --device cuda --no-dropout --no-audit \
    --steps "${STEPS:-20}" --warmup "${WARMUP:-5}" --rounds "${ROUNDS:-3}" --compile default --compile reduce-overhead \
    --compile-variants pointops --cases "$case" --out-dir "$out" > "$out/$case.log" 2>&1
  echo "$case rc=$? $((SECONDS - start))s" | tee -a "$out/status.txt"
done
python3 $harness compare "$out" --json "$out/report.json"
