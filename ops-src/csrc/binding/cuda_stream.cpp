#include "cuda_stream.h"

#include <stdexcept>
#include <string>

#ifdef _WIN32
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>
#else
#include <dlfcn.h>
#endif

namespace pointops {

namespace {

// Same signature as the shim's aoti_torch_get_current_cuda_stream; returns 0 on success.
using GetStreamFn = int32_t (*)(int32_t device_index, void** ret_stream);

constexpr const char* kSymbol = "aoti_torch_get_current_cuda_stream";

GetStreamFn resolve() {
#ifdef _WIN32
  HMODULE lib = GetModuleHandleA("torch_cuda.dll");
  if (lib == nullptr) return nullptr;
  // GetProcAddress returns a generic FARPROC; casting through void (*)() says the change of
  // function type is intended (gcc and clang warn on a direct cast: -Wcast-function-type).
  return reinterpret_cast<GetStreamFn>(reinterpret_cast<void (*)()>(GetProcAddress(lib, kSymbol)));
#else
  // RTLD_NOLOAD: only find the library torch already loaded, never load a second copy.
  const char* names[] = {"libtorch_cuda.so", "libtorch_cuda.dylib"};
  for (const char* name : names) {
    void* lib = dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
    if (lib == nullptr) continue;
    void* fn = dlsym(lib, kSymbol);
    dlclose(lib);  // drops only the reference taken above; torch keeps the library loaded
    if (fn != nullptr) return reinterpret_cast<GetStreamFn>(fn);
  }
  void* fn = dlsym(RTLD_DEFAULT, kSymbol);
  return reinterpret_cast<GetStreamFn>(fn);
#endif
}

}  // namespace

void* current_cuda_stream(int32_t device_index) {
  static const GetStreamFn fn = resolve();
  if (fn == nullptr) {
    throw std::runtime_error(
        "pointops: cannot find torch's CUDA library (torch_cuda) in this process; the installed "
        "PyTorch has no CUDA support. Install a CUDA build of PyTorch to run on the GPU.");
  }
  void* stream = nullptr;
  if (fn(device_index, &stream) != 0) {
    throw std::runtime_error("pointops: torch could not report the current CUDA stream of device " +
                             std::to_string(device_index));
  }
  return stream;
}

}  // namespace pointops
