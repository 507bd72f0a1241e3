// A stand-in torch_cuda.dll for cuda_stream_probe.cpp: exports the C shim's
// aoti_torch_get_current_cuda_stream. Device d's stream is the address 4096 + d; device 7
// reports failure (a nonzero status), as torch does for an unusable device.
#include <cstdint>

extern "C" __declspec(dllexport) int32_t aoti_torch_get_current_cuda_stream(int32_t device_index,
                                                                            void** ret_stream) {
  if (device_index == 7) return 1;
  *ret_stream = reinterpret_cast<void*>(static_cast<uintptr_t>(4096 + device_index));
  return 0;
}
