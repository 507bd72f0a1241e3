#!/usr/bin/env bash
# Builds mmcv with its ops (mmcv/_ext) into the host prefix. rattler-build runs this in the
# patched sdist with the recipe's script.env (MMCV_WITH_OPS, FORCE_CUDA, MMCV_OPENCV_FROM_CONDA,
# MAX_JOBS) and the variant's keys (cuda_compiler_version, target_platform).
set -euxo pipefail

# nvcc needs 1-2 GB of memory per job: use the cores the build was given, but at most 4 jobs
# (hosted CI runners have 7-16 GB). A MAX_JOBS the caller set (passed on by script.env) wins;
# setup.py would otherwise pick max(4, cores - 1).
if [[ -z "${MAX_JOBS:-}" ]]; then
  jobs="${CPU_COUNT:-2}"
  (( jobs > 4 )) && jobs=4
  export MAX_JOBS="${jobs}"
fi
echo "mmcv build: MAX_JOBS=${MAX_JOBS}"

if [[ "${FORCE_CUDA}" == "1" ]]; then
  # nvcc runs from the build prefix; cudart and the CUDA headers come from the host prefix
  # (the cuda-nvcc activation adds its targets/ directory to the compiler and linker flags).
  export CUDA_HOME="${BUILD_PREFIX}"
  # The channel's arch table for this CUDA version and platform (the list recipes/pointops
  # builds). Set explicitly: libtorch's activation exports CF_TORCH_CUDA_ARCH_LIST, pytorch's
  # own list, and without a list torch's BuildExtension would ask the (absent) GPU.
  TORCH_CUDA_ARCH_LIST="$("${PYTHON}" arch-table/cuda_arch_list.py arch-table "${cuda_compiler_version}" "${target_platform}")"
  export TORCH_CUDA_ARCH_LIST
  echo "mmcv build: TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST}"
fi

"${PYTHON}" -m pip install . -vv --no-deps --no-build-isolation
