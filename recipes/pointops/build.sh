#!/usr/bin/env bash
# Builds pointops into the host prefix. rattler-build / conda-build run this with the variant's
# settings in the environment (see recipe.yaml): POINTOPS_CUDA (1 = build the CUDA kernels) and
# TORCH_CUDA_ARCH_LIST (from conda_build_config.yaml, i.e. ops-src/pointops/cuda_arch_table.json).
set -euxo pipefail

# nvcc needs 1-2 GB of memory per job: use the cores the build was given, but at most 4 jobs
# (hosted CI runners have 7-16 GB). An explicit MAX_JOBS wins.
if [[ -z "${MAX_JOBS:-}" ]]; then
  jobs="${CPU_COUNT:-2}"
  (( jobs > 4 )) && jobs=4
  export MAX_JOBS="${jobs}"
fi

if [[ "${POINTOPS_CUDA}" == "1" ]]; then
  # nvcc and the static CUDA runtime come from the build prefix (cuda-nvcc, cuda-cudart-static);
  # the CUDA headers from the host prefix, through the flags cuda-nvcc's activation sets.
  export CUDA_HOME="${BUILD_PREFIX}"
  # torch's cpp_extension caps the host compiler per CUDA version below conda-forge's gcc; the
  # pinned gcc is the one nvcc is validated with by cuda-nvcc's own constraints.
  export TORCH_DONT_CHECK_COMPILER_ABI=1
fi

# A source tree copied from a developer checkout may hold objects of another configuration.
rm -rf build ./*.egg-info

"${PYTHON}" -m pip install . -vv --no-deps --no-build-isolation
