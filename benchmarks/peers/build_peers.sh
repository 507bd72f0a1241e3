#!/usr/bin/env bash
# Builds the peer libraries fetched into .peers/ (git-ignored; never committed) on the GPU host,
# each into its own pip --target directory so that the two `pointops` packages never collide:
#
#   .peers/build/pointcept_pointops   Pointcept's libs/pointops   (import name: pointops)
#   .peers/build/torch_cluster        torch_cluster               (import name: torch_cluster)
#   .peers/build/pytorch3d            pytorch3d, if .peers/pytorch3d exists (chamfer bench column)
#   .peers/build/pointnet2_ops        Pointnet2_PyTorch's pointnet2_ops_lib (import name: pointnet2_ops),
#                                     for benchmarks/clients/pointnet2_training.py
#
# Usage (from the repository root; runs in the background fine, one log per peer):
#   nohup bash benchmarks/peers/build_peers.sh out/peer-build > /dev/null 2>&1 &
#   cat out/peer-build/status.txt            # "<peer> rc=<exit status> <seconds>s" per line
#
# Environment: TORCH_CUDA_ARCH_LIST (default 9.0), MAX_JOBS (default 16, per peer), PEERS (default .peers),
# ONLY (space-separated peer names to build; default all).
# Needs the installed CUDA torch and nvcc; no network (pip --no-index --no-deps).
#
# The peers can also be built on the CPU machine and carried to the GPU host as .peers/build,
# which saves the device call the build (about 300 s for all three side by side on its 16 cores;
# 927, 1328 and 1583 s for pointnet2_ops, Pointcept's library and torch_cluster side by side on
# the 2-core CPU machine): the GPU host's torch and Python in a venv (`pip install torch==2.11.0`
# with Python 3.12 gives 2.11.0+cu130), its bin first on PATH, CUDA_HOME=/usr/local/cuda. The
# extensions are built against that exact torch, so they load only beside it. Debug info is
# stripped from what is installed (pointnet2_ops' extension 26 MB -> 0.4 MB; the three 4.2 MB in
# all), so that it fits a carry.
set -u
LOG_DIR=${1:?usage: build_peers.sh LOG_DIR}
PEERS=${PEERS:-.peers}
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
export MAX_JOBS=${MAX_JOBS:-16}
export FORCE_CUDA=1          # torch_cluster and pytorch3d build their CUDA kernels only when told or when a GPU is seen
mkdir -p "$LOG_DIR" "$PEERS/build"
# torch's CUDA headers include the math libraries' (cusparse.h, cublas_v2.h): where the toolkit
# has only the compiler and runtime, take them from the pip packages torch came with.
nvidia_include=$(python3 -c "import glob, os, torch; print(':'.join(glob.glob(os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), 'nvidia', 'cu[0-9]*', 'include'))))" 2> /dev/null)
cuda_home=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
if [ -n "$nvidia_include" ] && [ ! -f "$cuda_home/include/cusparse.h" ]; then
  export CPATH="$nvidia_include${CPATH:+:$CPATH}"
fi
LOG_DIR=$(cd "$LOG_DIR" && pwd)
PEERS=$(cd "$PEERS" && pwd)
: > "$LOG_DIR/status.txt"

installed() {  # installed NAME TARGET START RC: strips the extensions' debug info, records the build
  find "$2" -name '*.so' -exec strip --strip-debug {} + 2> /dev/null
  echo "$1 rc=$4 $((SECONDS - $3))s" >> "$LOG_DIR/status.txt"
}

build() {  # build NAME SOURCE_DIR
  local name=$1 src=$2 target="$PEERS/build/$1" start=$SECONDS
  if [ ! -d "$src" ]; then
    echo "$name skipped (no $src)" >> "$LOG_DIR/status.txt"
    return
  fi
  rm -rf "$target"
  mkdir -p "$target"
  (cd "$src" && python3 -m pip install --no-build-isolation --no-deps --no-index --no-cache-dir \
      --target "$target" . ) > "$LOG_DIR/$name.log" 2>&1
  installed "$name" "$target" "$start" $?
}

# Two peers' setup.py need a nudge, given through a wrapper that runs their setup.py unedited:
# - pointnet2_ops assigns TORCH_CUDA_ARCH_LIST itself ("3.7+PTX;5.0;...;7.5"): CUDA 12 no longer
#   builds 3.7 and CUDA 13 nothing below 7.5, and sm_90 is not in it. That one assignment is
#   ignored, so the list above stands.
# - torch_cluster builds with use_ninja=False, one extension and one file after another (more
#   than 25 minutes on the 16-core H200 host); `build_ext -j` builds its extensions side by side.
# The wheel each makes is then installed like the others.
build_with_setup() {  # build_with_setup NAME SOURCE_DIR SETUP_ARGS...
  local name=$1 src=$2 target="$PEERS/build/$1" dist="$PEERS/build/$1.dist" start=$SECONDS
  shift 2
  if [ ! -d "$src" ]; then
    echo "$name skipped (no $src)" >> "$LOG_DIR/status.txt"
    return
  fi
  rm -rf "$target" "$dist"
  mkdir -p "$target"
  (cd "$src" && rm -rf build && python3 - "$dist" "$@" <<'PY' && python3 -m pip install --no-deps --no-index --no-cache-dir \
      --target "$target" "$dist"/*.whl
import os, runpy, sys

class PinnedArchEnviron(type(os.environ)):
    def __setitem__(self, key, value):
        if key == "TORCH_CUDA_ARCH_LIST":
            print(f"setup.py's TORCH_CUDA_ARCH_LIST={value!r} ignored; building for {os.environ[key]!r}")
            return
        super().__setitem__(key, value)

os.environ.__class__ = PinnedArchEnviron
dist, setup_args = sys.argv[1], sys.argv[2:]
sys.argv = ["setup.py", *setup_args, "bdist_wheel", "--dist-dir", dist]
runpy.run_path("setup.py", run_name="__main__")
PY
  ) > "$LOG_DIR/$name.log" 2>&1
  installed "$name" "$target" "$start" $?
}

# The peers build side by side (each nvcc run is single-threaded; MAX_JOBS applies to each).
wanted() { [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]; }
wanted pointcept_pointops && build pointcept_pointops "$PEERS/Pointcept/libs/pointops" &
# FORCE_ONLY_CUDA (torch_cluster's setup.py): only the _cuda extensions, which hold the CPU kernels
# too and are the ones its __init__ loads where they exist; the _cpu copies would double the build.
wanted torch_cluster && (export FORCE_ONLY_CUDA=1; build_with_setup torch_cluster "$PEERS/pytorch_cluster" build_ext -j "$MAX_JOBS") &
wanted pytorch3d && build pytorch3d "$PEERS/pytorch3d" &
wanted pointnet2_ops && build_with_setup pointnet2_ops "$PEERS/Pointnet2_PyTorch/pointnet2_ops_lib" &
wait
echo "done" >> "$LOG_DIR/status.txt"
