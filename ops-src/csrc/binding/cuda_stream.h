// The current CUDA stream of a device, looked up through torch's C shim at run time.
// The extension does not link libtorch_cuda (a CPU-only torch has none), so the shim function
// aoti_torch_get_current_cuda_stream is resolved from the already-loaded torch_cuda library.
#pragma once

#include <cstdint>

namespace pointops {

// Returns the cudaStream_t (as void*) torch considers current for `device_index`; throws
// std::runtime_error with a clear message when torch has no CUDA support loaded.
void* current_cuda_stream(int32_t device_index);

}  // namespace pointops
