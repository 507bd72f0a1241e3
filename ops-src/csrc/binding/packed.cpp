// Packed clouds (all clouds concatenated, described by an int64 row pointer on the device):
// furthest_point_sample_packed, knn_packed, ball_query_packed. Row pointers are checked like
// every value: on CPU before the kernels run, on CUDA by the asynchronous checks.
#include <torch/csrc/stable/ops.h>

#include <cmath>

#include "checks.h"
#include "ops.h"
#include "value_checks.h"

namespace pointops {
namespace binding {
namespace {

// Points (or queries) of a packed batch: [rows, 3] floats.
void check_packed_points(const Tensor& t, const char* name) {
  check_device_support(t, name);
  STD_TORCH_CHECK(t.dim() == 2 && t.size(1) == 3, "pointops: ", name,
                  " must have shape [P, 3], got a tensor with ", t.dim(), " dimensions");
  float_dtype(t, name);
}

// A row pointer of B + 1 int64 entries on points' device: 0, nondecreasing, ending at `rows`,
// and no cloud above max_count when that is > 0 (values checked here on CPU).
Tensor prepare_row_pointer(const Tensor& ptr, const char* name, const Tensor& points, const char* points_name,
                           int64_t rows, int64_t max_count = 0) {
  check_index(ptr, name);
  check_same_device(points, points_name, ptr, name);
  STD_TORCH_CHECK(ptr.dim() == 1 && ptr.size(0) >= 1, "pointops: ", name,
                  " must be a 1-D row pointer with B + 1 >= 1 entries");
  Tensor c = as_contiguous(ptr);
  if (c.is_cpu()) {
    const int64_t* p = static_cast<const int64_t*>(c.const_data_ptr());
    const int64_t n = c.numel();
    STD_TORCH_CHECK(p[0] == 0, "pointops: ", name, "[0] = ", p[0], "; a row pointer starts at 0");
    for (int64_t i = 1; i < n; ++i) {
      STD_TORCH_CHECK(p[i] >= p[i - 1], "pointops: ", name, " decreases at entry ", i, " (", p[i - 1], " -> ",
                      p[i], "); a row pointer never decreases");
      STD_TORCH_CHECK(max_count <= 0 || p[i] - p[i - 1] <= max_count, "pointops: cloud ", i - 1, " of ", name,
                      " has ", p[i] - p[i - 1], " rows, more than max_points = ", max_count,
                      "; pass a bound >= every cloud's size (or none)");
    }
    STD_TORCH_CHECK(p[n - 1] == rows, "pointops: ", name, " ends at ", p[n - 1], " but ", points_name,
                    " has ", rows, " rows; the last entry is the number of rows");
  }
  return c;
}

struct PackedPair {
  Tensor xyz, ptr, query, query_ptr;
  Dtype dt;
  int64_t B, P, Q;
};

PackedPair prepare_pair(Tensor xyz, Tensor ptr, Tensor query, Tensor query_ptr, int64_t k) {
  check_packed_points(xyz, "xyz");
  check_packed_points(query, "query");
  check_same_device(xyz, "xyz", query, "query");
  check_same_dtype(xyz, "xyz", query, "query");
  STD_TORCH_CHECK(k > 0, "pointops: k must be > 0, got ", k);
  PackedPair in{
      as_contiguous(xyz), Tensor(), as_contiguous(query), Tensor(), float_dtype(xyz, "xyz"), 0, 0, 0};
  in.P = in.xyz.size(0);
  in.Q = in.query.size(0);
  in.ptr = prepare_row_pointer(ptr, "ptr", in.xyz, "xyz", in.P);
  in.query_ptr = prepare_row_pointer(query_ptr, "query_ptr", in.query, "query", in.Q);
  STD_TORCH_CHECK(in.ptr.size(0) == in.query_ptr.size(0), "pointops: ptr describes ", in.ptr.size(0) - 1,
                  " clouds but query_ptr ", in.query_ptr.size(0) - 1,
                  "; both need one entry per cloud, plus one");
  in.B = in.ptr.size(0) - 1;
  check_finite_cpu(in.xyz, "xyz");
  check_finite_cpu(in.query, "query");
  return in;
}

const int64_t* rows_of(const Tensor& t) { return static_cast<const int64_t*>(t.const_data_ptr()); }

#ifdef POINTOPS_WITH_CUDA
void queue_pair_checks(AsyncValueChecks& checks, const PackedPair& in) {
  checks.coordinates(in.xyz, CheckedArg::Xyz);
  checks.coordinates(in.query, CheckedArg::Query);
  checks.row_pointer(in.ptr, CheckedArg::Ptr, in.P);
  checks.row_pointer(in.query_ptr, CheckedArg::QueryPtr, in.Q);
  checks.run();
}
#endif

}  // namespace

std::tuple<Tensor, Tensor> knn_packed(Tensor xyz, Tensor ptr, Tensor query, Tensor query_ptr, int64_t k) {
  PackedPair in = prepare_pair(xyz, ptr, query, query_ptr, k);
  Tensor dist2 = empty_like_shape(in.xyz, {in.Q, k}, in.xyz.scalar_type());
  Tensor idx = empty_like_shape(in.xyz, {in.Q, k}, ScalarType::Long);
  int64_t* idx_p = static_cast<int64_t*>(idx.mutable_data_ptr());
  if (in.xyz.is_cpu()) {
    raise_on_error(
        knn_packed_cpu(in.dt, in.xyz.const_data_ptr(), rows_of(in.ptr), in.P, in.query.const_data_ptr(),
                       rows_of(in.query_ptr), in.Q, in.B, k, dist2.mutable_data_ptr(), idx_p),
        "knn_packed");
    return {dist2, idx};
  }
#ifdef POINTOPS_WITH_CUDA
  CudaContext cuda(in.xyz);
  AsyncValueChecks checks(CheckedOp::KnnPacked, in.xyz, cuda.stream);
  queue_pair_checks(checks, in);  // with no queries too: a bad row pointer is reported all the same
  if (in.Q == 0) return {dist2, idx};
  const CudaPlan plan = knn_packed_cuda_plan(in.dt, in.B, in.P, in.Q, k);
  auto ws = workspace_for(in.xyz, plan.workspace_bytes);
  raise_on_error(knn_packed_cuda(plan, in.dt, in.xyz.const_data_ptr(), rows_of(in.ptr), in.P,
                                 in.query.const_data_ptr(), rows_of(in.query_ptr), in.Q, in.B, k,
                                 dist2.mutable_data_ptr(), idx_p, workspace_ptr(ws), cuda.stream),
                 "knn_packed");
  checks.poison({&dist2, &idx});
#endif
  return {dist2, idx};
}

std::tuple<Tensor, Tensor, Tensor> ball_query_packed(Tensor xyz, Tensor ptr, Tensor query, Tensor query_ptr,
                                                     double radius, int64_t k, bool inclusive,
                                                     bool return_dist2) {
  STD_TORCH_CHECK(std::isfinite(radius) && radius >= 0, "pointops: radius must be finite and >= 0, got ",
                  radius);
  PackedPair in = prepare_pair(xyz, ptr, query, query_ptr, k);
  Tensor idx = empty_like_shape(in.xyz, {in.Q, k}, ScalarType::Long);
  Tensor count = empty_like_shape(in.xyz, {in.Q}, ScalarType::Long);
  Tensor dist2 = return_dist2 ? empty_like_shape(in.xyz, {in.Q, k}, in.xyz.scalar_type())
                              : empty_like_shape(in.xyz, {0}, in.xyz.scalar_type());
  void* d2 = return_dist2 ? dist2.mutable_data_ptr() : nullptr;
  int64_t* idx_p = static_cast<int64_t*>(idx.mutable_data_ptr());
  int64_t* count_p = static_cast<int64_t*>(count.mutable_data_ptr());
  if (in.xyz.is_cpu()) {
    raise_on_error(ball_query_packed_cpu(in.dt, in.xyz.const_data_ptr(), rows_of(in.ptr), in.P,
                                         in.query.const_data_ptr(), rows_of(in.query_ptr), in.Q, in.B, radius,
                                         inclusive, k, idx_p, count_p, d2),
                   "ball_query_packed");
    return {idx, count, dist2};
  }
#ifdef POINTOPS_WITH_CUDA
  CudaContext cuda(in.xyz);
  AsyncValueChecks checks(CheckedOp::BallQueryPacked, in.xyz, cuda.stream);
  queue_pair_checks(checks, in);  // with no queries too: a bad row pointer is reported all the same
  if (in.Q == 0) return {idx, count, dist2};
  const CudaPlan plan = ball_query_packed_cuda_plan(in.dt, in.B, in.P, in.Q, k);
  auto ws = workspace_for(in.xyz, plan.workspace_bytes);
  raise_on_error(ball_query_packed_cuda(plan, in.dt, in.xyz.const_data_ptr(), rows_of(in.ptr), in.P,
                                        in.query.const_data_ptr(), rows_of(in.query_ptr), in.Q, in.B, radius,
                                        inclusive, k, idx_p, count_p, d2, workspace_ptr(ws), cuda.stream),
                 "ball_query_packed");
  checks.poison({&idx, &count, return_dist2 ? &dist2 : nullptr});
#endif
  return {idx, count, dist2};
}

Tensor furthest_point_sample_packed(Tensor xyz, Tensor ptr, Tensor sample_ptr, int64_t samples,
                                    int64_t max_points) {
  check_packed_points(xyz, "xyz");
  STD_TORCH_CHECK(samples >= 0, "pointops: samples must be >= 0, got ", samples);
  xyz = as_contiguous(xyz);
  const int64_t P = xyz.size(0);
  Tensor p = prepare_row_pointer(ptr, "ptr", xyz, "xyz", P, max_points);
  Tensor idx = empty_like_shape(xyz, {samples}, ScalarType::Long);
  check_index(sample_ptr, "sample_ptr");
  check_same_device(xyz, "xyz", sample_ptr, "sample_ptr");
  Tensor sp = prepare_row_pointer(sample_ptr, "sample_ptr", idx, "the output (samples)", samples);
  STD_TORCH_CHECK(p.size(0) == sp.size(0), "pointops: ptr describes ", p.size(0) - 1,
                  " clouds but sample_ptr ", sp.size(0) - 1, "; both need one entry per cloud, plus one");
  const int64_t B = p.size(0) - 1;
  check_finite_cpu(xyz, "xyz");
  const Dtype dt = float_dtype(xyz, "xyz");
  int64_t* out = static_cast<int64_t*>(idx.mutable_data_ptr());
  if (xyz.is_cpu()) {
    raise_on_error(furthest_point_sample_packed_cpu(dt, xyz.const_data_ptr(), rows_of(p), P, rows_of(sp),
                                                    samples, B, out),
                   "furthest_point_sample_packed");
    return idx;
  }
#ifdef POINTOPS_WITH_CUDA
  // max_points bounds every cloud (<= 0: no bound known, plan for P); a cloud above it would be
  // sampled wrong, so the check refuses such a row pointer.
  const int64_t bound = max_points > 0 && max_points < P ? max_points : P;
  CudaContext cuda(xyz);
  AsyncValueChecks checks(CheckedOp::FurthestPointSamplePacked, xyz, cuda.stream);
  checks.coordinates(xyz, CheckedArg::Xyz);
  checks.row_pointer(p, CheckedArg::Ptr, P, bound);
  checks.row_pointer(sp, CheckedArg::SamplePtr, samples);
  checks.run();
  if (samples == 0 || B == 0) return idx;  // after the checks: a bad row pointer is reported all the same
  const CudaPlan plan = furthest_point_sample_packed_cuda_plan(dt, B, P, bound);
  auto ws = workspace_for(xyz, plan.workspace_bytes);
  raise_on_error(furthest_point_sample_packed_cuda(plan, dt, xyz.const_data_ptr(), rows_of(p), P, rows_of(sp),
                                                   samples, B, out, workspace_ptr(ws), cuda.stream),
                 "furthest_point_sample_packed");
  checks.poison({&idx});
#endif
  return idx;
}

namespace {

// Channels-last features [rows, C] and an index [Q, T] into their rows, on one device.
void check_rows_and_index(const Tensor& rows, const char* rows_name, const Tensor& idx) {
  check_device_support(rows, rows_name);
  STD_TORCH_CHECK(rows.dim() == 2, "pointops: ", rows_name, " must have shape [P, C], got a tensor with ",
                  rows.dim(), " dimensions");
  float_dtype(rows, rows_name);
  STD_TORCH_CHECK(idx.scalar_type() == ScalarType::Long || idx.scalar_type() == ScalarType::Int,
                  "pointops: idx must be an int32 or int64 tensor");
  check_same_device(rows, rows_name, idx, "idx");
  STD_TORCH_CHECK(idx.dim() == 2, "pointops: idx must have shape [Q, T], got a tensor with ", idx.dim(),
                  " dimensions");
}

// A row index ready for the kernels: contiguous; int64 on CPU (int32 converted there, where the
// copy is cheap next to the work), int64 or int32 as given on CUDA.
Tensor prepare_row_index(const Tensor& idx) {
  if (idx.is_cpu() && idx.scalar_type() == ScalarType::Int) {
    Tensor wide = empty_like_shape(idx, {idx.size(0), idx.size(1)}, ScalarType::Long);
    torch::stable::copy_(wide, idx);
    return wide;
  }
  return as_contiguous(idx);
}

#ifdef POINTOPS_WITH_CUDA
RowIndex row_index(const Tensor& idx) {
  return RowIndex{idx.const_data_ptr(), idx.scalar_type() == ScalarType::Int};
}
#endif

std::optional<Tensor> prepare_row_weight(const std::optional<Tensor>& weight, const Tensor& idx,
                                         const Tensor& like, const char* like_name) {
  if (!weight.has_value()) return std::nullopt;
  check_same_device(like, like_name, *weight, "weight");
  check_same_dtype(like, like_name, *weight, "weight");
  STD_TORCH_CHECK(weight->dim() == 2 && weight->size(0) == idx.size(0) && weight->size(1) == idx.size(1),
                  "pointops: weight must have the shape of idx [Q, T]");
  return as_contiguous(*weight);
}

}  // namespace

Tensor gather_rows(Tensor feat, Tensor idx, std::optional<Tensor> weight) {
  check_rows_and_index(feat, "feat", idx);
  feat = as_contiguous(feat);
  idx = prepare_row_index(idx);
  const int64_t P = feat.size(0), C = feat.size(1), Q = idx.size(0), T = idx.size(1);
  check_indices_cpu(idx, "idx", P);
  auto w = prepare_row_weight(weight, idx, feat, "feat");
  Tensor out = empty_like_shape(feat, {Q, C}, feat.scalar_type());
  if (out.numel() == 0 || P == 0 || T == 0) {
    if (out.numel() > 0) torch::stable::zero_(out);
    check_unread_indices(CheckedOp::GatherRows, idx, P, out);
    return out;
  }
  const Dtype dt = float_dtype(feat, "feat");
  if (feat.is_cpu()) {
    raise_on_error(gather_rows_cpu(dt, feat.const_data_ptr(), rows_of(idx), optional_ptr(w), P, C, Q, T,
                                   out.mutable_data_ptr()),
                   "gather_rows");
    return out;
  }
#ifdef POINTOPS_WITH_CUDA
  CudaContext cuda(feat);
  // The kernels check their indices themselves (no check or poison kernels on this hot path).
  const InKernelChecks checks = in_kernel_checks(CheckedOp::GatherRows, CheckedArg::Idx, feat, cuda.stream);
  raise_on_error(
      gather_rows_cuda(dt, feat.const_data_ptr(), row_index(idx), optional_ptr(w), P, C, Q, T,
                       out.mutable_data_ptr(), checks.device_code ? &checks : nullptr, cuda.stream),
      "gather_rows");
#endif
  return out;
}

Tensor gather_rows_backward_feat(Tensor grad_out, Tensor idx, std::optional<Tensor> weight, int64_t rows) {
  check_rows_and_index(grad_out, "grad_out", idx);
  STD_TORCH_CHECK(rows >= 0, "pointops: rows must be >= 0, got ", rows);
  STD_TORCH_CHECK(grad_out.size(0) == idx.size(0),
                  "pointops: grad_out must have shape [Q, C] with Q = ", idx.size(0));
  grad_out = as_contiguous(grad_out);
  idx = prepare_row_index(idx);
  const int64_t C = grad_out.size(1), Q = idx.size(0), T = idx.size(1);
  check_indices_cpu(idx, "idx", rows);
  auto w = prepare_row_weight(weight, idx, grad_out, "grad_out");
  Tensor grad_feat = empty_like_shape(grad_out, {rows, C}, grad_out.scalar_type());
  if (grad_feat.numel() == 0 || Q == 0 || T == 0) {
    if (grad_feat.numel() > 0) torch::stable::zero_(grad_feat);
    check_unread_indices(CheckedOp::GatherRows, idx, rows, grad_feat);
    return grad_feat;
  }
  const Dtype dt = float_dtype(grad_out, "grad_out");
  if (grad_out.is_cpu()) {
    raise_on_error(gather_rows_backward_feat_cpu(dt, grad_out.const_data_ptr(), rows_of(idx), optional_ptr(w),
                                                 rows, C, Q, T, grad_feat.mutable_data_ptr()),
                   "gather_rows_backward_feat");
    return grad_feat;
  }
#ifdef POINTOPS_WITH_CUDA
  CudaContext cuda(grad_out);
  const InKernelChecks checks =
      in_kernel_checks(CheckedOp::GatherRows, CheckedArg::Idx, grad_out, cuda.stream);
  const CudaPlan plan = gather_rows_backward_feat_cuda_plan(dt, rows, C, Q, T);
  auto ws = workspace_for(grad_out, plan.workspace_bytes);
  raise_on_error(
      gather_rows_backward_feat_cuda(plan, dt, grad_out.const_data_ptr(), row_index(idx), optional_ptr(w),
                                     rows, C, Q, T, grad_feat.mutable_data_ptr(), workspace_ptr(ws),
                                     checks.device_code ? &checks : nullptr, cuda.stream),
      "gather_rows_backward_feat");
#endif
  return grad_feat;
}

Tensor gather_rows_backward_weight(Tensor grad_out, Tensor feat, Tensor idx) {
  check_rows_and_index(feat, "feat", idx);
  check_same_device(feat, "feat", grad_out, "grad_out");
  check_same_dtype(feat, "feat", grad_out, "grad_out");
  STD_TORCH_CHECK(grad_out.dim() == 2 && grad_out.size(0) == idx.size(0) && grad_out.size(1) == feat.size(1),
                  "pointops: grad_out must have shape [Q, C] matching idx and feat");
  feat = as_contiguous(feat);
  grad_out = as_contiguous(grad_out);
  idx = prepare_row_index(idx);
  const int64_t P = feat.size(0), C = feat.size(1), Q = idx.size(0), T = idx.size(1);
  check_indices_cpu(idx, "idx", P);
  Tensor grad_w = empty_like_shape(feat, {Q, T}, feat.scalar_type());
  if (grad_w.numel() == 0 || C == 0 || P == 0) {
    if (grad_w.numel() > 0) torch::stable::zero_(grad_w);
    check_unread_indices(CheckedOp::GatherRows, idx, P, grad_w);
    return grad_w;
  }
  const Dtype dt = float_dtype(feat, "feat");
  if (feat.is_cpu()) {
    raise_on_error(gather_rows_backward_weight_cpu(dt, grad_out.const_data_ptr(), feat.const_data_ptr(),
                                                   rows_of(idx), P, C, Q, T, grad_w.mutable_data_ptr()),
                   "gather_rows_backward_weight");
    return grad_w;
  }
#ifdef POINTOPS_WITH_CUDA
  CudaContext cuda(feat);
  const InKernelChecks checks = in_kernel_checks(CheckedOp::GatherRows, CheckedArg::Idx, feat, cuda.stream);
  raise_on_error(gather_rows_backward_weight_cuda(dt, grad_out.const_data_ptr(), feat.const_data_ptr(),
                                                  row_index(idx), P, C, Q, T, grad_w.mutable_data_ptr(),
                                                  checks.device_code ? &checks : nullptr, cuda.stream),
                 "gather_rows_backward_weight");
#endif
  return grad_w;
}

}  // namespace binding
}  // namespace pointops
