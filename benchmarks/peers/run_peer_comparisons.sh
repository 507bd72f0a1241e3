#!/usr/bin/env bash
# The peer comparisons, on the GPU host after benchmarks/peers/build_peers.sh (from the repository
# root, with pointops importable, e.g. PYTHONPATH=<pip --target dir>):
#
#   bash benchmarks/peers/run_peer_comparisons.sh LOG_DIR
#
# Clients first (their own code and tests against pointops; correctness, side by side), then the
# timed comparisons one at a time on an idle GPU:
#   torch_cluster_tests  torch_cluster's test/ against pointops.compat.torch_cluster
#   pointcept            Pointcept's PTv1/PTv2 forward+backward and knn_query(1): pointops vs its library
#   openpoints           openpoints 0.1.2's PointNeXt-S forward+backward on pointnet2_batch_cuda
#   packed               bench_packed.py: the packed rows against Pointcept's library
#   peer_ops             bench_peer_ops.py: issue 19's op rows against pointnet2_ops, Pointcept, torch
#   chamfer              bench_chamfer.py (pytorch3d's column only where it was built)
#   torch_cluster        bench_torch_cluster.py: fps/knn/radius/grid against torch_cluster
#   pointnet2            Pointnet2_PyTorch's six cases, a training step: pointnet2_ops vs pointops
# Only when STEPS names it:
#   ptv2_compiled        Pointcept's PTv2 training step eager, compiled and with CUDA graphs, on
#                        pointops and on Pointcept's library (PTV2_TIMEOUT, default 900 s)
# STEPS picks a subset; DEADLINE (seconds since the start) bounds the whole run, STEP_TIMEOUT each
# step. summary.txt in LOG_DIR has one line per step.
set -uo pipefail
LOG_DIR=${1:?usage: run_peer_comparisons.sh LOG_DIR}
mkdir -p "$LOG_DIR"
PY="${PYTHON:-python3}"
PEERS=${PEERS:-.peers}
BUILT="$PEERS/build"
STEPS=" ${STEPS:-torch_cluster_tests pointcept openpoints packed peer_ops chamfer torch_cluster pointnet2} "
START=$SECONDS
SUMMARY="$LOG_DIR/summary.txt"
: > "$SUMMARY"

# shellcheck source=tests/gpu/bounded_steps.sh
RESULT_LINE='passed|failed|"ok"|x[0-9.]+|ratio'
source "$(dirname "$0")/../../tests/gpu/bounded_steps.sh"
pids=()
wanted torch_cluster_tests && { step torch_cluster_tests "$LOG_DIR/torch_cluster_tests.log" $PY benchmarks/clients/torch_cluster_tests/run_peer_tests.py \
  --src "$PEERS/pytorch_cluster" --json "$LOG_DIR/torch_cluster_tests.json" -- -q & pids+=($!); }
wanted pointcept && { step pointcept "$LOG_DIR/pointcept.log" $PY benchmarks/clients/pointcept_models.py all --pointcept "$PEERS/Pointcept" \
  --pointcept-lib "$BUILT/pointcept_pointops" --device cuda --out-dir "$LOG_DIR/pointcept" & pids+=($!); }
wanted openpoints && { step openpoints "$LOG_DIR/openpoints.log" $PY benchmarks/clients/openpoints_pointnext.py \
  --openpoints "$PEERS/openpoints-0.1.2" --device cuda & pids+=($!); }
for pid in "${pids[@]}"; do wait "$pid"; done

wanted packed && step packed "$LOG_DIR/packed.log" $PY benchmarks/bench_packed.py --pointcept-lib "$BUILT/pointcept_pointops" \
  --json "$LOG_DIR/bench_packed.json"
wanted peer_ops && step peer_ops "$LOG_DIR/peer_ops.log" $PY benchmarks/bench_peer_ops.py --pointnet2-ops "$BUILT/pointnet2_ops" \
  --pointcept-lib "$BUILT/pointcept_pointops" --json "$LOG_DIR/bench_peer_ops.json"
# the short one first; then torch_cluster, whose 1M-point fps takes seconds per call
wanted chamfer && step chamfer "$LOG_DIR/chamfer.log" $PY benchmarks/bench_chamfer.py --pytorch3d-lib "$BUILT/pytorch3d" \
  --json "$LOG_DIR/bench_chamfer.json"
wanted torch_cluster && STEP_TIMEOUT=${TC_TIMEOUT:-240} step torch_cluster "$LOG_DIR/torch_cluster.log" \
  $PY benchmarks/bench_torch_cluster.py --torch-cluster-lib "$BUILT/torch_cluster" --json "$LOG_DIR/bench_torch_cluster.json"
# six models, each timed on both libraries and their gradients compared: about 4 minutes
wanted pointnet2 && STEP_TIMEOUT=${PN2_TIMEOUT:-300} step pointnet2 "$LOG_DIR/pointnet2.log" $PY benchmarks/clients/pointnet2_training.py all --peer "$PEERS/Pointnet2_PyTorch" \
  --pointnet2-ops "$BUILT/pointnet2_ops" --device cuda --steps "${PN2_STEPS:-20}" --warmup "${PN2_WARMUP:-5}" \
  --out-dir "$LOG_DIR/pointnet2" --json "$LOG_DIR/pointnet2.json"
wanted ptv2_compiled && STEP_TIMEOUT=${PTV2_TIMEOUT:-900} step ptv2_compiled "$LOG_DIR/ptv2_compiled.log" \
  $PY benchmarks/clients/pointcept_models.py all --pointcept "$PEERS/Pointcept" --pointcept-lib "$BUILT/pointcept_pointops" \
  --device cuda --models ptv2 --steps 10 --warmup 3 --compile default --compile reduce-overhead \
  --out-dir "$LOG_DIR/ptv2_compiled" --json "$LOG_DIR/ptv2_compiled.json"

echo "== peer comparisons ($((SECONDS - START)) s)"
cat "$SUMMARY"
