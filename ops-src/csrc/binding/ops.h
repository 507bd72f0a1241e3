// The operators the binding layer registers (registration.cpp), one file per family:
// sampling.cpp, neighbours.cpp, gather.cpp. Each checks its inputs, allocates its outputs and
// calls the kernels of kernels.h on the inputs' device and current stream.
#pragma once

#include <optional>
#include <tuple>

#include "tensors.h"

#ifdef POINTOPS_WITH_CUDA
#include <torch/csrc/stable/accelerator.h>

#include "cuda_stream.h"
#endif

namespace pointops {
namespace binding {

Tensor furthest_point_sample(Tensor xyz, int64_t k, std::optional<Tensor> lengths, int64_t start);

std::tuple<Tensor, Tensor, Tensor> ball_query(Tensor xyz, Tensor query, double radius, int64_t k,
                                              std::optional<Tensor> lengths,
                                              std::optional<Tensor> query_lengths, bool inclusive,
                                              bool return_dist2);
std::tuple<Tensor, Tensor> knn(Tensor xyz, Tensor query, int64_t k, std::optional<Tensor> lengths,
                               std::optional<Tensor> query_lengths);

Tensor gather(Tensor feat, Tensor idx, std::optional<Tensor> weight);

std::tuple<Tensor, Tensor> knn_packed(Tensor xyz, Tensor ptr, Tensor query, Tensor query_ptr, int64_t k);
std::tuple<Tensor, Tensor, Tensor> ball_query_packed(Tensor xyz, Tensor ptr, Tensor query, Tensor query_ptr,
                                                     double radius, int64_t k, bool inclusive,
                                                     bool return_dist2);
Tensor furthest_point_sample_packed(Tensor xyz, Tensor ptr, Tensor sample_ptr, int64_t samples,
                                    int64_t max_points);
Tensor gather_rows(Tensor feat, Tensor idx, std::optional<Tensor> weight);
Tensor gather_rows_backward_feat(Tensor grad_out, Tensor idx, std::optional<Tensor> weight, int64_t rows);
Tensor gather_rows_backward_weight(Tensor grad_out, Tensor feat, Tensor idx);
Tensor gather_backward_feat(Tensor grad_out, Tensor idx, std::optional<Tensor> weight, int64_t n);
Tensor gather_backward_weight(Tensor grad_out, Tensor feat, Tensor idx);

// grid.cpp: torch_cluster's voxel grid ids.
Tensor grid_cluster(Tensor pos, Tensor size, std::optional<Tensor> start, std::optional<Tensor> end);

#ifdef POINTOPS_WITH_CUDA
// A CUDA call's context: the tensor's device made current, and that device's current stream.
struct CudaContext {
  explicit CudaContext(const Tensor& t)
      : guard(t.get_device_index()), stream(current_cuda_stream(t.get_device_index())) {}
  torch::stable::accelerator::DeviceGuard guard;
  void* stream;
};
#endif

}  // namespace binding
}  // namespace pointops
