// Gradient of the weighted gather w.r.t. its weights on CUDA: one thread per (b, p, t) sums
// grad_out[b, c, p] * feat[b, c, idx[b, p, t]] over c in ascending order (deterministic).
#include "common.cuh"

namespace pointops {
namespace {

using namespace cuda_detail;

constexpr int kThreads = 256;

template <class T>
__global__ void __launch_bounds__(kThreads)
    backward_weight_kernel(const T* __restrict__ grad_out, const T* __restrict__ feat,
                           const int64_t* __restrict__ idx, int64_t B, int64_t C, int64_t N, int64_t P,
                           int64_t T_, T* __restrict__ grad_w, KernelChecks checks) {
  using A = acc_t<T>;
  const int64_t total = B * P * T_;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t bp = e / T_;
    const int64_t b = bp / P, p = bp - b * P;
    const int64_t j = idx[e];
    A acc = A(0);
    if (j < -1 || j >= N) checks.report();
    if (j >= 0 && j < N) {
      const T* g = grad_out + b * C * P + p;
      const T* f = feat + b * C * N + j;
      for (int64_t c = 0; c < C; ++c) acc = add_rn(acc, mul_rn(to_acc(g[c * P]), to_acc(f[c * N])));
    }
    grad_w[e] = from_acc<T>(acc);
  }
}

}  // namespace

Status gather_backward_weight_cuda(Dtype dt, const void* grad_out, const void* feat, const int64_t* idx,
                                   int64_t B, int64_t C, int64_t N, int64_t P, int64_t T, void* grad_weight,
                                   const InKernelChecks* checks, void* stream) {
  if (B == 0 || P == 0 || T == 0) return nullptr;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  return dispatch_dtype(dt, [&](auto tag) -> Status {
    using E = decltype(tag);
    backward_weight_kernel<E><<<grid_for(B * P * T, kThreads), kThreads, 0, s>>>(
        static_cast<const E*>(grad_out), static_cast<const E*>(feat), idx, B, C, N, P, T,
        static_cast<E*>(grad_weight), KernelChecks::from(checks));
    return launch_status();
  });
}

}  // namespace pointops
