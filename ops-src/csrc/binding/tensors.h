// Tensor helpers of the binding layer: contiguity, output and workspace allocation through the
// C shim, raw pointers of optional tensors, and kernel status to Python errors.
#pragma once

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "../kernels.h"

namespace pointops {
namespace binding {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

// The tensor itself when contiguous (aten::contiguous goes through the boxed dispatcher even
// when it returns its input, so ask first).
Tensor as_contiguous(const Tensor& t);

// A new contiguous tensor of `sizes` and `dtype` on like's device.
Tensor empty_like_shape(const Tensor& like, std::vector<int64_t> sizes, ScalarType dtype);

// Scratch device memory for a kernel: none (no allocation) for 0 bytes.
std::optional<Tensor> workspace_for(const Tensor& like, size_t bytes);
void* workspace_ptr(const std::optional<Tensor>& ws);

const int64_t* index_ptr(const std::optional<Tensor>& t);
const void* optional_ptr(const std::optional<Tensor>& t);

// Raises "pointops.<op> failed: <status>" when a kernel reports an error.
void raise_on_error(Status status, const char* op);

}  // namespace binding
}  // namespace pointops
