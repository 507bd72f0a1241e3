// Farthest point sampling on CUDA.
//
// General path (any dtype, any N): one block per cloud; each step every thread updates the
// min-distance of its strided share of the points (kept in the workspace) and the block reduces
// (distance, index) pairs to the farthest point, lowest index on ties.
#include "common.cuh"

namespace pointops {
namespace {

using namespace cuda_detail;

constexpr int kGenericThreads = 512;

// (distance, index) with "farther, then lower index" as the order.
template <class A>
struct Candidate {
  A d;
  int64_t i;
};

template <class A>
__device__ __forceinline__ bool better(A d, int64_t i, A od, int64_t oi) {
  return d > od || (d == od && i < oi);
}

template <class A>
__device__ __forceinline__ Candidate<A> warp_best(Candidate<A> c) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const A od = __shfl_xor_sync(0xffffffffu, c.d, offset);
    const int64_t oi = __shfl_xor_sync(0xffffffffu, c.i, offset);
    if (better(od, oi, c.d, c.i)) {
      c.d = od;
      c.i = oi;
    }
  }
  return c;
}

template <class T>
__global__ void __launch_bounds__(kGenericThreads)
    fps_generic_kernel(const T* __restrict__ xyz, const int64_t* __restrict__ lengths, int64_t N,
                       int64_t K, int64_t start, int64_t* __restrict__ idx, acc_t<T>* min_d) {
  using A = acc_t<T>;
  __shared__ A warp_d[2][32];
  __shared__ int64_t warp_i[2][32];
  const int64_t b = blockIdx.x;
  const int64_t n = clamped_length(lengths, b, N);
  const T* pts = xyz + b * N * 3;
  A* md = min_d + b * N;
  int64_t* out = idx + b * K;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nwarps = blockDim.x >> 5;

  for (int64_t i = n + tid; i < K; i += blockDim.x) out[i] = -1;
  if (n == 0) return;
  for (int64_t i = tid; i < n; i += blockDim.x) md[i] = acc_inf<A>();

  int64_t cur = start < 0 ? 0 : (start > n - 1 ? n - 1 : start);
  const int64_t picks = K < n ? K : n;
  for (int64_t k = 0;; ++k) {
    if (tid == 0) out[k] = cur;
    if (k + 1 >= picks) break;
    const A cx = to_acc(pts[cur * 3]), cy = to_acc(pts[cur * 3 + 1]), cz = to_acc(pts[cur * 3 + 2]);
    Candidate<A> best{A(-1), INT64_MAX};
    for (int64_t i = tid; i < n; i += blockDim.x) {
      const A d = dist2(to_acc(pts[i * 3]), to_acc(pts[i * 3 + 1]), to_acc(pts[i * 3 + 2]), cx, cy, cz);
      A m = md[i];
      if (d < m) {
        m = d;
        md[i] = d;
      }
      if (m > best.d) {  // ascending i: strict ">" keeps the lowest index on ties
        best.d = m;
        best.i = i;
      }
    }
    best = warp_best(best);
    const int buf = static_cast<int>(k & 1);  // double buffer: one barrier per step
    if (lane == 0) {
      warp_d[buf][warp] = best.d;
      warp_i[buf][warp] = best.i;
    }
    __syncthreads();
    Candidate<A> c{A(-1), INT64_MAX};
    if (lane < nwarps) c = Candidate<A>{warp_d[buf][lane], warp_i[buf][lane]};
    c = warp_best(c);
    cur = c.i;
  }
}

}  // namespace

size_t furthest_point_sample_cuda_workspace_bytes(Dtype dt, int64_t B, int64_t N, int64_t K) {
  (void)K;
  return align_up(static_cast<size_t>(B) * static_cast<size_t>(N) * dtype_acc_bytes(dt));
}

Status furthest_point_sample_cuda(Dtype dt, const void* xyz, const int64_t* lengths, int64_t B,
                                  int64_t N, int64_t K, int64_t start, int64_t* idx,
                                  void* workspace, void* stream) {
  if (B == 0 || K == 0) return nullptr;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  return dispatch_dtype(dt, [&](auto tag) -> Status {
    using T = decltype(tag);
    fps_generic_kernel<T><<<static_cast<unsigned int>(B), kGenericThreads, 0, s>>>(
        static_cast<const T*>(xyz), lengths, N, K, start, idx, static_cast<acc_t<T>*>(workspace));
    return launch_status();
  });
}

}  // namespace pointops
