// furthest_point_sample: xyz [B, N, 3] (+ lengths) -> idx [B, k].
#include <torch/csrc/stable/ops.h>

#include "checks.h"
#include "ops.h"
#include "value_checks.h"

namespace pointops {
namespace binding {

Tensor furthest_point_sample(Tensor xyz, int64_t k, std::optional<Tensor> lengths, int64_t start) {
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
    raise_on_error(furthest_point_sample_cpu(dt, xyz.const_data_ptr(), index_ptr(lens), B, N, k, start, out),
                   "furthest_point_sample");
    return idx;
  }
#ifdef POINTOPS_WITH_CUDA
  CudaContext cuda(xyz);
  AsyncValueChecks checks(CheckedOp::FurthestPointSample, xyz, cuda.stream);
  checks.coordinates(xyz, CheckedArg::Xyz);
  checks.range(lens, CheckedArg::Lengths, 0, N);
  checks.run();
  const CudaPlan plan = furthest_point_sample_cuda_plan(dt, B, N, k);
  auto ws = workspace_for(xyz, plan.workspace_bytes);
  raise_on_error(furthest_point_sample_cuda(plan, dt, xyz.const_data_ptr(), index_ptr(lens), B, N, k, start,
                                            out, workspace_ptr(ws), cuda.stream),
                 "furthest_point_sample");
  checks.poison({&idx});
#endif
  return idx;
}

}  // namespace binding
}  // namespace pointops
