// Shared helpers for the CPU kernels: dtype dispatch and the "no point" sentinels.
#pragma once

#include <cstdint>
#include <limits>

#include "../kernels.h"

namespace pointops {
namespace cpu {

constexpr const char* kReducedPrecisionOnCpu =
    "float16/bfloat16 inputs are supported on CUDA only; use float32 or float64 on CPU";

// Calls f(T{}) with T = float or double for the given dtype; returns an error for other dtypes.
template <class F>
Status dispatch_float(Dtype dt, const F& f) {
  switch (dt) {
    case Dtype::Float32: f(float{}); return nullptr;
    case Dtype::Float64: f(double{}); return nullptr;
    default: return kReducedPrecisionOnCpu;
  }
}

template <typename T>
inline T infinity() {
  return std::numeric_limits<T>::infinity();
}

// Number of valid points of cloud b: lengths[b] clamped to 0..n (the binding layer already
// rejects out-of-range values; clamping keeps a direct kernel call memory safe).
inline int64_t valid_count(const int64_t* lengths, int64_t b, int64_t n) {
  if (lengths == nullptr) return n;
  int64_t v = lengths[b];
  return v < 0 ? 0 : (v > n ? n : v);
}

template <typename T>
inline T squared_distance(const T* a, const T* b) {
  T dx = a[0] - b[0];
  T dy = a[1] - b[1];
  T dz = a[2] - b[2];
  return dx * dx + dy * dy + dz * dz;
}

}  // namespace cpu
}  // namespace pointops
