// k nearest neighbours on CUDA, sorted by (squared distance, index).
//
// General path (any K): one thread per query scans its cloud in index order and keeps a sorted
// list of the K best in the workspace (distances in the accumulation type) and in idx.
#include "common.cuh"

namespace pointops {
namespace {

using namespace cuda_detail;

constexpr int kThreads = 256;

template <class T>
__global__ void __launch_bounds__(kThreads)
    knn_scan_kernel(const T* __restrict__ xyz, const T* __restrict__ query,
                    const int64_t* __restrict__ lengths, const int64_t* __restrict__ query_lengths,
                    int64_t B, int64_t N, int64_t M, int64_t K, T* __restrict__ dist2_out,
                    int64_t* __restrict__ idx, acc_t<T>* __restrict__ work_d) {
  using A = acc_t<T>;
  const int64_t total = B * M;
  for (int64_t q = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; q < total;
       q += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = q / M, m = q - b * M;
    const int64_t n = clamped_length(lengths, b, N);
    const int64_t mq = clamped_length(query_lengths, b, M);
    int64_t* out_i = idx + q * K;
    A* wd = work_d + q * K;
    int64_t filled = 0;
    if (m < mq) {
      const A qx = to_acc(query[q * 3]), qy = to_acc(query[q * 3 + 1]), qz = to_acc(query[q * 3 + 2]);
      const T* pts = xyz + b * N * 3;
      for (int64_t j = 0; j < n; ++j) {
        const A d = dist2(to_acc(pts[j * 3]), to_acc(pts[j * 3 + 1]), to_acc(pts[j * 3 + 2]), qx, qy, qz);
        if (filled == K && !(d < wd[K - 1])) continue;  // equal distance: the older, lower index wins
        int64_t pos = filled < K ? filled : K - 1;
        while (pos > 0 && wd[pos - 1] > d) {
          wd[pos] = wd[pos - 1];
          out_i[pos] = out_i[pos - 1];
          --pos;
        }
        wd[pos] = d;
        out_i[pos] = j;
        if (filled < K) ++filled;
      }
    }
    T* out_d = dist2_out + q * K;
    for (int64_t k = 0; k < K; ++k) {
      if (k < filled) {
        out_d[k] = from_acc<T>(wd[k]);
      } else {
        out_d[k] = from_acc<T>(acc_inf<A>());
        out_i[k] = -1;
      }
    }
  }
}

}  // namespace

size_t knn_cuda_workspace_bytes(Dtype dt, int64_t B, int64_t N, int64_t M, int64_t K) {
  (void)N;
  return align_up(static_cast<size_t>(B) * static_cast<size_t>(M) * static_cast<size_t>(K) *
                  dtype_acc_bytes(dt));
}

Status knn_cuda(Dtype dt, const void* xyz, const void* query, const int64_t* lengths,
                const int64_t* query_lengths, int64_t B, int64_t N, int64_t M, int64_t K,
                void* dist2, int64_t* idx, void* workspace, void* stream) {
  if (B == 0 || M == 0 || K == 0) return nullptr;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  return dispatch_dtype(dt, [&](auto tag) -> Status {
    using T = decltype(tag);
    knn_scan_kernel<T><<<grid_for(B * M, kThreads), kThreads, 0, s>>>(
        static_cast<const T*>(xyz), static_cast<const T*>(query), lengths, query_lengths, B, N, M,
        K, static_cast<T*>(dist2), idx, static_cast<acc_t<T>*>(workspace));
    return launch_status();
  });
}

}  // namespace pointops
