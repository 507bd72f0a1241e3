// Weighted gather on CUDA (gather_points, group_points, three_interpolate forward):
//   out[b,c,p] = sum_t w[b,p,t] * feat[b,c,idx[b,p,t]]   (sum in ascending t, idx -1 adds 0)
#include "common.cuh"

namespace pointops {
namespace {

using namespace cuda_detail;

constexpr int kThreads = 256;

// One thread per output element, p fastest so that idx/weight/out accesses are coalesced.
template <class T>
__global__ void __launch_bounds__(kThreads)
    gather_forward_kernel(const T* __restrict__ feat, const int64_t* __restrict__ idx,
                          const T* __restrict__ weight, int64_t B, int64_t C, int64_t N,
                          int64_t P, int64_t T_, T* __restrict__ out) {
  using A = acc_t<T>;
  const int64_t total = B * C * P;
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < total;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t p = o % P;
    const int64_t bc = o / P;
    const int64_t b = bc / C;
    const T* f = feat + bc * N;
    const int64_t* ix = idx + (b * P + p) * T_;
    if (weight == nullptr && T_ == 1) {  // plain gather: copy the value itself
      const int64_t j = ix[0];
      out[o] = (j >= 0 && j < N) ? f[j] : from_acc<T>(A(0));
      continue;
    }
    const T* w = weight == nullptr ? nullptr : weight + (b * P + p) * T_;
    A acc = A(0);
    for (int64_t t = 0; t < T_; ++t) {
      const int64_t j = ix[t];
      if (j < 0 || j >= N) continue;
      const A v = to_acc(f[j]);
      acc = add_rn(acc, w == nullptr ? v : mul_rn(to_acc(w[t]), v));
    }
    out[o] = from_acc<T>(acc);
  }
}

}  // namespace

Status gather_forward_cuda(Dtype dt, const void* feat, const int64_t* idx, const void* weight,
                           int64_t B, int64_t C, int64_t N, int64_t P, int64_t T, void* out,
                           void* stream) {
  if (B == 0 || C == 0 || P == 0) return nullptr;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  return dispatch_dtype(dt, [&](auto tag) -> Status {
    using E = decltype(tag);
    gather_forward_kernel<E><<<grid_for(B * C * P, kThreads), kThreads, 0, s>>>(
        static_cast<const E*>(feat), idx, static_cast<const E*>(weight), B, C, N, P, T,
        static_cast<E*>(out));
    return launch_status();
  });
}

}  // namespace pointops
