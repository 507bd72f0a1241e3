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

constexpr int kDenseThreads = 512;
constexpr int kDenseMaxTargetsPerThread = 8;
constexpr int64_t kDenseMaxTargets = int64_t{kDenseThreads} * kDenseMaxTargetsPerThread;  // < 2^16
constexpr uint16_t kDenseNoTarget = 0xffff;  // an entry of idx -1 (or out of range)
constexpr int kDenseLoads = 4;               // idx and weight loads a thread keeps in flight
// Targets per cloud up to which the narrow shape is the default (gather_backward_plan.cuh).
constexpr int64_t kDenseDefaultMaxTargets = 1024;

// Two launch shapes: narrow (two blocks per SM, 32 sums per thread, up to 104 KB of shared
// memory) and wide (one block per SM, 64 sums per thread, up to 200 KB: half the blocks, so
// half the rows built, and longer chunks), where the device lets a block have that much. On
// devices with less shared memory (99 KB on most consumer cards) the narrow shape takes less.
struct DenseShape {
  int k = 0;   // targets per thread (4 or 8)
  int cs = 0;  // channels per block
  bool wide = false;
  int64_t p_chunk = 0;  // points per chunk (a multiple of 64)
  int64_t smem = 0;     // dynamic shared memory per block
  bool valid() const { return p_chunk > 0; }
};

// Shared memory ahead of the staged values: the row bounds of N targets (N + 1, 16-byte padded).
__host__ __device__ inline size_t dense_bounds_bytes(int64_t N) {
  return static_cast<size_t>((N + 1 + 3) / 4 * 4) * sizeof(uint32_t);
}

// Dynamic shared memory of a block: the bounds, then per point of the chunk CS staged values
// and, for each of its T entries, a weight (float), a list slot (u32) and a target (u16).
__host__ __device__ inline int64_t dense_smem_bytes(int64_t N, int64_t T, int cs, size_t elem_bytes,
                                                    int64_t p_chunk) {
  return static_cast<int64_t>(dense_bounds_bytes(N)) +
         p_chunk * (cs * static_cast<int64_t>(elem_bytes) + T * (4 + 4 + 2));
}

// The launch shape for these sizes on the current device (invalid where the path does not
// apply: accumulation not in float, more than kDenseMaxTargets targets, not even 64 points of
// chunk in the device's shared memory, or a grid out of range).
inline DenseShape dense_shape(bool float_acc, int64_t B, int64_t C, int64_t N, int64_t P, int64_t T,
                              size_t elem_bytes, bool wide) {
  DenseShape shape;
  if (!float_acc || N > kDenseMaxTargets || P <= 0 || T <= 0) return shape;
  const int64_t optin = dynamic_smem_limit();
  if (optin < 200 * 1024) wide = false;  // the narrow shape on smaller devices
  const int64_t wanted = wide ? 200 * 1024 : 104 * 1024;
  const int64_t budget = optin < wanted ? optin : wanted;
  shape.k = N <= int64_t{kDenseThreads} * 4 ? 4 : 8;
  shape.cs = (wide ? 64 : 32) / shape.k;
  shape.wide = wide;
  int64_t points =
      (budget - dense_smem_bytes(N, T, shape.cs, elem_bytes, 0)) /
      (dense_smem_bytes(N, T, shape.cs, elem_bytes, 1) - dense_smem_bytes(N, T, shape.cs, elem_bytes, 0)) /
      64 * 64;
  const int64_t whole = ceil_div(P, 64) * 64;
  if (points > whole) points = whole;
  if (points < 64 || B * ceil_div(C, shape.cs) > INT32_MAX) return DenseShape{};
  shape.p_chunk = points;
  shape.smem = dense_smem_bytes(N, T, shape.cs, elem_bytes, points);
  return shape;
}

// grid: B * ceil(C / CS) blocks, channel groups of one cloud adjacent (they read the same
// indices from L2). Thread t owns targets t, t + kDenseThreads, ... (K of them) for the sums,
// and targets t * 8 .. t * 8 + 7 for the scan of the row sizes. TT: T when 3, else 0 (runtime).
template <class T, int K, int CS, int TT, int MinBlocks>
__global__ void __launch_bounds__(kDenseThreads, MinBlocks)
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
  // Sizes of a chunk and the targets fit 32 bits (shared memory, kDenseMaxTargets).
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
    for (uint32_t base = t; base < en; base += kDenseThreads * kDenseLoads) {
      int64_t j[kDenseLoads];
      T w[kDenseLoads];
#pragma unroll
      for (int u = 0; u < kDenseLoads; ++u) {
        const uint32_t e = base + u * kDenseThreads;
        j[u] = e < en ? idx_chunk[e] : -1;
        if (w_chunk != nullptr && e < en) w[u] = w_chunk[e];
      }
#pragma unroll
      for (int u = 0; u < kDenseLoads; ++u) {
        const uint32_t e = base + u * kDenseThreads;
        if (e < en) {
          if (j[u] < -1 || j[u] >= N) checks.report();
          s_target[e] = j[u] >= 0 && j[u] < N ? static_cast<uint16_t>(j[u]) : kDenseNoTarget;
          if (w_chunk != nullptr) s_weight[e] = to_acc(w[u]);
        }
      }
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
