// ball_query and knn over padded clouds: xyz [B, N, 3], query [B, M, 3] (+ lengths).
#include <torch/csrc/stable/ops.h>

#include <cmath>

#include "checks.h"
#include "ops.h"
#include "value_checks.h"

namespace pointops {
namespace binding {
namespace {

// The inputs of both searches, checked and contiguous.
struct NeighbourInputs {
  Tensor xyz, query;
  std::optional<Tensor> lengths, query_lengths;
  Dtype dt;
};

NeighbourInputs prepare_neighbours(Tensor xyz, Tensor query, int64_t k, const std::optional<Tensor>& lengths,
                                   const std::optional<Tensor>& query_lengths) {
  check_points(xyz, "xyz");
  check_points(query, "query");
  check_same_device(xyz, "xyz", query, "query");
  check_same_dtype(xyz, "xyz", query, "query");
  STD_TORCH_CHECK(query.size(0) == xyz.size(0), "pointops: query has batch size ", query.size(0),
                  " but xyz has ", xyz.size(0));
  STD_TORCH_CHECK(k > 0, "pointops: k must be > 0, got ", k);
  NeighbourInputs in{as_contiguous(xyz), as_contiguous(query), std::nullopt, std::nullopt,
                     float_dtype(xyz, "xyz")};
  check_finite_cpu(in.xyz, "xyz");
  check_finite_cpu(in.query, "query");
  in.lengths = prepare_lengths(lengths, "lengths", in.xyz, "xyz");
  in.query_lengths = prepare_lengths(query_lengths, "query_lengths", in.query, "query");
  return in;
}

#ifdef POINTOPS_WITH_CUDA
void queue_neighbour_checks(AsyncValueChecks& checks, const NeighbourInputs& in) {
  checks.coordinates(in.xyz, CheckedArg::Xyz);
  checks.coordinates(in.query, CheckedArg::Query);
  checks.range(in.lengths, CheckedArg::Lengths, 0, in.xyz.size(1));
  checks.range(in.query_lengths, CheckedArg::QueryLengths, 0, in.query.size(1));
  checks.run();
}
#endif

}  // namespace

std::tuple<Tensor, Tensor, Tensor> ball_query(Tensor xyz, Tensor query, double radius, int64_t k,
                                              std::optional<Tensor> lengths,
                                              std::optional<Tensor> query_lengths, bool inclusive,
                                              bool return_dist2) {
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
    raise_on_error(
        ball_query_cpu(in.dt, in.xyz.const_data_ptr(), in.query.const_data_ptr(), index_ptr(in.lengths),
                       index_ptr(in.query_lengths), B, N, M, radius, inclusive, k, idx_p, count_p, d2),
        "ball_query");
    return {idx, count, dist2};
  }
#ifdef POINTOPS_WITH_CUDA
  CudaContext cuda(in.xyz);
  AsyncValueChecks checks(CheckedOp::BallQuery, in.xyz, cuda.stream);
  queue_neighbour_checks(checks, in);
  const CudaPlan plan = ball_query_cuda_plan(in.dt, B, N, M, k);
  auto ws = workspace_for(in.xyz, plan.workspace_bytes);
  raise_on_error(ball_query_cuda(plan, in.dt, in.xyz.const_data_ptr(), in.query.const_data_ptr(),
                                 index_ptr(in.lengths), index_ptr(in.query_lengths), B, N, M, radius,
                                 inclusive, k, idx_p, count_p, d2, workspace_ptr(ws), cuda.stream),
                 "ball_query");
  checks.poison({&idx, &count, return_dist2 ? &dist2 : nullptr});
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
    raise_on_error(knn_cpu(in.dt, in.xyz.const_data_ptr(), in.query.const_data_ptr(), index_ptr(in.lengths),
                           index_ptr(in.query_lengths), B, N, M, k, dist2.mutable_data_ptr(), idx_p),
                   "knn");
    return {dist2, idx};
  }
#ifdef POINTOPS_WITH_CUDA
  CudaContext cuda(in.xyz);
  AsyncValueChecks checks(CheckedOp::Knn, in.xyz, cuda.stream);
  queue_neighbour_checks(checks, in);
  const CudaPlan plan = knn_cuda_plan(in.dt, B, N, M, k);
  auto ws = workspace_for(in.xyz, plan.workspace_bytes);
  raise_on_error(knn_cuda(plan, in.dt, in.xyz.const_data_ptr(), in.query.const_data_ptr(),
                          index_ptr(in.lengths), index_ptr(in.query_lengths), B, N, M, k,
                          dist2.mutable_data_ptr(), idx_p, workspace_ptr(ws), cuda.stream),
                 "knn");
  checks.poison({&dist2, &idx});
#endif
  return {dist2, idx};
}

}  // namespace binding
}  // namespace pointops
