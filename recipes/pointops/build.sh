#!/usr/bin/env bash
# Builds pointops into the host prefix. rattler-build runs this with the recipe's script.env
# (POINTOPS_CUDA, MAX_JOBS) and the variant's keys (cuda_compiler_version, target_platform).
set -euxo pipefail

# nvcc needs 1-2 GB of memory per job: use the cores the build was given, but at most 4 jobs
# (hosted CI runners have 7-16 GB). A MAX_JOBS the caller set (passed on by script.env) wins.
if [[ -z "${MAX_JOBS:-}" ]]; then
  jobs="${CPU_COUNT:-2}"
  (( jobs > 4 )) && jobs=4
  export MAX_JOBS="${jobs}"
fi
echo "pointops build: MAX_JOBS=${MAX_JOBS}"

if [[ "${POINTOPS_CUDA}" == "1" ]]; then
  # nvcc runs from the build prefix (cuda-nvcc). The static CUDA runtime is linked from the host
  # prefix (cuda-cudart-dev pulls cuda-cudart-static), which holds the target's runtime when
  # cross-compiling.
  export CUDA_HOME="${BUILD_PREFIX}"
  export POINTOPS_CUDA_TARGET_ROOT="${PREFIX}"
  # The arch list comes from ops-src's arch table for this CUDA version and platform. It is set
  # explicitly because libtorch's activation exports CF_TORCH_CUDA_ARCH_LIST (pytorch's own
  # list), which setup.py would otherwise take.
  TORCH_CUDA_ARCH_LIST="$("${PYTHON}" "${RECIPE_DIR}/cuda_arch_list.py" pointops "${cuda_compiler_version}" "${target_platform}")"
  export TORCH_CUDA_ARCH_LIST
fi

# A source tree copied from a developer checkout may hold objects of another configuration.
rm -rf build ./*.egg-info

"${PYTHON}" -m pip install . -vv --no-deps --no-build-isolation
