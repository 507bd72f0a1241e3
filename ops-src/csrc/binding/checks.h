// Input checks of the binding layer. They make direct torch.ops.pointops calls safe: shapes,
// dtypes and devices always; values (finite coordinates, index and length ranges) on CPU,
// where reading them costs no device sync.
#pragma once

#include <optional>

#include "tensors.h"

namespace pointops {
namespace binding {

// The kernels' dtype of a floating-point tensor (float16/bfloat16 on CUDA only).
Dtype float_dtype(const Tensor& t, const char* name);

void check_device_support(const Tensor& t, const char* name);
void check_same_device(const Tensor& a, const char* a_name, const Tensor& b, const char* b_name);
void check_same_dtype(const Tensor& a, const char* a_name, const Tensor& b, const char* b_name);

// Point sets: [B, n, 3] floating-point tensors.
void check_points(const Tensor& t, const char* name);
// Index tensors are int64 (the Python API converts int32).
void check_index(const Tensor& t, const char* name);

// Value checks, CPU tensors only (no-ops on CUDA).
void check_finite_cpu(const Tensor& t, const char* name);
void check_indices_cpu(const Tensor& t, const char* name, int64_t n);

// Optional per-cloud lengths of `points`: int64 [B] on its device, contiguous, values in
// 0..points.size(1) (checked on CPU).
std::optional<Tensor> prepare_lengths(const std::optional<Tensor>& lengths, const char* name,
                                      const Tensor& points, const char* points_name);

}  // namespace binding
}  // namespace pointops
