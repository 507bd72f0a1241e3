// Registers the pointops operators with PyTorch through the stable ABI (STABLE_TORCH_LIBRARY):
// their schemas, their CPU and CUDA kernels (binding/*.cpp), and torch's thread pool as the
// CPU kernels' parallel backend. The binding touches torch only through torch/csrc/stable and
// the C shim, so one binary serves every PyTorch >= TORCH_TARGET_VERSION. The Python wrappers
// (pointops/ops.py) check inputs first and give friendlier messages; the checks here make
// direct torch.ops calls safe as well.
#include <torch/csrc/stable/library.h>

#include <string>

#include "../cpu/parallel.h"
#include "../tuning.h"
#include "ops.h"
#include "value_checks.h"

namespace pointops {
namespace binding {
namespace {

// CUDART_VERSION the kernels were built with (0 in a CPU-only build): lets Python confirm that
// the loaded binary matches _build_info.json.
int64_t cuda_runtime_version() { return cuda_build_info().cuda_version; }

// Tests and benchmarks force kernel paths through the knobs of tuning.h; returns the previous
// value (-1: unset).
int64_t set_tuning_knob(std::string name, int64_t value) {
  Knob knob;
  STD_TORCH_CHECK(tuning_knob(name.c_str(), &knob), "pointops: there is no tuning knob named '", name,
                  "' (see csrc/tuning.h)");
  return set_tuning(knob, value);
}

bool set_value_checks(bool enabled) { return set_value_checks_enabled(enabled); }

// The explicit check: waits for the device's current stream, then raises what its value checks
// recorded.
void check_errors(int64_t device) {
#ifdef POINTOPS_WITH_CUDA
  void* stream = current_cuda_stream(static_cast<int32_t>(device));
  raise_on_error(synchronize_stream(stream), "check_errors");
  raise_recorded_problem(static_cast<int32_t>(device), stream, "check_errors");
#else
  (void)device;
#endif
}

void torch_parallel_backend(int64_t begin, int64_t end, int64_t grain, cpu::RangeBody body, void* ctx) {
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
}  // namespace binding

#ifndef POINTOPS_WITH_CUDA
CudaBuildInfo cuda_build_info() { return CudaBuildInfo{0}; }
#endif

}  // namespace pointops

STABLE_TORCH_LIBRARY(pointops, m) {
  m.def("furthest_point_sample(Tensor xyz, int k, Tensor? lengths, int start) -> Tensor");
  m.def(
      "ball_query(Tensor xyz, Tensor query, float radius, int k, Tensor? lengths, "
      "Tensor? query_lengths, bool inclusive, bool return_dist2) -> (Tensor, Tensor, Tensor)");
  m.def(
      "knn(Tensor xyz, Tensor query, int k, Tensor? lengths, Tensor? query_lengths) "
      "-> (Tensor, Tensor)");
  m.def("gather(Tensor feat, Tensor idx, Tensor? weight) -> Tensor");
  m.def("gather_backward_feat(Tensor grad_out, Tensor idx, Tensor? weight, int n) -> Tensor");
  m.def("gather_backward_weight(Tensor grad_out, Tensor feat, Tensor idx) -> Tensor");
  m.def("knn_packed(Tensor xyz, Tensor ptr, Tensor query, Tensor query_ptr, int k) -> (Tensor, Tensor)");
  m.def(
      "ball_query_packed(Tensor xyz, Tensor ptr, Tensor query, Tensor query_ptr, float radius, int k, "
      "bool inclusive, bool return_dist2) -> (Tensor, Tensor, Tensor)");
  m.def(
      "furthest_point_sample_packed(Tensor xyz, Tensor ptr, Tensor sample_ptr, int samples, int max_points) "
      "-> Tensor");
  m.def("gather_rows(Tensor feat, Tensor idx, Tensor? weight) -> Tensor");
  m.def("gather_rows_backward_feat(Tensor grad_out, Tensor idx, Tensor? weight, int rows) -> Tensor");
  m.def("gather_rows_backward_weight(Tensor grad_out, Tensor feat, Tensor idx) -> Tensor");
  m.def("grid_cluster(Tensor pos, Tensor size, Tensor? start, Tensor? end) -> Tensor");
  m.def("cuda_runtime_version() -> int");
  m.def("set_tuning(str name, int value) -> int");
  m.def("set_value_checks(bool enabled) -> bool");
  m.def("check_errors(int device) -> ()");
}

#define POINTOPS_REGISTER_KERNELS(m)                                                                   \
  m.impl("furthest_point_sample", TORCH_BOX(&pointops::binding::furthest_point_sample));               \
  m.impl("ball_query", TORCH_BOX(&pointops::binding::ball_query));                                     \
  m.impl("knn", TORCH_BOX(&pointops::binding::knn));                                                   \
  m.impl("gather", TORCH_BOX(&pointops::binding::gather));                                             \
  m.impl("gather_backward_feat", TORCH_BOX(&pointops::binding::gather_backward_feat));                 \
  m.impl("gather_backward_weight", TORCH_BOX(&pointops::binding::gather_backward_weight));             \
  m.impl("knn_packed", TORCH_BOX(&pointops::binding::knn_packed));                                     \
  m.impl("ball_query_packed", TORCH_BOX(&pointops::binding::ball_query_packed));                       \
  m.impl("furthest_point_sample_packed", TORCH_BOX(&pointops::binding::furthest_point_sample_packed)); \
  m.impl("grid_cluster", TORCH_BOX(&pointops::binding::grid_cluster));                                 \
  m.impl("gather_rows", TORCH_BOX(&pointops::binding::gather_rows));                                   \
  m.impl("gather_rows_backward_feat", TORCH_BOX(&pointops::binding::gather_rows_backward_feat));       \
  m.impl("gather_rows_backward_weight", TORCH_BOX(&pointops::binding::gather_rows_backward_weight))

STABLE_TORCH_LIBRARY_IMPL(pointops, CPU, m) { POINTOPS_REGISTER_KERNELS(m); }

#ifdef POINTOPS_WITH_CUDA
STABLE_TORCH_LIBRARY_IMPL(pointops, CUDA, m) { POINTOPS_REGISTER_KERNELS(m); }
#endif

STABLE_TORCH_LIBRARY_IMPL(pointops, CompositeExplicitAutograd, m) {
  m.impl("cuda_runtime_version", TORCH_BOX(&pointops::binding::cuda_runtime_version));
  m.impl("set_tuning", TORCH_BOX(&pointops::binding::set_tuning_knob));
  m.impl("set_value_checks", TORCH_BOX(&pointops::binding::set_value_checks));
  m.impl("check_errors", TORCH_BOX(&pointops::binding::check_errors));
}
