#include "checks.h"

#include <cmath>

namespace pointops {
namespace binding {
namespace {

// limit_log2: the coordinate limit 2^limit_log2 (value_checks.h's coordinate_limit).
template <typename T>
void check_finite_values(const Tensor& t, const char* name, int limit_log2) {
  const double limit = std::ldexp(1.0, limit_log2);
  const T* p = static_cast<const T*>(t.const_data_ptr());
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    STD_TORCH_CHECK(std::isfinite(p[i]), "pointops: ", name,
                    " contains a non-finite value (nan or inf); coordinates must be finite");
    STD_TORCH_CHECK(std::fabs(static_cast<double>(p[i])) <= limit, "pointops: ", name,
                    " holds a coordinate of magnitude ", std::fabs(static_cast<double>(p[i])), ", above 2^",
                    limit_log2, ": squared distances between such points overflow; scale the points down");
  }
}

void check_lengths_cpu(const Tensor& t, const char* name, int64_t limit) {
  if (!t.is_cpu()) return;
  const int64_t* p = static_cast<const int64_t*>(t.const_data_ptr());
  const int64_t n = t.numel();  // once: every accessor is a call through the C shim
  for (int64_t i = 0; i < n; ++i) {
    STD_TORCH_CHECK(p[i] >= 0 && p[i] <= limit, "pointops: ", name, "[", i, "] = ", p[i], " is outside 0..",
                    limit);
  }
}

}  // namespace

Dtype float_dtype(const Tensor& t, const char* name) {
  switch (t.scalar_type()) {
    case ScalarType::Float: return Dtype::Float32;
    case ScalarType::Double: return Dtype::Float64;
    case ScalarType::Half:
    case ScalarType::BFloat16:
      STD_TORCH_CHECK(t.is_cuda(), "pointops: ", name,
                      " is float16/bfloat16, which is supported on CUDA only; "
                      "convert it to float32 or float64 on CPU");
      return t.scalar_type() == ScalarType::Half ? Dtype::Float16 : Dtype::BFloat16;
    default:
      STD_TORCH_CHECK(false, "pointops: ", name,
                      " must be a floating-point tensor (float32/float64; float16/bfloat16 "
                      "on CUDA)");
  }
  return Dtype::Float32;
}

void check_device_support(const Tensor& t, const char* name) {
  STD_TORCH_CHECK(t.is_cpu() || t.is_cuda(), "pointops: ", name,
                  " is on an unsupported device; use a CPU or CUDA tensor");
#ifndef POINTOPS_WITH_CUDA
  STD_TORCH_CHECK(!t.is_cuda(), "pointops: ", name,
                  " is a CUDA tensor but this pointops build has no CUDA kernels; reinstall "
                  "with nvcc available (or POINTOPS_CUDA=1)");
#endif
}

void check_same_device(const Tensor& a, const char* a_name, const Tensor& b, const char* b_name) {
  STD_TORCH_CHECK(a.is_cuda() == b.is_cuda() && a.get_device_index() == b.get_device_index(),
                  "pointops: ", b_name, " must be on the same device as ", a_name);
}

void check_same_dtype(const Tensor& a, const char* a_name, const Tensor& b, const char* b_name) {
  STD_TORCH_CHECK(a.scalar_type() == b.scalar_type(), "pointops: ", b_name, " must have the same dtype as ",
                  a_name);
}

void check_points(const Tensor& t, const char* name) {
  check_device_support(t, name);
  STD_TORCH_CHECK(t.dim() == 3 && t.size(2) == 3, "pointops: ", name,
                  " must have shape [B, N, 3], got a tensor with ", t.dim(), " dimensions");
  float_dtype(t, name);
}

void check_index(const Tensor& t, const char* name) {
  STD_TORCH_CHECK(t.scalar_type() == ScalarType::Long, "pointops: ", name,
                  " must be an int64 tensor (the Python API converts int32)");
}

void check_finite_cpu(const Tensor& t, const char* name) {
  if (!t.is_cpu()) return;
  if (t.scalar_type() == ScalarType::Float) check_finite_values<float>(t, name, 62);
  if (t.scalar_type() == ScalarType::Double) check_finite_values<double>(t, name, 510);
}

void check_indices_cpu(const Tensor& t, const char* name, int64_t n) {
  if (!t.is_cpu()) return;
  const int64_t* p = static_cast<const int64_t*>(t.const_data_ptr());
  const int64_t count = t.numel();
  for (int64_t i = 0; i < count; ++i) {
    STD_TORCH_CHECK(p[i] >= -1 && p[i] < n, "pointops: ", name, " holds index ", p[i], ", outside -1..",
                    n - 1, " (the size of the indexed dimension is ", n, ")");
  }
}

std::optional<Tensor> prepare_lengths(const std::optional<Tensor>& lengths, const char* name,
                                      const Tensor& points, const char* points_name) {
  if (!lengths.has_value()) return std::nullopt;
  const Tensor& l = *lengths;
  check_index(l, name);
  check_same_device(points, points_name, l, name);
  STD_TORCH_CHECK(l.dim() == 1 && l.size(0) == points.size(0), "pointops: ", name,
                  " must have shape [B] with B = ", points.size(0));
  Tensor c = as_contiguous(l);
  check_lengths_cpu(c, name, points.size(1));
  return c;
}

}  // namespace binding
}  // namespace pointops
