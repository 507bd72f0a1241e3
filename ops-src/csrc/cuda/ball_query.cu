// Ball query on CUDA: the first K points (ascending index) within the radius of each query.
//
// General path: one thread per query scans its cloud in index order and stops after K hits.
#include "common.cuh"

namespace pointops {
namespace {

using namespace cuda_detail;

constexpr int kThreads = 256;

template <class T>
__global__ void __launch_bounds__(kThreads)
    ball_query_scan_kernel(const T* __restrict__ xyz, const T* __restrict__ query,
                           const int64_t* __restrict__ lengths,
                           const int64_t* __restrict__ query_lengths, int64_t B, int64_t N,
                           int64_t M, acc_t<T> r2, bool inclusive, int64_t K,
                           int64_t* __restrict__ idx, int64_t* __restrict__ count,
                           T* __restrict__ dist2_out) {
  using A = acc_t<T>;
  const int64_t total = B * M;
  for (int64_t q = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; q < total;
       q += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = q / M, m = q - b * M;
    const int64_t n = clamped_length(lengths, b, N);
    const int64_t mq = clamped_length(query_lengths, b, M);
    int64_t* out_i = idx + q * K;
    T* out_d = dist2_out == nullptr ? nullptr : dist2_out + q * K;
    int64_t hits = 0;
    if (m < mq) {
      const A qx = to_acc(query[q * 3]), qy = to_acc(query[q * 3 + 1]), qz = to_acc(query[q * 3 + 2]);
      const T* pts = xyz + b * N * 3;
      for (int64_t j = 0; j < n && hits < K; ++j) {
        const A d = dist2(to_acc(pts[j * 3]), to_acc(pts[j * 3 + 1]), to_acc(pts[j * 3 + 2]), qx, qy, qz);
        if (inclusive ? d <= r2 : d < r2) {
          out_i[hits] = j;
          if (out_d) out_d[hits] = from_acc<T>(d);
          ++hits;
        }
      }
    }
    count[q] = hits;
    if (hits == 0) {
      for (int64_t k = 0; k < K; ++k) {
        out_i[k] = -1;
        if (out_d) out_d[k] = from_acc<T>(acc_inf<A>());
      }
    } else {
      const int64_t first = out_i[0];
      const T first_d = out_d ? out_d[0] : T();
      for (int64_t k = hits; k < K; ++k) {
        out_i[k] = first;
        if (out_d) out_d[k] = first_d;
      }
    }
  }
}

}  // namespace

size_t ball_query_cuda_workspace_bytes(Dtype dt, int64_t B, int64_t N, int64_t M, double radius,
                                       int64_t K) {
  (void)dt, (void)B, (void)N, (void)M, (void)radius, (void)K;
  return 0;
}

Status ball_query_cuda(Dtype dt, const void* xyz, const void* query, const int64_t* lengths,
                       const int64_t* query_lengths, int64_t B, int64_t N, int64_t M,
                       double radius, bool inclusive, int64_t K, int64_t* idx, int64_t* count,
                       void* dist2, void* workspace, void* stream) {
  (void)workspace;
  if (B == 0 || M == 0) return nullptr;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  return dispatch_dtype(dt, [&](auto tag) -> Status {
    using T = decltype(tag);
    using A = acc_t<T>;
    // radius*radius in double, rounded once to the accumulation type (the contract's rule).
    const A r2 = static_cast<A>(radius * radius);
    ball_query_scan_kernel<T><<<grid_for(B * M, kThreads), kThreads, 0, s>>>(
        static_cast<const T*>(xyz), static_cast<const T*>(query), lengths, query_lengths, B, N, M,
        r2, inclusive, K, idx, count, static_cast<T*>(dist2));
    return launch_status();
  });
}

}  // namespace pointops
