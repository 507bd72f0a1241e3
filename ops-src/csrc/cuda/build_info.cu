// Reports what the CUDA part of this binary was compiled with.
#include <cuda_runtime.h>

#include "../kernels.h"

namespace pointops {

CudaBuildInfo cuda_build_info() {
  CudaBuildInfo info;
  info.cuda_version = CUDART_VERSION;
  return info;
}

}  // namespace pointops
