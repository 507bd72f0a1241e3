#!/usr/bin/env bash
# Every GPU run the open issues wait on, in one master that outlives a device call (setsid), so
# that builds, suites and proofs share the host's 16 cores instead of waiting for each other:
#
#   tests/gpu/open_proofs.sh start WHEEL [CONDA_SITE_TGZ] # call 1: starts the master, then waits
#   tests/gpu/open_proofs.sh wait [SECONDS]                # next calls: wait (default 560 s) and report
#
# WHEEL is a pointops-cu13 wheel built on the CPU machine (`solver wheels build pointops-cu13`);
# CONDA_SITE_TGZ the CUDA 13 conda package's files as a .tar.gz (tests/gpu/conda_site_tarball.sh
# makes it from the .conda of tests/recipes/test_rattler_build.py; without it the conda part is
# left out). Carry both, .peers/Pointnet2_PyTorch, .peers/mmcv-2.1.0 and .whl in call 1 only: a
# later call that carries .peers replaces the peer built there. Peers built on the CPU machine
# (benchmarks/peers/build_peers.sh there) may be carried as .peers/build instead of the peers
# part. Each call's $OUT gets proofs.tgz (every log) every 10 s, and its output ends with the
# timeline and every summary.
#
# Side by side, as soon as the master starts:
#   ways      tests/gpu/build_ways.sh: source-default (setup.py must refuse the static-libstdc++
#             compiler) and source-system (CXX=/usr/bin/g++) built here, then pytest (tests/ops,
#             tests/compat, tests/dropins: the PYTEST_K cases, as for the wheel and conda) and
#             memcheck on source-system
#   wheel     run_device_suite.sh on WHEEL: oracle, pytest (CUDA cases), memcheck, racecheck
#   conda     run_device_suite.sh on the conda package: pytest (CUDA cases), memcheck
#   hostile   compute-sanitizer memcheck over the CUDA cases of the hostile-input files (WHEEL), on
#             8 xdist workers (one process took 760 s for 7 % of them on an H100)
#   peers     the peers PEERS_ONLY names (default pointnet2_ops) built here (benchmarks/peers/build_peers.sh)
#   mmcv      tests/gpu/mmcv_proof.sh (build, import, mmdet, upstream test_ops), within
#             MMCV_DEADLINE seconds (default 1000; 0 leaves it out). Beside the other parts its
#             build did not finish in 600 s (73 of 136 objects): alone, mmcv_proof.sh takes one call
# Then, on an idle GPU: the PointNet++ training harness against pointnet2_ops (six cases),
# bench_gpu --quick; then (part `peerbench`, only when PARTS names it; pointnet2_ops, Pointcept's
# library and torch_cluster built) bench_peer_ops.py and bench_torch_cluster.py
# (run_peer_comparisons.sh) and bench_gpu.py --quick --ops gather_points three_interpolate fps,
# for sections peer_ops, torch_cluster and gather_host_time ($L/peerbench/*.json); last, as the
# one part a deadline bounds (part `rows`, only when PARTS names it: about 110 s a case), the six
# compiled PointNet++ rows of benchmarks/clients/pointnet2_compiled_rows.sh (ROUNDS=3, WHEEL as
# pointops, no case started after ROWS_DEADLINE seconds, default 1100), which
# `update_baseline.py KIND pointnet2_compiled $L/rows/report.json` records.
# With little device time left: SIDE_DEADLINE stops the side-by-side parts after that many
# seconds, PN2_TIMEOUT (default 500) bounds the harness.
# To finish what an earlier run left (fewer parts share the host's cores): PARTS (default
# "ways wheel conda hostile peers mmcv pointnet2 bench") names the parts to run, WHEEL_STEPS (default
# "oracle pytest memcheck racecheck") and CONDA_STEPS ("pytest memcheck") their steps,
# PYTEST_K ("cuda or gpu") the wheel's and conda's cases, CONDA_K and WAYS_K (default PYTEST_K)
# those of the conda package and the source build alone (after a change to one kernel file, its
# cases there, e.g. "test_ops_gpu or (cuda and (fps or furthest or farthest or sampl))", and the
# wheel's whole suite fit one call), HOSTILE_WORKERS (8) memcheck's xdist
# workers over the hostile files (its log names each case as it ends, so a run the deadline
# stops still says which ran).
set -u
L=/tmp/open-proofs
VERB=${1:?usage: open_proofs.sh start WHEEL [CONDA_SITE_TGZ] | wait [SECONDS]}
cd "$(dirname "$0")/../.."

wait_and_report() {
  local end=$((SECONDS + ${1:-560}))
  # tar exits 1 when a log grows while it reads it: that copy still comes back
  pack() {
    tar czf "$OUT/proofs.tgz.tmp" --exclude='*.pt' --exclude=kernel_oracle -C "$(dirname $L)" "$(basename $L)" 2> /dev/null
    [ $? -le 1 ] && mv "$OUT/proofs.tgz.tmp" "$OUT/proofs.tgz"
  }
  while [ $SECONDS -lt $end ] && [ ! -f $L/DONE ]; do
    sleep 10
    pack
  done
  pack
  cat $L/timeline.txt
  for f in $L/*/summary.txt; do [ -f "$f" ] && echo "== $f" && cat "$f"; done
  cat $L/peers/status.txt $L/rows/status.txt 2> /dev/null
  return 0
}

if [ "$VERB" = wait ]; then
  wait_and_report "${2:-560}"
  exit 0
fi
[ "$VERB" = start ] || { echo "usage: open_proofs.sh start WHEEL [CONDA_SITE_TGZ] | wait [SECONDS]" >&2; exit 2; }
WHEEL=$(readlink -f "${2:?start needs WHEEL}")
TGZ=${3:+$(readlink -f "$3")}

master() {
  export PYTHONUNBUFFERED=1
  local cases=${PYTEST_K:-cuda or gpu} parts=" ${PARTS:-ways wheel conda hostile peers mmcv pointnet2 bench} " pids=()
  note() { echo "$(date +%T) +$SECONDS s $*" >> $L/timeline.txt; }
  part() { [[ "$parts" == *" $1 "* ]]; }
  note start
  python3 -m pip install -q --no-deps --no-index --target /tmp/site-wheel "$WHEEL" > $L/wheel-install.log 2>&1
  if [ -n "$TGZ" ]; then
    rm -rf /tmp/conda-site && mkdir -p /tmp/conda-site && tar xzf "$TGZ" -C /tmp/conda-site
  elif part conda; then
    note "conda: no CONDA_SITE_TGZ given, part left out"
    parts=${parts/ conda / }
  fi
  nvidia-smi > $L/nvidia-smi.txt 2>&1

  # SIDE_DEADLINE (seconds) stops every side-by-side part still running then (whole process
  # groups, through timeout), so that the harness and the bench fit in the device time left.
  local T=${SIDE_DEADLINE:-3000}
  if part peers; then
    (PYTHONPATH='' ONLY="${PEERS_ONLY:-pointnet2_ops}" MAX_JOBS=4 timeout -k 10 $T bash benchmarks/peers/build_peers.sh $L/peers > /dev/null 2>&1
      note peers rc=$?) &
    pids+=($!)
  fi
  if part mmcv && [ "${MMCV_DEADLINE:-1000}" != 0 ]; then
    (OUT=$L/mmcv DEADLINE=${MMCV_DEADLINE:-1000} MAX_JOBS=6 bash tests/gpu/mmcv_proof.sh > $L/mmcv.log 2>&1; note mmcv rc=$?) &
    pids+=($!)
  fi
  # side NAME CMD...: one side-by-side part in the background, its output in $L/NAME.log
  side() {
    local name=$1
    shift
    (timeout -k 10 $T "$@" > $L/$name.log 2>&1; note $name rc=$?) &
    pids+=($!)
  }
  # suite NAME STEPS SITE_DIR [K]: run_device_suite.sh's STEPS on one build of pointops, the
  # pytest cases K selects (default PYTEST_K's), each named as it ends (-vv after the suite's -q
  # is -v), so that a run the deadline stops still names its failures.
  suite() {
    side $1 env CXX=/usr/bin/g++ OUT=$L/$1 STEPS="$2" POINTOPS_PYTEST_K="${4:-$cases}" \
      POINTOPS_PYTEST_ARGS="tests/compat tests/dropins -n 5 -vv --basetemp /tmp/bt-$1" \
      bash tests/gpu/run_device_suite.sh "$3"
  }
  part ways && side ways env OUT=$L/ways POINTOPS_PYTEST_K="${WAYS_K:-$cases}" \
    POINTOPS_PYTEST_ARGS="tests/dropins -vv --basetemp /tmp/bt-ways" PYTEST_WORKERS=5 bash tests/gpu/build_ways.sh
  part hostile && side memcheck-hostile env PYTORCH_NO_CUDA_MEMORY_CACHING=1 PYTHONPATH=/tmp/site-wheel \
    compute-sanitizer --tool memcheck --error-exitcode 3 --target-processes all \
    python3 -m pytest -v -p no:cacheprovider -n ${HOSTILE_WORKERS:-8} -k cuda \
    tests/compat/test_*_hostile.py tests/compat/test_grid_cluster.py
  part wheel && suite wheel "${WHEEL_STEPS:-oracle pytest memcheck racecheck}" /tmp/site-wheel
  part conda && suite conda "${CONDA_STEPS:-pytest memcheck}" /tmp/conda-site/site-packages "${CONDA_K:-$cases}"
  wait "${pids[@]}"
  note side-by-side runs done

  # peers_built WHAT PEER...: whether each PEER is in .peers/build (built by the peers part, or
  # carried); notes WHAT and the first one missing if not (the peers part's log says why)
  peers_built() {
    local what=$1 peer
    shift
    for peer in "$@"; do
      [ -n "$(ls -A .peers/build/$peer 2> /dev/null)" ] && continue
      note "$what: no $peer in .peers/build (see peers/)"
      return 1
    done
  }
  if part pointnet2 && peers_built "pointnet2 harness" pointnet2_ops; then
    mkdir -p $L/pointnet2
    PYTHONPATH=/tmp/site-wheel timeout ${PN2_TIMEOUT:-500} python3 benchmarks/clients/pointnet2_training.py all \
      --peer .peers/Pointnet2_PyTorch --pointnet2-ops .peers/build/pointnet2_ops --device cuda \
      --out-dir $L/pointnet2 --json $L/pointnet2/report.json > $L/pointnet2.log 2>&1
    note pointnet2 harness rc=$?
  fi
  if part bench; then
    OUT=$L/bench STEPS=bench bash tests/gpu/run_device_suite.sh /tmp/site-wheel > $L/bench.log 2>&1
    note bench rc=$?
  fi
  if part peerbench && peers_built "peer benches" pointnet2_ops pointcept_pointops torch_cluster; then
    PYTHONPATH=/tmp/site-wheel STEPS="peer_ops torch_cluster" bash benchmarks/peers/run_peer_comparisons.sh \
      $L/peerbench > $L/peerbench.log 2>&1
    note peer benches rc=$?
    PYTHONPATH=/tmp/site-wheel python3 benchmarks/bench_gpu.py --quick --ops gather_points three_interpolate fps \
      --json $L/peerbench/gather_host_time.json > $L/peerbench/gather_host_time.txt 2>&1
    note gather_host_time rc=$?
  fi
  if part rows && peers_built "compiled rows" pointnet2_ops; then
    PYTHONPATH=/tmp/site-wheel ROUNDS=3 DEADLINE=${ROWS_DEADLINE:-1100} \
      bash benchmarks/clients/pointnet2_compiled_rows.sh $L/rows > $L/rows.log 2>&1
    note compiled rows rc=$?
  fi
  touch $L/DONE
}

rm -rf $L && mkdir -p $L
export -f master
export L WHEEL TGZ MMCV_DEADLINE SIDE_DEADLINE PN2_TIMEOUT ROWS_DEADLINE PARTS PEERS_ONLY WHEEL_STEPS CONDA_STEPS PYTEST_K CONDA_K WAYS_K HOSTILE_WORKERS
setsid bash -c master > $L/master.log 2>&1 < /dev/null &
sleep 2
wait_and_report "${4:-560}"
