// The weighted gather (gather_points, group_points, three_interpolate) and its two gradients:
// feat [B, C, N], idx [B, P, T], weight [B, P, T] or none -> out [B, C, P]. Without weights idx
// may also be [B, P] (T = 1): gather_points passes its indices as they are, without a view.
#include <torch/csrc/stable/ops.h>

#include "checks.h"
#include "ops.h"
#include "value_checks.h"

namespace pointops {
namespace binding {
namespace {

struct GatherShape {
  int64_t B, C, N, P, T;
};

GatherShape check_gather_index(const Tensor& idx, int64_t B, int64_t N) {
  check_index(idx, "idx");
  STD_TORCH_CHECK((idx.dim() == 3 || idx.dim() == 2) && idx.size(0) == B,
                  "pointops: idx must have shape [B, P, T] (or [B, P]) with B = ", B, ", got a tensor with ",
                  idx.dim(), " dimensions");
  return GatherShape{B, 0, N, idx.size(1), idx.dim() == 3 ? idx.size(2) : 1};
}

std::optional<Tensor> prepare_weight(const std::optional<Tensor>& weight, const Tensor& idx,
                                     const Tensor& like, const char* like_name) {
  if (!weight.has_value()) return std::nullopt;
  const Tensor& w = *weight;
  STD_TORCH_CHECK(idx.dim() == 3, "pointops: a weighted gather needs idx of shape [B, P, T]");
  check_same_device(like, like_name, w, "weight");
  check_same_dtype(like, like_name, w, "weight");
  STD_TORCH_CHECK(
      w.dim() == 3 && w.size(0) == idx.size(0) && w.size(1) == idx.size(1) && w.size(2) == idx.size(2),
      "pointops: weight must have the same shape as idx [B, P, T]");
  return as_contiguous(w);
}

}  // namespace

Tensor gather(Tensor feat, Tensor idx, std::optional<Tensor> weight) {
  check_device_support(feat, "feat");
  STD_TORCH_CHECK(feat.dim() == 3, "pointops: feat must have shape [B, C, N], got a tensor with ", feat.dim(),
                  " dimensions");
  const Dtype dt = float_dtype(feat, "feat");
  check_same_device(feat, "feat", idx, "idx");
  GatherShape s = check_gather_index(idx, feat.size(0), feat.size(2));
  s.C = feat.size(1);
  feat = as_contiguous(feat);
  idx = as_contiguous(idx);
  check_indices_cpu(idx, "idx", s.N);
  auto w = prepare_weight(weight, idx, feat, "feat");
  Tensor out = empty_like_shape(feat, {s.B, s.C, s.P}, feat.scalar_type());
  if (out.numel() == 0 || s.N == 0 || s.T == 0) {
    if (out.numel() > 0) torch::stable::zero_(out);  // only -1 indices can address no points
    check_unread_indices(CheckedOp::Gather, idx, s.N, out);
    return out;
  }
  const int64_t* idx_p = static_cast<const int64_t*>(idx.const_data_ptr());
  if (feat.is_cpu()) {
    raise_on_error(gather_forward_cpu(dt, feat.const_data_ptr(), idx_p, optional_ptr(w), s.B, s.C, s.N, s.P,
                                      s.T, out.mutable_data_ptr()),
                   "gather");
    return out;
  }
#ifdef POINTOPS_WITH_CUDA
  CudaContext cuda(feat);
  // The gather checks its indices itself (no check or poison kernels on this hot path).
  const InKernelChecks checks = in_kernel_checks(CheckedOp::Gather, CheckedArg::Idx, feat, cuda.stream);
  raise_on_error(
      gather_forward_cuda(dt, feat.const_data_ptr(), idx_p, optional_ptr(w), s.B, s.C, s.N, s.P, s.T,
                          out.mutable_data_ptr(), checks.device_code ? &checks : nullptr, cuda.stream),
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
  STD_TORCH_CHECK(grad_out.size(2) == s.P, "pointops: grad_out must have shape [B, C, P] with P = ", s.P);
  grad_out = as_contiguous(grad_out);
  idx = as_contiguous(idx);
  check_indices_cpu(idx, "idx", n);
  auto w = prepare_weight(weight, idx, grad_out, "grad_out");
  Tensor grad_feat = empty_like_shape(grad_out, {s.B, s.C, n}, grad_out.scalar_type());
  if (grad_feat.numel() == 0 || s.P == 0 || s.T == 0) {
    if (grad_feat.numel() > 0) torch::stable::zero_(grad_feat);
    check_unread_indices(CheckedOp::Gather, idx, n, grad_feat);
    return grad_feat;
  }
  const int64_t* idx_p = static_cast<const int64_t*>(idx.const_data_ptr());
  if (grad_out.is_cpu()) {
    raise_on_error(gather_backward_feat_cpu(dt, grad_out.const_data_ptr(), idx_p, optional_ptr(w), s.B, s.C,
                                            s.N, s.P, s.T, grad_feat.mutable_data_ptr()),
                   "gather_backward_feat");
    return grad_feat;
  }
#ifdef POINTOPS_WITH_CUDA
  CudaContext cuda(grad_out);
  // The kernels that read idx first record an index outside -1..n-1 (a direct call's; through
  // autograd the forward has seen the same indices).
  const InKernelChecks checks = in_kernel_checks(CheckedOp::Gather, CheckedArg::Idx, grad_out, cuda.stream);
  const CudaPlan plan = gather_backward_feat_cuda_plan(dt, s.B, s.C, s.N, s.P, s.T);
  auto ws = workspace_for(grad_out, plan.workspace_bytes);
  raise_on_error(
      gather_backward_feat_cuda(plan, dt, grad_out.const_data_ptr(), idx_p, optional_ptr(w), s.B, s.C, s.N,
                                s.P, s.T, grad_feat.mutable_data_ptr(), workspace_ptr(ws),
                                checks.device_code ? &checks : nullptr, cuda.stream),
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
  STD_TORCH_CHECK(
      grad_out.dim() == 3 && grad_out.size(0) == s.B && grad_out.size(1) == s.C && grad_out.size(2) == s.P,
      "pointops: grad_out must have shape [B, C, P] matching feat and idx");
  feat = as_contiguous(feat);
  grad_out = as_contiguous(grad_out);
  idx = as_contiguous(idx);
  check_indices_cpu(idx, "idx", s.N);
  Tensor grad_w = empty_like_shape(feat, {s.B, s.P, s.T}, feat.scalar_type());
  if (grad_w.numel() == 0 || s.C == 0 || s.N == 0) {
    if (grad_w.numel() > 0) torch::stable::zero_(grad_w);
    check_unread_indices(CheckedOp::Gather, idx, s.N, grad_w);
    return grad_w;
  }
  const int64_t* idx_p = static_cast<const int64_t*>(idx.const_data_ptr());
  if (feat.is_cpu()) {
    raise_on_error(gather_backward_weight_cpu(dt, grad_out.const_data_ptr(), feat.const_data_ptr(), idx_p,
                                              s.B, s.C, s.N, s.P, s.T, grad_w.mutable_data_ptr()),
                   "gather_backward_weight");
    return grad_w;
  }
#ifdef POINTOPS_WITH_CUDA
  CudaContext cuda(feat);
  const InKernelChecks checks = in_kernel_checks(CheckedOp::Gather, CheckedArg::Idx, feat, cuda.stream);
  raise_on_error(gather_backward_weight_cuda(dt, grad_out.const_data_ptr(), feat.const_data_ptr(), idx_p, s.B,
                                             s.C, s.N, s.P, s.T, grad_w.mutable_data_ptr(),
                                             checks.device_code ? &checks : nullptr, cuda.stream),
                 "gather_backward_weight");
#endif
  return grad_w;
}

}  // namespace binding
}  // namespace pointops
