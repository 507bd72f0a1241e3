// The binding layer: registers the pointops operators with PyTorch through the stable ABI
// (STABLE_TORCH_LIBRARY), checks every input, and calls the plain kernels of kernels.h.
// It touches torch only through torch/csrc/stable and the C shim, so one binary serves every
// PyTorch >= TORCH_TARGET_VERSION. The Python wrappers (pointops/ops.py) check inputs first and
// give friendlier messages; the checks here make direct torch.ops calls safe as well.
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "cpu/parallel.h"
#include "cuda_stream.h"
#include "kernels.h"

namespace pointops {
namespace {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

// ------------------------------------------------------------------------------------------
// Input checks

Dtype float_dtype(const Tensor& t, const char* name) {
  switch (t.scalar_type()) {
    case ScalarType::Float:
      return Dtype::Float32;
    case ScalarType::Double:
      return Dtype::Float64;
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
  STD_TORCH_CHECK(a.scalar_type() == b.scalar_type(), "pointops: ", b_name,
                  " must have the same dtype as ", a_name);
}

// Point sets are [B, n, 3] floating-point tensors.
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

// Coordinates must be finite and at most 2^62 (float) / 2^510 (double) in magnitude: a squared
// distance is at most 12 X^2, and 12 * (2^62)^2 = 1.5 * 2^127 < FLT_MAX,
// 12 * (2^510)^2 = 1.5 * 2^1023 < DBL_MAX (pointops.ops.coordinate_limit says the same).
template <typename T>
void check_finite_values(const Tensor& t, const char* name, int limit_log2) {
  const T* p = static_cast<const T*>(t.const_data_ptr());
  const int64_t n = t.numel();
  const T limit = static_cast<T>(std::ldexp(1.0, limit_log2));
  for (int64_t i = 0; i < n; ++i) {
    if (std::fabs(p[i]) <= limit) continue;  // false for nan as well
    STD_TORCH_CHECK(std::isfinite(p[i]), "pointops: ", name,
                    " contains a non-finite value (nan or inf); coordinates must be finite");
    STD_TORCH_CHECK(false, "pointops: ", name, " holds a coordinate of magnitude ", std::fabs(p[i]),
                    ", above 2^", limit_log2, ": squared distances would overflow; scale the points down");
  }
}

// Data-dependent checks run on CPU only (on CUDA they would need a device sync; the kernels
// clamp lengths and skip out-of-range indices so bad values cannot read out of bounds).
void check_finite_cpu(const Tensor& t, const char* name) {
  if (!t.is_cpu()) return;
  if (t.scalar_type() == ScalarType::Float) check_finite_values<float>(t, name, 62);
  if (t.scalar_type() == ScalarType::Double) check_finite_values<double>(t, name, 510);
}

void check_lengths_cpu(const Tensor& t, const char* name, int64_t limit) {
  if (!t.is_cpu()) return;
  const int64_t* p = static_cast<const int64_t*>(t.const_data_ptr());
  const int64_t n = t.numel();  // once: every accessor is a call through the C shim
  for (int64_t i = 0; i < n; ++i) {
    STD_TORCH_CHECK(p[i] >= 0 && p[i] <= limit, "pointops: ", name, "[", i, "] = ", p[i],
                    " is outside 0..", limit);
  }
}

void check_indices_cpu(const Tensor& t, const char* name, int64_t n) {
  if (!t.is_cpu()) return;
  const int64_t* p = static_cast<const int64_t*>(t.const_data_ptr());
  const int64_t count = t.numel();
  for (int64_t i = 0; i < count; ++i) {
    STD_TORCH_CHECK(p[i] >= -1 && p[i] < n, "pointops: ", name, " holds index ", p[i],
                    ", outside -1..", n - 1, " (the size of the indexed dimension is ", n, ")");
  }
}

// aten::contiguous goes through the boxed dispatcher even when it returns its input: ask first.
Tensor as_contiguous(const Tensor& t) {
  return t.is_contiguous() ? t : torch::stable::contiguous(t);
}

// Optional per-cloud lengths: int64 [B] on the points' device, contiguous.
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

const int64_t* lengths_ptr(const std::optional<Tensor>& l) {
  return l.has_value() ? static_cast<const int64_t*>(l->const_data_ptr()) : nullptr;
}

void raise_on_error(Status status, const char* op) {
  STD_TORCH_CHECK(status == nullptr, "pointops.", op, " failed: ", status == nullptr ? "" : status);
}

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
    case ScalarType::Byte: return aoti_torch_dtype_uint8();
    default: return -1;
  }
}

// A new contiguous tensor on like's device. Straight through the C shim's empty_strided:
// new_empty goes through the boxed dispatcher (operator lookup by name, boxing), which cost
// microseconds of host time per output on every call.
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
                  aoti_torch_empty_strided(static_cast<int64_t>(sizes.size()), sizes.data(), strides.data(), code,
                                           device_type, device_index, &handle) == AOTI_TORCH_SUCCESS;
  STD_TORCH_CHECK(ok, "pointops: allocating an output tensor of shape ", shape_text(sizes),
                  " failed (out of memory on that device? torch printed the cause above)");
  return Tensor(handle);
}

#ifdef POINTOPS_WITH_CUDA
// A kernel's scratch memory; none (no allocation, which costs host time per call) when it
// needs no bytes.
std::optional<Tensor> workspace_for(const Tensor& like, size_t bytes) {
  if (bytes == 0) return std::nullopt;
  return empty_like_shape(like, {static_cast<int64_t>(bytes)}, ScalarType::Byte);
}
void* workspace_ptr(const std::optional<Tensor>& ws) { return ws ? ws->mutable_data_ptr() : nullptr; }
#endif

// ------------------------------------------------------------------------------------------
// Operators

Tensor furthest_point_sample(Tensor xyz, int64_t k, std::optional<Tensor> lengths,
                             int64_t start) {
  check_points(xyz, "xyz");
  STD_TORCH_CHECK(k > 0, "pointops: k must be > 0, got ", k);
  STD_TORCH_CHECK(start >= 0, "pointops: start must be >= 0, got ", start);
  xyz = as_contiguous(xyz);
  check_finite_cpu(xyz, "xyz");
  auto lens = prepare_lengths(lengths, "lengths", xyz, "xyz");
  const int64_t B = xyz.size(0), N = xyz.size(1);
  Tensor idx = empty_like_shape(xyz, {B, k}, ScalarType::Long);
  if (B == 0) return idx;
  if (N == 0) {
    torch::stable::fill_(idx, -1.0);
    return idx;
  }
  const Dtype dt = float_dtype(xyz, "xyz");
  int64_t* out = static_cast<int64_t*>(idx.mutable_data_ptr());
  if (xyz.is_cpu()) {
    raise_on_error(furthest_point_sample_cpu(dt, xyz.const_data_ptr(), lengths_ptr(lens), B, N,
                                             k, start, out),
                   "furthest_point_sample");
    return idx;
  }
#ifdef POINTOPS_WITH_CUDA
  torch::stable::accelerator::DeviceGuard guard(xyz.get_device_index());
  const size_t bytes = furthest_point_sample_cuda_workspace_bytes(dt, B, N, k);
  auto ws = workspace_for(xyz, bytes);
  raise_on_error(furthest_point_sample_cuda(dt, xyz.const_data_ptr(), lengths_ptr(lens), B, N,
                                            k, start, out, workspace_ptr(ws),
                                            current_cuda_stream(xyz.get_device_index())),
                 "furthest_point_sample");
#endif
  return idx;
}

// Shared checks of the two neighbour searches; returns contiguous copies.
struct NeighbourInputs {
  Tensor xyz, query;
  std::optional<Tensor> lengths, query_lengths;
  Dtype dt;
};

NeighbourInputs prepare_neighbours(Tensor xyz, Tensor query, int64_t k,
                                   const std::optional<Tensor>& lengths,
                                   const std::optional<Tensor>& query_lengths) {
  check_points(xyz, "xyz");
  check_points(query, "query");
  check_same_device(xyz, "xyz", query, "query");
  check_same_dtype(xyz, "xyz", query, "query");
  STD_TORCH_CHECK(query.size(0) == xyz.size(0), "pointops: query has batch size ", query.size(0),
                  " but xyz has ", xyz.size(0));
  STD_TORCH_CHECK(k > 0, "pointops: k must be > 0, got ", k);
  NeighbourInputs in{as_contiguous(xyz), as_contiguous(query),
                     std::nullopt, std::nullopt, float_dtype(xyz, "xyz")};
  check_finite_cpu(in.xyz, "xyz");
  check_finite_cpu(in.query, "query");
  in.lengths = prepare_lengths(lengths, "lengths", in.xyz, "xyz");
  in.query_lengths = prepare_lengths(query_lengths, "query_lengths", in.query, "query");
  return in;
}

std::tuple<Tensor, Tensor, Tensor> ball_query(Tensor xyz, Tensor query, double radius, int64_t k,
                                              std::optional<Tensor> lengths,
                                              std::optional<Tensor> query_lengths,
                                              bool inclusive, bool return_dist2) {
  STD_TORCH_CHECK(std::isfinite(radius) && radius >= 0, "pointops: radius must be finite and >= 0, got ",
                  radius);
  NeighbourInputs in = prepare_neighbours(xyz, query, k, lengths, query_lengths);
  const int64_t B = in.xyz.size(0), N = in.xyz.size(1), M = in.query.size(1);
  Tensor idx = empty_like_shape(in.xyz, {B, M, k}, ScalarType::Long);
  Tensor count = empty_like_shape(in.xyz, {B, M}, ScalarType::Long);
  Tensor dist2 = return_dist2 ? empty_like_shape(in.xyz, {B, M, k}, in.xyz.scalar_type())
                              : empty_like_shape(in.xyz, {0}, in.xyz.scalar_type());
  if (B == 0 || M == 0) return {idx, count, dist2};
  if (N == 0) {
    torch::stable::fill_(idx, -1.0);
    torch::stable::zero_(count);
    if (return_dist2) torch::stable::fill_(dist2, INFINITY);
    return {idx, count, dist2};
  }
  void* d2 = return_dist2 ? dist2.mutable_data_ptr() : nullptr;
  int64_t* idx_p = static_cast<int64_t*>(idx.mutable_data_ptr());
  int64_t* count_p = static_cast<int64_t*>(count.mutable_data_ptr());
  if (in.xyz.is_cpu()) {
    raise_on_error(ball_query_cpu(in.dt, in.xyz.const_data_ptr(), in.query.const_data_ptr(),
                                  lengths_ptr(in.lengths), lengths_ptr(in.query_lengths), B, N,
                                  M, radius, inclusive, k, idx_p, count_p, d2),
                   "ball_query");
    return {idx, count, dist2};
  }
#ifdef POINTOPS_WITH_CUDA
  torch::stable::accelerator::DeviceGuard guard(in.xyz.get_device_index());
  const size_t bytes = ball_query_cuda_workspace_bytes(in.dt, B, N, M, radius, k);
  auto ws = workspace_for(in.xyz, bytes);
  raise_on_error(ball_query_cuda(in.dt, in.xyz.const_data_ptr(), in.query.const_data_ptr(),
                                 lengths_ptr(in.lengths), lengths_ptr(in.query_lengths), B, N, M,
                                 radius, inclusive, k, idx_p, count_p, d2,
                                 workspace_ptr(ws),
                                 current_cuda_stream(in.xyz.get_device_index())),
                 "ball_query");
#endif
  return {idx, count, dist2};
}

std::tuple<Tensor, Tensor> knn(Tensor xyz, Tensor query, int64_t k, std::optional<Tensor> lengths,
                               std::optional<Tensor> query_lengths) {
  NeighbourInputs in = prepare_neighbours(xyz, query, k, lengths, query_lengths);
  const int64_t B = in.xyz.size(0), N = in.xyz.size(1), M = in.query.size(1);
  Tensor dist2 = empty_like_shape(in.xyz, {B, M, k}, in.xyz.scalar_type());
  Tensor idx = empty_like_shape(in.xyz, {B, M, k}, ScalarType::Long);
  if (B == 0 || M == 0) return {dist2, idx};
  if (N == 0) {
    torch::stable::fill_(dist2, INFINITY);
    torch::stable::fill_(idx, -1.0);
    return {dist2, idx};
  }
  int64_t* idx_p = static_cast<int64_t*>(idx.mutable_data_ptr());
  if (in.xyz.is_cpu()) {
    raise_on_error(knn_cpu(in.dt, in.xyz.const_data_ptr(), in.query.const_data_ptr(),
                           lengths_ptr(in.lengths), lengths_ptr(in.query_lengths), B, N, M, k,
                           dist2.mutable_data_ptr(), idx_p),
                   "knn");
    return {dist2, idx};
  }
#ifdef POINTOPS_WITH_CUDA
  torch::stable::accelerator::DeviceGuard guard(in.xyz.get_device_index());
  const size_t bytes = knn_cuda_workspace_bytes(in.dt, B, N, M, k);
  auto ws = workspace_for(in.xyz, bytes);
  raise_on_error(knn_cuda(in.dt, in.xyz.const_data_ptr(), in.query.const_data_ptr(),
                          lengths_ptr(in.lengths), lengths_ptr(in.query_lengths), B, N, M, k,
                          dist2.mutable_data_ptr(), idx_p, workspace_ptr(ws),
                          current_cuda_stream(in.xyz.get_device_index())),
                 "knn");
#endif
  return {dist2, idx};
}

// Shape facts of one weighted gather: feat [B,C,N], idx [B,P,T], weight [B,P,T].
struct GatherShape {
  int64_t B, C, N, P, T;
};

GatherShape check_gather_index(const Tensor& idx, int64_t B, int64_t N) {
  check_index(idx, "idx");
  STD_TORCH_CHECK(idx.dim() == 3 && idx.size(0) == B, "pointops: idx must have shape [B, P, T] "
                  "with B = ", B, ", got a tensor with ", idx.dim(), " dimensions");
  return GatherShape{B, 0, N, idx.size(1), idx.size(2)};
}

std::optional<Tensor> prepare_weight(const std::optional<Tensor>& weight, const Tensor& idx,
                                     const Tensor& like, const char* like_name) {
  if (!weight.has_value()) return std::nullopt;
  const Tensor& w = *weight;
  check_same_device(like, like_name, w, "weight");
  check_same_dtype(like, like_name, w, "weight");
  STD_TORCH_CHECK(w.dim() == 3 && w.size(0) == idx.size(0) && w.size(1) == idx.size(1) &&
                      w.size(2) == idx.size(2),
                  "pointops: weight must have the same shape as idx [B, P, T]");
  return as_contiguous(w);
}

const void* optional_ptr(const std::optional<Tensor>& t) {
  return t.has_value() ? t->const_data_ptr() : nullptr;
}

Tensor gather(Tensor feat, Tensor idx, std::optional<Tensor> weight) {
  check_device_support(feat, "feat");
  STD_TORCH_CHECK(feat.dim() == 3, "pointops: feat must have shape [B, C, N], got a tensor with ",
                  feat.dim(), " dimensions");
  const Dtype dt = float_dtype(feat, "feat");
  check_same_device(feat, "feat", idx, "idx");
  GatherShape s = check_gather_index(idx, feat.size(0), feat.size(2));
  s.C = feat.size(1);
  feat = as_contiguous(feat);
  idx = as_contiguous(idx);
  check_indices_cpu(idx, "idx", s.N);
  auto w = prepare_weight(weight, idx, feat, "feat");
  Tensor out = empty_like_shape(feat, {s.B, s.C, s.P}, feat.scalar_type());
  if (out.numel() == 0) return out;
  if (s.N == 0 || s.T == 0) {
    torch::stable::zero_(out);  // only -1 indices can address an empty dimension
    return out;
  }
  const int64_t* idx_p = static_cast<const int64_t*>(idx.const_data_ptr());
  if (feat.is_cpu()) {
    raise_on_error(gather_forward_cpu(dt, feat.const_data_ptr(), idx_p, optional_ptr(w), s.B, s.C,
                                      s.N, s.P, s.T, out.mutable_data_ptr()),
                   "gather");
    return out;
  }
#ifdef POINTOPS_WITH_CUDA
  torch::stable::accelerator::DeviceGuard guard(feat.get_device_index());
  raise_on_error(gather_forward_cuda(dt, feat.const_data_ptr(), idx_p, optional_ptr(w), s.B, s.C,
                                     s.N, s.P, s.T, out.mutable_data_ptr(),
                                     current_cuda_stream(feat.get_device_index())),
                 "gather");
#endif
  return out;
}

Tensor gather_backward_feat(Tensor grad_out, Tensor idx, std::optional<Tensor> weight, int64_t n) {
  check_device_support(grad_out, "grad_out");
  STD_TORCH_CHECK(grad_out.dim() == 3, "pointops: grad_out must have shape [B, C, P]");
  STD_TORCH_CHECK(n >= 0, "pointops: n must be >= 0, got ", n);
  const Dtype dt = float_dtype(grad_out, "grad_out");
  check_same_device(grad_out, "grad_out", idx, "idx");
  GatherShape s = check_gather_index(idx, grad_out.size(0), n);
  s.C = grad_out.size(1);
  STD_TORCH_CHECK(grad_out.size(2) == s.P, "pointops: grad_out must have shape [B, C, P] with P = ",
                  s.P);
  grad_out = as_contiguous(grad_out);
  idx = as_contiguous(idx);
  check_indices_cpu(idx, "idx", n);
  auto w = prepare_weight(weight, idx, grad_out, "grad_out");
  Tensor grad_feat = empty_like_shape(grad_out, {s.B, s.C, n}, grad_out.scalar_type());
  if (grad_feat.numel() == 0) return grad_feat;
  if (s.P == 0 || s.T == 0) {
    torch::stable::zero_(grad_feat);
    return grad_feat;
  }
  const int64_t* idx_p = static_cast<const int64_t*>(idx.const_data_ptr());
  if (grad_out.is_cpu()) {
    raise_on_error(gather_backward_feat_cpu(dt, grad_out.const_data_ptr(), idx_p, optional_ptr(w),
                                            s.B, s.C, s.N, s.P, s.T, grad_feat.mutable_data_ptr()),
                   "gather_backward_feat");
    return grad_feat;
  }
#ifdef POINTOPS_WITH_CUDA
  torch::stable::accelerator::DeviceGuard guard(grad_out.get_device_index());
  const size_t bytes = gather_backward_feat_cuda_workspace_bytes(dt, s.B, s.C, s.N, s.P, s.T);
  auto ws = workspace_for(grad_out, bytes);
  raise_on_error(gather_backward_feat_cuda(dt, grad_out.const_data_ptr(), idx_p, optional_ptr(w),
                                           s.B, s.C, s.N, s.P, s.T, grad_feat.mutable_data_ptr(),
                                           workspace_ptr(ws),
                                           current_cuda_stream(grad_out.get_device_index())),
                 "gather_backward_feat");
#endif
  return grad_feat;
}

Tensor gather_backward_weight(Tensor grad_out, Tensor feat, Tensor idx) {
  check_device_support(feat, "feat");
  STD_TORCH_CHECK(feat.dim() == 3, "pointops: feat must have shape [B, C, N]");
  const Dtype dt = float_dtype(feat, "feat");
  check_same_device(feat, "feat", grad_out, "grad_out");
  check_same_device(feat, "feat", idx, "idx");
  check_same_dtype(feat, "feat", grad_out, "grad_out");
  GatherShape s = check_gather_index(idx, feat.size(0), feat.size(2));
  s.C = feat.size(1);
  STD_TORCH_CHECK(grad_out.dim() == 3 && grad_out.size(0) == s.B && grad_out.size(1) == s.C &&
                      grad_out.size(2) == s.P,
                  "pointops: grad_out must have shape [B, C, P] matching feat and idx");
  feat = as_contiguous(feat);
  grad_out = as_contiguous(grad_out);
  idx = as_contiguous(idx);
  check_indices_cpu(idx, "idx", s.N);
  Tensor grad_w = empty_like_shape(feat, {s.B, s.P, s.T}, feat.scalar_type());
  if (grad_w.numel() == 0) return grad_w;
  if (s.C == 0 || s.N == 0) {
    torch::stable::zero_(grad_w);
    return grad_w;
  }
  const int64_t* idx_p = static_cast<const int64_t*>(idx.const_data_ptr());
  if (feat.is_cpu()) {
    raise_on_error(gather_backward_weight_cpu(dt, grad_out.const_data_ptr(), feat.const_data_ptr(),
                                              idx_p, s.B, s.C, s.N, s.P, s.T,
                                              grad_w.mutable_data_ptr()),
                   "gather_backward_weight");
    return grad_w;
  }
#ifdef POINTOPS_WITH_CUDA
  torch::stable::accelerator::DeviceGuard guard(feat.get_device_index());
  raise_on_error(gather_backward_weight_cuda(dt, grad_out.const_data_ptr(), feat.const_data_ptr(),
                                             idx_p, s.B, s.C, s.N, s.P, s.T,
                                             grad_w.mutable_data_ptr(),
                                             current_cuda_stream(feat.get_device_index())),
                 "gather_backward_weight");
#endif
  return grad_w;
}

// CUDART_VERSION the kernels were built with (0 in a CPU-only build): lets Python confirm that
// the loaded binary matches _build_info.json.
int64_t cuda_runtime_version() { return cuda_build_info().cuda_version; }

// ------------------------------------------------------------------------------------------
// Torch's intra-op thread pool as the CPU kernels' parallel backend.

void torch_parallel_backend(int64_t begin, int64_t end, int64_t grain, cpu::RangeBody body,
                            void* ctx) {
  // (STABLE_TORCH_ERROR_CODE_CHECK is not in every supported torch's headers: check by hand)
  if (torch_parallel_for(begin, end, grain, body, ctx) != AOTI_TORCH_SUCCESS) {
    body(begin, end, ctx);  // torch could not run it in parallel: run it here
  }
}

int64_t torch_thread_count() {
  uint32_t n = 1;
  if (torch_get_num_threads(&n) != AOTI_TORCH_SUCCESS) return 1;
  return static_cast<int64_t>(n);
}

struct InstallParallelBackend {
  InstallParallelBackend() { cpu::set_parallel_backend(torch_parallel_backend, torch_thread_count); }
};
const InstallParallelBackend install_parallel_backend;

}  // namespace

#ifndef POINTOPS_WITH_CUDA
CudaBuildInfo cuda_build_info() { return CudaBuildInfo{0}; }
#endif

}  // namespace pointops

STABLE_TORCH_LIBRARY(pointops, m) {
  m.def("furthest_point_sample(Tensor xyz, int k, Tensor? lengths, int start) -> Tensor");
  m.def("ball_query(Tensor xyz, Tensor query, float radius, int k, Tensor? lengths, "
        "Tensor? query_lengths, bool inclusive, bool return_dist2) -> (Tensor, Tensor, Tensor)");
  m.def("knn(Tensor xyz, Tensor query, int k, Tensor? lengths, Tensor? query_lengths) "
        "-> (Tensor, Tensor)");
  m.def("gather(Tensor feat, Tensor idx, Tensor? weight) -> Tensor");
  m.def("gather_backward_feat(Tensor grad_out, Tensor idx, Tensor? weight, int n) -> Tensor");
  m.def("gather_backward_weight(Tensor grad_out, Tensor feat, Tensor idx) -> Tensor");
  m.def("cuda_runtime_version() -> int");
}

#define POINTOPS_REGISTER_KERNELS(m)                                                   \
  m.impl("furthest_point_sample", TORCH_BOX(&pointops::furthest_point_sample));       \
  m.impl("ball_query", TORCH_BOX(&pointops::ball_query));                              \
  m.impl("knn", TORCH_BOX(&pointops::knn));                                            \
  m.impl("gather", TORCH_BOX(&pointops::gather));                                      \
  m.impl("gather_backward_feat", TORCH_BOX(&pointops::gather_backward_feat));          \
  m.impl("gather_backward_weight", TORCH_BOX(&pointops::gather_backward_weight))

STABLE_TORCH_LIBRARY_IMPL(pointops, CPU, m) { POINTOPS_REGISTER_KERNELS(m); }

#ifdef POINTOPS_WITH_CUDA
STABLE_TORCH_LIBRARY_IMPL(pointops, CUDA, m) { POINTOPS_REGISTER_KERNELS(m); }
#endif

STABLE_TORCH_LIBRARY_IMPL(pointops, CompositeExplicitAutograd, m) {
  m.impl("cuda_runtime_version", TORCH_BOX(&pointops::cuda_runtime_version));
}
