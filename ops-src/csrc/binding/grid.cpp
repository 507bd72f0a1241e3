// grid_cluster: pos [N, D] (+ size, start, end: D values each) -> int64 voxel ids [N], the op
// behind pointops.compat.torch_cluster.grid_cluster. One dispatcher call, and on CUDA at most two
// launches and no sync. Grid values (size > 0 and finite, finite start / end) are checked here
// on CPU, with the offending entry named, and the CPU kernel refuses the rest (end < start, ids
// beyond int64, nan in pos). On CUDA, where reading the values would wait for the device, the
// kernels record each problem (value_checks.h, raised by the next pointops call or
// pointops.check_errors()) and write kPoisonIndex for every point it affects.
#include <cmath>

#include "checks.h"
#include "ops.h"
#include "value_checks.h"

namespace pointops {

namespace binding {
namespace {

Dtype grid_dtype(const Tensor& pos) {
  switch (pos.scalar_type()) {
    case ScalarType::Float: return Dtype::Float32;
    case ScalarType::Double: return Dtype::Float64;
    default:
      STD_TORCH_CHECK(false,
                      "pointops: grid_cluster: pos must be float32 or float64 "
                      "(pointops.compat.torch_cluster.grid_cluster takes other dtypes)");
  }
  return Dtype::Float32;
}

// size / start / end: D values of pos's dtype on pos's device, of any shape (read flat).
Tensor prepare_grid_vector(const Tensor& t, const char* name, const Tensor& pos, int64_t D) {
  check_same_device(pos, "pos", t, name);
  check_same_dtype(pos, "pos", t, name);
  STD_TORCH_CHECK(t.numel() == D, "pointops: grid_cluster: ", name,
                  " must have one entry per dimension of pos (", D, "), got ", t.numel());
  return as_contiguous(t);
}

template <class T>
void check_grid_values(const Tensor& t, const char* name, bool is_size) {
  const T* p = static_cast<const T*>(t.const_data_ptr());
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    STD_TORCH_CHECK(std::isfinite(p[i]) && (!is_size || p[i] > 0), "pointops: grid_cluster: ", name, "[", i,
                    "] = ", p[i],
                    is_size ? "; cell sizes must be finite and > 0" : "; grid bounds must be finite");
  }
}

template <class T>
void check_grid_cpu(const Tensor& size, const std::optional<Tensor>& start,
                    const std::optional<Tensor>& end) {
  check_grid_values<T>(size, "size", true);
  if (start.has_value()) check_grid_values<T>(*start, "start", false);
  if (end.has_value()) check_grid_values<T>(*end, "end", false);
}

}  // namespace

Tensor grid_cluster(Tensor pos, Tensor size, std::optional<Tensor> start, std::optional<Tensor> end) {
  check_device_support(pos, "pos");
  STD_TORCH_CHECK(pos.dim() == 2, "pointops: grid_cluster: pos must have shape [N, D], got a tensor with ",
                  pos.dim(), " dimensions");
  const Dtype dt = grid_dtype(pos);
  const int64_t N = pos.size(0), D = pos.size(1);
  STD_TORCH_CHECK(!pos.is_cuda() || D <= kGridClusterMaxCudaDims,
                  "pointops: grid_cluster on CUDA takes at most ", kGridClusterMaxCudaDims,
                  " dimensions, got ", D);
  size = prepare_grid_vector(size, "size", pos, D);
  std::optional<Tensor> lo, hi;
  if (start.has_value()) lo = prepare_grid_vector(*start, "start", pos, D);
  if (end.has_value()) hi = prepare_grid_vector(*end, "end", pos, D);
  Tensor ids = empty_like_shape(pos, {N}, ScalarType::Long);
  if (pos.is_cpu()) {
    if (dt == Dtype::Float64) {
      check_grid_cpu<double>(size, lo, hi);
    } else {
      check_grid_cpu<float>(size, lo, hi);
    }
  }
  if (N == 0) return ids;
  pos = as_contiguous(pos);
  int64_t* out = static_cast<int64_t*>(ids.mutable_data_ptr());
  if (pos.is_cpu()) {
    raise_on_error(grid_cluster_cpu(dt, pos.const_data_ptr(), size.const_data_ptr(), optional_ptr(lo),
                                    optional_ptr(hi), N, D, out),
                   "grid_cluster");
    return ids;
  }
#ifdef POINTOPS_WITH_CUDA
  CudaContext cuda(pos);
  // raises a problem recorded by an earlier call; the kernels record this call's (their own codes)
  const InKernelChecks checks = in_kernel_checks(CheckedOp::GridCluster, CheckedArg::Pos, pos, cuda.stream);
  const CudaPlan plan = grid_cluster_cuda_plan(dt, N, D, !lo.has_value() || !hi.has_value());
  auto ws = workspace_for(pos, plan.workspace_bytes);
  raise_on_error(grid_cluster_cuda(plan, dt, pos.const_data_ptr(), size.const_data_ptr(), optional_ptr(lo),
                                   optional_ptr(hi), N, D, out, workspace_ptr(ws),
                                   checks.device_code != nullptr ? &checks : nullptr, cuda.stream),
                 "grid_cluster");
#endif
  return ids;
}

}  // namespace binding
}  // namespace pointops
