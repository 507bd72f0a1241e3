#include "tensors.h"

#include <torch/csrc/stable/ops.h>

#include <string>

namespace pointops {
namespace binding {
namespace {

std::string shape_text(const std::vector<int64_t>& sizes) {
  std::string text = "[";
  for (size_t d = 0; d < sizes.size(); ++d) text += (d ? ", " : "") + std::to_string(sizes[d]);
  return text + "]";
}

// The C shim's code for the dtypes the ops return (-1: another one).
int32_t shim_dtype(ScalarType dtype) {
  switch (dtype) {
    case ScalarType::Float: return aoti_torch_dtype_float32();
    case ScalarType::Double: return aoti_torch_dtype_float64();
    case ScalarType::Half: return aoti_torch_dtype_float16();
    case ScalarType::BFloat16: return aoti_torch_dtype_bfloat16();
    case ScalarType::Long: return aoti_torch_dtype_int64();
    case ScalarType::Int: return aoti_torch_dtype_int32();
    case ScalarType::Byte: return aoti_torch_dtype_uint8();
    default: return -1;
  }
}

}  // namespace

Tensor as_contiguous(const Tensor& t) { return t.is_contiguous() ? t : torch::stable::contiguous(t); }

// Straight through the C shim's empty_strided: new_empty goes through the boxed dispatcher
// (operator lookup by name, boxing), which cost microseconds of host time per output.
Tensor empty_like_shape(const Tensor& like, std::vector<int64_t> sizes, ScalarType dtype) {
  const int32_t code = shim_dtype(dtype);
  if (code < 0) return torch::stable::new_empty(like, sizes, dtype);
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= sizes[d] > 1 ? sizes[d] : 1;
  }
  int32_t device_type = 0, device_index = 0;
  AtenTensorHandle handle = nullptr;
  const bool ok = aoti_torch_get_device_type(like.get(), &device_type) == AOTI_TORCH_SUCCESS &&
                  aoti_torch_get_device_index(like.get(), &device_index) == AOTI_TORCH_SUCCESS &&
                  aoti_torch_empty_strided(static_cast<int64_t>(sizes.size()), sizes.data(), strides.data(),
                                           code, device_type, device_index, &handle) == AOTI_TORCH_SUCCESS;
  STD_TORCH_CHECK(ok, "pointops: allocating an output tensor of shape ", shape_text(sizes),
                  " failed (out of memory on that device? torch printed the cause above)");
  return Tensor(handle);
}

std::optional<Tensor> workspace_for(const Tensor& like, size_t bytes) {
  if (bytes == 0) return std::nullopt;
  return empty_like_shape(like, {static_cast<int64_t>(bytes)}, ScalarType::Byte);
}

void* workspace_ptr(const std::optional<Tensor>& ws) { return ws ? ws->mutable_data_ptr() : nullptr; }

const int64_t* index_ptr(const std::optional<Tensor>& t) {
  return t.has_value() ? static_cast<const int64_t*>(t->const_data_ptr()) : nullptr;
}

const void* optional_ptr(const std::optional<Tensor>& t) {
  return t.has_value() ? t->const_data_ptr() : nullptr;
}

void raise_on_error(Status status, const char* op) {
  STD_TORCH_CHECK(status == nullptr, "pointops.", op, " failed: ", status == nullptr ? "" : status);
}

}  // namespace binding
}  // namespace pointops
