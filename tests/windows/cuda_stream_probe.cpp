// Calls pointops::current_cuda_stream (csrc/cuda_stream.cpp) as the extension does on Windows,
// where it finds torch_cuda.dll with GetModuleHandle and its shim function with GetProcAddress.
// With an argument, loads that DLL first (tests/windows uses a stand-in torch_cuda.dll).
// Prints one line per device: "device <d> stream <address>" or "device <d> error: <message>".
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>

#include "cuda_stream.h"

int main(int argc, char** argv) {
  if (argc > 1 && LoadLibraryA(argv[1]) == nullptr) {
    std::fprintf(stderr, "cannot load %s\n", argv[1]);
    return 2;
  }
  for (int32_t device : {3, 7}) {
    std::string line = "device " + std::to_string(device);
    try {
      line += " stream " + std::to_string(reinterpret_cast<uintptr_t>(pointops::current_cuda_stream(device)));
    } catch (const std::exception& e) {
      line += std::string(" error: ") + e.what();
    }
    std::puts(line.c_str());
  }
  return 0;
}
