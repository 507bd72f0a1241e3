// Dense fused sums of the gather backward (CUDA), for dense rows of at most kDenseMaxTargets
// targets per cloud (three_interpolate in PointNet++'s feature propagation): one launch, no
// rows in global memory.
//
// A block takes one cloud, CS of its channels and all of its targets (K per thread, their sums
// in registers), and walks the sources in chunks of points, in ascending order. For each chunk
// it starts copying the chunk's CS grad_out rows into shared memory (cp.async), builds the
// chunk's rows in shared memory meanwhile (count, scan, fill), and then each thread sorts its
// targets' rows (only it reads them) and carries their sums on. Ascending chunks and sorted
// rows keep every sum in ascending entry order: the same bits as the other sums and the CPU.
// Every block of a cloud builds the same rows again; that is shared-memory work, where the
// global rows cost a radix sort, its key and row-start kernels and a memset per call.
#pragma once

#include <cub/block/block_scan.cuh>

#include "common.cuh"
#include "gather_backward_rows.cuh"

namespace pointops {
namespace cuda_detail {

constexpr int kDenseThreads = 512;  // two blocks per SM
constexpr int kDenseMaxTargetsPerThread = 8;
constexpr int64_t kDenseMaxTargets = int64_t{kDenseThreads} * kDenseMaxTargetsPerThread;  // < 2^16
constexpr int kDenseAccumulators = 32;           // K * CS sums per thread
constexpr int64_t kDenseSmemBytes = 104 * 1024;  // per block, two per SM
constexpr uint16_t kDenseNoTarget = 0xffff;      // an entry of idx -1 (or out of range)

// Targets per thread for N targets (4 or 8, the instantiated ones); 0 beyond kDenseMaxTargets.
inline int dense_targets_per_thread(int64_t N) {
  if (N <= int64_t{kDenseThreads} * 4) return 4;
  return N <= kDenseMaxTargets ? 8 : 0;
}

// Shared memory ahead of the staged values: the row bounds of N targets (N + 1, 16-byte padded).
__host__ __device__ inline size_t dense_bounds_bytes(int64_t N) {
  return static_cast<size_t>((N + 1 + 3) / 4 * 4) * sizeof(uint32_t);
}

// Grad_out points per chunk: as many as fit beside the bounds, a multiple of 64. Each point
// takes CS staged values and, for each of its T entries, a weight (float), a list slot (u32)
// and a target (u16). 0 when not even 64 fit.
inline int64_t dense_points_per_chunk(int64_t N, int64_t P, int64_t T, int cs, size_t elem_bytes) {
  const int64_t per_point = cs * static_cast<int64_t>(elem_bytes) + T * (4 + 4 + 2);
  const int64_t room = kDenseSmemBytes - static_cast<int64_t>(dense_bounds_bytes(N));
  const int64_t points = room / per_point / 64 * 64;
  const int64_t whole = ceil_div(P, 64) * 64;
  return points < whole ? points : whole;
}

inline size_t dense_smem_bytes(int64_t N, int64_t T, int cs, size_t elem_bytes, int64_t p_chunk) {
  return dense_bounds_bytes(N) +
         static_cast<size_t>(p_chunk * (cs * static_cast<int64_t>(elem_bytes) + T * (4 + 4 + 2)));
}

// Whether the dense fused sums apply: accumulation in float, few enough targets for the
// registers and the 16-bit targets, a chunk of at least 64 points, the grid in range.
inline bool dense_fused_applies(bool float_acc, int64_t B, int64_t C, int64_t N, int64_t P, int64_t T,
                                size_t elem_bytes) {
  const int k = dense_targets_per_thread(N);
  if (!float_acc || k == 0 || P <= 0 || T <= 0) return false;
  const int cs = kDenseAccumulators / k;
  return dense_points_per_chunk(N, P, T, cs, elem_bytes) > 0 && B * ceil_div(C, cs) <= INT32_MAX;
}

// grid: B * ceil(C / CS) blocks, channel groups of one cloud adjacent (they read the same
// indices from L2). Thread t owns targets t, t + kDenseThreads, ... (K of them) for the sums,
// and targets t * 8 .. t * 8 + 7 for the scan of the row sizes. TT: T when 3, else 0 (runtime).
template <class T, int K, int CS, int TT>
__global__ void __launch_bounds__(kDenseThreads, 2)
    dense_fused_sum_kernel(const T* __restrict__ grad_out, const int64_t* __restrict__ idx,
                           const T* __restrict__ weight, int64_t C, int64_t N, int64_t P, int64_t T_,
                           int64_t p_chunk, T* __restrict__ grad_feat, KernelChecks checks) {
  using BlockScan = cub::BlockScan<uint32_t, kDenseThreads>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int64_t groups = ceil_div(C, CS);
  const int64_t b = blockIdx.x / groups;
  const int64_t c0 = blockIdx.x % groups * CS;
  const int cn = static_cast<int>(C - c0 < CS ? C - c0 : CS);
  const int64_t E = P * T_;
  // Sizes of a chunk and the targets fit 32 bits (kDenseSmemBytes, kDenseMaxTargets).
  const uint32_t stride = static_cast<uint32_t>(p_chunk), targets = static_cast<uint32_t>(N);
  const uint32_t chunk_entries = static_cast<uint32_t>(p_chunk * T_);
  // Row n of the chunk: s_list[s_pos[n] .. s_pos[n + 1]), local entry numbers.
  uint32_t* s_pos = reinterpret_cast<uint32_t*>(smem_raw);
  T* stage = reinterpret_cast<T*>(smem_raw + dense_bounds_bytes(N));  // [CS][p_chunk]
  float* s_weight = reinterpret_cast<float*>(stage + CS * stride);
  uint32_t* s_list = reinterpret_cast<uint32_t*>(s_weight + chunk_entries);
  uint16_t* s_target = reinterpret_cast<uint16_t*>(s_list + chunk_entries);
  const int t = threadIdx.x;
  const int64_t* idx_b = idx + b * E;
  const T* w_b = weight == nullptr ? nullptr : weight + b * E;
  const T* g_b = grad_out + (b * C + c0) * P;
  // Chunks start at multiples of 64 points, so whole rows of 16-byte multiples stay aligned.
  const bool async_rows = P * sizeof(T) % 16 == 0 && reinterpret_cast<uintptr_t>(grad_out) % 16 == 0;
  const uint32_t t_count = static_cast<uint32_t>(T_);
  float acc[K][CS];
#pragma unroll
  for (int k = 0; k < K; ++k) {
#pragma unroll
    for (int u = 0; u < CS; ++u) acc[k][u] = 0.0f;
  }
  for (int64_t p0 = 0; p0 < P; p0 += p_chunk) {
    const int64_t pn = P - p0 < p_chunk ? P - p0 : p_chunk;
    const uint32_t en = static_cast<uint32_t>(pn * T_);
    __syncthreads();  // every thread is done with the previous chunk's rows and values
    if (async_rows) {
      const int64_t len = pn * static_cast<int64_t>(sizeof(T)) / 16;
      for (int u = 0; u < cn; ++u) {
        uint4* dst = reinterpret_cast<uint4*>(stage + u * stride);
        const uint4* src = reinterpret_cast<const uint4*>(g_b + u * P + p0);
        for (int64_t i = t; i < len; i += kDenseThreads) copy16_async(dst + i, src + i);
      }
      async_copies_commit();
    } else {
      for (int u = 0; u < cn; ++u) copy_in_flight<kDenseThreads, 4>(g_b + u * P + p0, pn, stage + u * stride);
    }
    for (uint32_t i = t; i <= targets; i += kDenseThreads) s_pos[i] = 0;
    const int64_t* idx_chunk = idx_b + p0 * T_;
    const T* w_chunk = w_b == nullptr ? nullptr : w_b + p0 * T_;
    for (uint32_t e = t; e < en; e += kDenseThreads) {
      const int64_t j = idx_chunk[e];
      if (j < -1 || j >= N) checks.report();
      s_target[e] = j >= 0 && j < N ? static_cast<uint16_t>(j) : kDenseNoTarget;
      if (w_chunk != nullptr) s_weight[e] = to_acc(w_chunk[e]);
    }
    __syncthreads();
    for (uint32_t e = t; e < en; e += kDenseThreads) {
      const uint16_t n = s_target[e];
      if (n != kDenseNoTarget) atomicAdd(&s_pos[n + 1], 1u);
    }
    __syncthreads();
    // Row starts: each thread reads and rewrites only its own 8 targets' counts.
    uint32_t total = 0;
#pragma unroll
    for (int i = 0; i < kDenseMaxTargetsPerThread; ++i) {
      const uint32_t n = t * kDenseMaxTargetsPerThread + i;
      if (n < targets) total += s_pos[n + 1];
    }
    uint32_t start;
    BlockScan(scan_storage).ExclusiveSum(total, start);
#pragma unroll
    for (int i = 0; i < kDenseMaxTargetsPerThread; ++i) {
      const uint32_t n = t * kDenseMaxTargetsPerThread + i;
      if (n < targets) {
        const uint32_t count = s_pos[n + 1];
        s_pos[n + 1] = start;
        start += count;
      }
    }
    __syncthreads();
    // Each claim moves s_pos[n + 1] on, to the next row's start once the row is full.
    for (uint32_t e = t; e < en; e += kDenseThreads) {
      const uint16_t n = s_target[e];
      if (n != kDenseNoTarget) s_list[atomicAdd(&s_pos[n + 1], 1u)] = e;
    }
    if (async_rows) async_copies_wait<0>();
    __syncthreads();
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const uint32_t n = t + k * kDenseThreads;
      if (n >= targets) continue;
      const uint32_t lo = s_pos[n], hi = s_pos[n + 1];
      if (hi - lo > 1) sort_row(s_list + lo, static_cast<int64_t>(hi - lo));
      for (uint32_t r = lo; r < hi; ++r) {
        const uint32_t e = s_list[r];
        const uint32_t col = TT > 0 ? e / static_cast<uint32_t>(TT) : e / t_count;
        const T* column = stage + col;
        const float w = w_b == nullptr ? 1.0f : s_weight[e];
#pragma unroll
        for (int u = 0; u < CS; ++u) {
          if (u < cn) {
            const float v = to_acc(column[u * stride]);
            acc[k][u] = add_rn(acc[k][u], w_b == nullptr ? v : mul_rn(w, v));
          }
        }
      }
    }
  }
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const uint32_t n = t + k * kDenseThreads;
    if (n < targets) {
      T* out = grad_feat + (b * C + c0) * N + n;
#pragma unroll
      for (int u = 0; u < CS; ++u) {
        if (u < cn) out[u * N] = from_acc<T>(acc[k][u]);
      }
    }
  }
}

}  // namespace cuda_detail
}  // namespace pointops
