#!/usr/bin/env bash
# The GPU release checks in two device calls (the peers take longer to build than one call lasts:
# torch_cluster alone did not finish in 600 s on the 16-core H200 host).
#
#   bash tests/gpu/release_calls.sh suite SITE_DIR     # call 1: peer builds start in the background
#                                                      # (setsid: they outlive the call), then the GPU suite
#   bash tests/gpu/release_calls.sh compare SITE_DIR   # call 2: waits for the builds (bounded; on a fresh
#                                                      # machine it starts them), then the peer comparisons
#                                                      # and the bench
#   bash tests/gpu/release_calls.sh cpu SITE_DIR       # the CPU neighbour bench on the host's cores
#   bash tests/gpu/release_calls.sh profile SITE_DIR   # per-kernel profiles (packed rows, PointNet++)
#
# SITE_DIR holds the pointops under test (tests/gpu/install_wheel.sh prints it). Call 2 must not
# carry .peers again: that would replace the peers built there in call 1. Logs go to /tmp/release; each call tars them into $OUT/logs-<step>.tgz every 15 s, so a
# call cut off at its limit still brings back what it had. TOTAL (default 555) bounds a call in
# seconds; ORACLE names a prebuilt tests/gpu/kernel_oracle (else the suite builds it with nvcc).
set -u
STEP=${1:?usage: release_calls.sh suite|compare|cpu|profile SITE_DIR}
SITE=$(cd "${2:?usage: release_calls.sh suite|compare|cpu|profile SITE_DIR}" && pwd)
T0=$SECONDS
TOTAL=${TOTAL:-555}
L=/tmp/release
mkdir -p "$L/build" "$L/gpu" "$L/peers" "$L/bench"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
pack() { tar czf "$OUT/logs-$STEP.tgz.tmp" -C "$L" --exclude='*.pt' . 2>/dev/null && mv "$OUT/logs-$STEP.tgz.tmp" "$OUT/logs-$STEP.tgz"; }
(while sleep 15; do pack; done) &
PACKER=$!
left() { echo $((TOTAL - (SECONDS - T0))); }
# the peers build against this machine's torch, each into its own --target directory; setsid:
# the builds outlive the call
start_peer_builds() {
  PYTHONPATH= setsid bash benchmarks/peers/build_peers.sh "$L/build" > /dev/null 2>&1 < /dev/null &
}

case "$STEP" in
  suite)
    start_peer_builds
    OUT=$L/gpu DEADLINE=$(left) STEP_TIMEOUT=400 POINTOPS_PYTEST_K=${POINTOPS_PYTEST_K:-"cuda or gpu"} \
      POINTOPS_PYTEST_ARGS=${POINTOPS_PYTEST_ARGS:-"-n 12 tests/compat"} STEPS="oracle pytest memcheck racecheck" \
      bash tests/gpu/run_device_suite.sh "$SITE" > "$L/suite.log" 2>&1
    ;;
  compare)
    if [ ! -f "$L/build/status.txt" ]; then  # a fresh machine: call 1's builds are gone
      start_peer_builds
      sleep 1
    fi
    while ! grep -q '^done' "$L/build/status.txt" 2>/dev/null && [ "$(left)" -gt 300 ]; do sleep 5; done
    DEADLINE=$(($(left) - 90)) STEP_TIMEOUT=130 bash benchmarks/peers/run_peer_comparisons.sh "$L/peers" \
      > "$L/peers.log" 2>&1
    OUT=$L/bench DEADLINE=$(left) STEPS=bench bash tests/gpu/run_device_suite.sh "$SITE" > "$L/bench.log" 2>&1
    ;;
  cpu)
    # issue 21's scaling rows on this host's cores (pykdtree from .whl; fpsample has no wheel)
    timeout "$(left)" python3 benchmarks/bench_cpu_neighbors.py --reps 3 --json "$L/bench/cpu_neighbors.json" \
      > "$L/bench/cpu_neighbors.log" 2>&1
    echo "cpu_neighbors rc=$?" >> "$L/bench/summary.txt"
    ;;
  profile)
    # where the time goes: bench_packed's rows (issue 18) and steady PointNet++ steps (issue 19)
    timeout "$(left)" python3 benchmarks/profile_kernels.py --packed --reps 10 > "$L/bench/profile_packed.log" 2>&1
    echo "profile_packed rc=$?" >> "$L/bench/summary.txt"
    for case in sem-ssg-4096 cls-ssg-1024; do
      timeout "$(left)" python3 benchmarks/clients/pointnet2_training.py run --peer .peers/Pointnet2_PyTorch \
        --variant pointops --case "$case" --out "$L/bench/pn2-$case.pt" --steps 5 --warmup 3 --no-audit \
        --no-reference-model --profile-steps 3 > "$L/bench/profile_$case.log" 2>&1
      echo "profile_$case rc=$?" >> "$L/bench/summary.txt"
    done
    ;;
  *) echo "release_calls.sh: unknown step $STEP (suite, compare, cpu or profile)" >&2; exit 2 ;;
esac
kill "$PACKER" 2>/dev/null
pack
cat "$L"/build/status.txt "$L"/*/summary.txt 2>/dev/null
