// Dense sums of the gather backward (CUDA), for dense rows of at most kDenseMaxTargets targets
// per cloud (three_interpolate in PointNet++'s feature propagation): two launches.
//
// Chunk rows: the sources are cut into chunks of p_chunk points. dense_chunk_rows_kernel, a
// block per cloud and chunk, groups the chunk's entries by target in shared memory (count,
// scan, fill, each row sorted) and writes them to the workspace once: per chunk the row bounds
// (N + 1, local to the chunk) and each entry's point (local) and weight, rows in ascending
// (p,t) order. Every chunk has a fixed slot, so the sums find it without a search.
//
// Sums: dense_sum_kernel, a block per cloud and CS of its channels, all of its targets (K per
// thread, their sums in registers). It walks the chunks in ascending order: while it sums one
// chunk, cp.async brings in the next one's rows and its CS grad_out rows. Ascending chunks and
// sorted rows keep every sum in ascending entry order: the same bits as the other sums and the
// CPU. The rows are built once per cloud, where the fused sums before built them in every
// block (H100, B8 C128 N4096 P16384 float32: 0.100 ms against 0.148).
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
constexpr int kDenseLoads = 4;               // idx loads a thread keeps in flight
// Entries of a chunk are numbered in 16 bits.
constexpr int64_t kDenseMaxChunkEntries = 0xffff;
// Targets per cloud up to which the narrow shape is the default (gather_backward_plan.cuh).
constexpr int64_t kDenseDefaultMaxTargets = 1024;

// Two launch shapes: narrow (two blocks per SM, 32 sums per thread, up to 104 KB of shared
// memory) and wide (one block per SM, 64 sums per thread, up to 200 KB), where the device lets
// a block have that much. On devices with less shared memory (99 KB on most consumer cards)
// the narrow shape takes less.
struct DenseShape {
  int k = 0;   // targets per thread (4 or 8)
  int cs = 0;  // channels per block
  bool wide = false;
  int64_t p_chunk = 0;  // points per chunk (a multiple of 64)
  bool valid() const { return p_chunk > 0; }
};

// Where a chunk's rows live, in the workspace and in each buffer of the sums' shared memory:
// the row bounds (N + 1 u16, padded to 16 bytes), the entries' points (u16) and weights
// (float), p_chunk * T slots each, then (shared memory only) CS grad_out rows of p_chunk.
struct DenseChunkLayout {
  int64_t bounds;   // u16 per chunk
  int64_t entries;  // slots per chunk
  __host__ __device__ DenseChunkLayout(int64_t N, int64_t T, int64_t p_chunk)
      : bounds((N + 1 + 7) / 8 * 8), entries(p_chunk * T) {}
  __host__ __device__ int64_t rows_bytes() const { return bounds * 2 + entries * (2 + 4); }
};

// The sums stage 16-bit grad_out rows transposed, [p_chunk][CS], so that an entry's CS values
// are one or two vector loads (H100, B8 C128 N4096 P16384 float16: 0.090 ms against 0.127 for
// CS loads of 2 bytes each). For float32 the rows stay as they are, [CS][p_chunk], and the
// chunk arrives by cp.async straight into place (0.100 ms against 0.117 transposed).
template <class T>
__host__ __device__ constexpr bool dense_transposed() {
  return sizeof(T) == 2;
}

// Shared memory of the sums. Untransposed: two buffers, each a chunk's rows and its CS grad_out
// rows (one being summed, the next arriving). Transposed: the rows of two chunks, the next
// chunk's grad_out rows as they arrive (each padded by 16 bytes, so that the transpose reads
// them without bank conflicts) and the chunk being summed, transposed.
__host__ __device__ inline int64_t dense_raw_row(int64_t p_chunk, size_t elem_bytes) {
  return p_chunk + 16 / static_cast<int64_t>(elem_bytes);
}
__host__ __device__ inline int64_t dense_sum_smem_bytes(int64_t N, int64_t T, int cs, size_t elem_bytes,
                                                        int64_t p_chunk) {
  const DenseChunkLayout layout(N, T, p_chunk);
  const int64_t elem = static_cast<int64_t>(elem_bytes);
  if (elem_bytes != 2) return 2 * (layout.rows_bytes() + cs * p_chunk * elem);
  return 2 * layout.rows_bytes() + cs * (dense_raw_row(p_chunk, elem_bytes) + p_chunk) * elem;
}

// Shared memory of the row building: the row starts (N + 1 u32), each entry's target and the
// rows' entry lists (u16 each).
__host__ __device__ inline int64_t dense_rows_smem_bytes(int64_t N, int64_t T, int64_t p_chunk) {
  return (N + 1 + 3) / 4 * 4 * 4 + p_chunk * T * 4;
}

// The workspace: every chunk's rows.
inline size_t dense_workspace_bytes(int64_t B, int64_t N, int64_t P, int64_t T, int64_t p_chunk) {
  const DenseChunkLayout layout(N, T, p_chunk);
  const int64_t chunks = B * ceil_div(P, p_chunk);
  WorkspaceCarver carve(nullptr);
  carve.take<uint16_t>(chunks * layout.bounds);
  carve.take<uint16_t>(chunks * layout.entries);
  carve.take<float>(chunks * layout.entries);
  return carve.used();
}

// The launch shape for these sizes on the current device (invalid where the path does not
// apply: accumulation not in float, more than kDenseMaxTargets targets, not even 64 points of
// chunk in the device's shared memory, or a grid out of range).
inline DenseShape dense_shape(bool float_acc, int64_t B, int64_t C, int64_t N, int64_t P, int64_t T,
                              size_t elem_bytes, bool wide) {
  DenseShape shape;
  if (!float_acc || N > kDenseMaxTargets || P <= 0 || T <= 0 || T > kDenseMaxChunkEntries / 64) return shape;
  if (dynamic_smem_limit() < 200 * 1024) wide = false;  // the narrow shape on smaller devices
  const int64_t budget = smem_budget(wide ? 200 * 1024 : 104 * 1024);
  shape.k = N <= int64_t{kDenseThreads} * 4 ? 4 : 8;
  shape.cs = (wide ? 64 : 32) / shape.k;
  shape.wide = wide;
  const int64_t fixed = dense_sum_smem_bytes(N, T, shape.cs, elem_bytes, 0);
  const int64_t per_point = dense_sum_smem_bytes(N, T, shape.cs, elem_bytes, 1) - fixed;
  int64_t points = (budget - fixed) / per_point / 64 * 64;
  const int64_t whole = ceil_div(P, 64) * 64;
  if (points > whole) points = whole;
  const int64_t numbered = kDenseMaxChunkEntries / T / 64 * 64;
  if (points > numbered) points = numbered;
  while (points >= 64 && dense_rows_smem_bytes(N, T, points) > dynamic_smem_limit()) points -= 64;
  if (points < 64 || B * ceil_div(C, shape.cs) > INT32_MAX || B * ceil_div(P, points) > INT32_MAX)
    return DenseShape{};
  shape.p_chunk = points;
  return shape;
}

// grid: B * chunks blocks, block g = b * chunks + q for chunk q of cloud b. Thread t owns
// targets t, t + kDenseThreads, ... for the row sorts and t * 8 .. t * 8 + 7 for the scan.
template <class T>
__global__ void __launch_bounds__(kDenseThreads)
    dense_chunk_rows_kernel(const int64_t* __restrict__ idx, const T* __restrict__ weight, int64_t N,
                            int64_t P, int64_t T_, int64_t p_chunk, int64_t chunks,
                            uint16_t* __restrict__ bounds_out, uint16_t* __restrict__ points_out,
                            float* __restrict__ weights_out, KernelChecks checks) {
  using BlockScan = cub::BlockScan<uint32_t, kDenseThreads>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int64_t b = blockIdx.x / chunks, q = blockIdx.x % chunks;
  const int64_t p0 = q * p_chunk;
  const int64_t pn = P - p0 < p_chunk ? P - p0 : p_chunk;
  const uint32_t en = static_cast<uint32_t>(pn * T_), targets = static_cast<uint32_t>(N);
  const DenseChunkLayout layout(N, T_, p_chunk);
  // Row n: s_list[s_pos[n] .. s_pos[n + 1]), local entry numbers.
  uint32_t* s_pos = reinterpret_cast<uint32_t*>(smem_raw);
  uint16_t* s_target = reinterpret_cast<uint16_t*>(s_pos + (N + 1 + 3) / 4 * 4);
  uint16_t* s_list = s_target + p_chunk * T_;
  const int t = threadIdx.x;
  const int64_t first = (b * P + p0) * T_;  // the chunk's first entry in idx / weight
  for (uint32_t i = t; i <= targets; i += kDenseThreads) s_pos[i] = 0;
  for (uint32_t base = t; base < en; base += kDenseThreads * kDenseLoads) {
    int64_t j[kDenseLoads];
#pragma unroll
    for (int u = 0; u < kDenseLoads; ++u) {
      const uint32_t e = base + u * kDenseThreads;
      j[u] = e < en ? idx[first + e] : -1;
    }
#pragma unroll
    for (int u = 0; u < kDenseLoads; ++u) {
      const uint32_t e = base + u * kDenseThreads;
      if (e < en) {
        if (j[u] < -1 || j[u] >= N) checks.report();
        s_target[e] = j[u] >= 0 && j[u] < N ? static_cast<uint16_t>(j[u]) : kDenseNoTarget;
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
    if (n != kDenseNoTarget) s_list[atomicAdd(&s_pos[n + 1], 1u)] = static_cast<uint16_t>(e);
  }
  __syncthreads();
  for (uint32_t n = t; n < targets; n += kDenseThreads) {
    const uint32_t lo = s_pos[n], hi = s_pos[n + 1];
    if (hi - lo > 1) sort_row(s_list + lo, static_cast<int64_t>(hi - lo));
  }
  __syncthreads();
  uint16_t* bounds = bounds_out + blockIdx.x * layout.bounds;
  for (uint32_t i = t; i <= targets; i += kDenseThreads) bounds[i] = static_cast<uint16_t>(s_pos[i]);
  const uint32_t filled = s_pos[targets];
  uint16_t* points = points_out + blockIdx.x * layout.entries;
  float* weights = weights_out + blockIdx.x * layout.entries;
  const uint32_t t_count = static_cast<uint32_t>(T_);
  for (uint32_t r = t; r < filled; r += kDenseThreads) {
    const uint32_t e = s_list[r];
    points[r] = static_cast<uint16_t>(e / t_count);
    if (weight != nullptr) weights[r] = to_acc(weight[first + e]);
  }
}

// Copies `bytes` (a multiple of 16) from global to shared memory without waiting (cp.async).
__device__ __forceinline__ void dense_copy_async(void* dst, const void* src, int64_t bytes) {
  uint4* d = static_cast<uint4*>(dst);
  const uint4* s = static_cast<const uint4*>(src);
  for (int64_t i = threadIdx.x; i < bytes / 16; i += kDenseThreads) copy16_async(d + i, s + i);
}

// One point's CS staged values, read as one or two vector loads.
template <class T, int CS>
struct alignas(CS * sizeof(T) < 16 ? CS * sizeof(T) : 16) DensePoint {
  T v[CS];
};

// grid: B * ceil(C / CS) blocks, channel groups of one cloud adjacent (they read the same rows
// from L2). Thread t owns targets t, t + kDenseThreads, ... (K of them). async_rows: grad_out
// rows start 16-byte aligned, so they are copied by cp.async too (else plainly, in line).
template <class T, int K, int CS, int MinBlocks>
__global__ void __launch_bounds__(kDenseThreads, MinBlocks)
    dense_sum_kernel(const T* __restrict__ grad_out, const uint16_t* __restrict__ bounds_in,
                     const uint16_t* __restrict__ points_in, const float* __restrict__ weights_in, int64_t C,
                     int64_t N, int64_t P, int64_t T_, int64_t p_chunk, int64_t chunks, bool weighted,
                     bool async_rows, T* __restrict__ grad_feat) {
  constexpr bool kTransposed = dense_transposed<T>();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int64_t groups = ceil_div(C, CS);
  const int64_t b = blockIdx.x / groups;
  const int64_t c0 = blockIdx.x % groups * CS;
  const int cn = static_cast<int>(C - c0 < CS ? C - c0 : CS);
  const DenseChunkLayout layout(N, T_, p_chunk);
  // Buffer i (chunk q in buffer q % 2): the rows, then (untransposed) the grad_out rows.
  const int64_t buffer_bytes = layout.rows_bytes() + (kTransposed ? 0 : CS * p_chunk * int64_t{sizeof(T)});
  const int64_t raw_row = kTransposed ? dense_raw_row(p_chunk, sizeof(T)) : p_chunk;
  T* raw = reinterpret_cast<T*>(smem_raw + 2 * buffer_bytes);  // transposed: [CS][raw_row]
  DensePoint<T, CS>* stage = reinterpret_cast<DensePoint<T, CS>*>(raw + CS * raw_row);  // [p_chunk]
  const T* g_b = grad_out + (b * C + c0) * P;
  const int t = threadIdx.x;
  auto points_of = [&](int64_t q) { return P - q * p_chunk < p_chunk ? P - q * p_chunk : p_chunk; };
  // Chunk q's rows into buffer q % 2 and its grad_out rows there too, or into `raw` (chunks
  // start at multiples of 64 points, so with async_rows every row piece is whole 16-byte units).
  auto load = [&](int64_t q) {
    unsigned char* rows = smem_raw + (q & 1) * buffer_bytes;
    const int64_t p0 = q * p_chunk, pn = points_of(q);
    const int64_t g = b * chunks + q, en16 = (pn * T_ + 7) / 8 * 8;  // u16 entries in 16-byte units
    dense_copy_async(rows, bounds_in + g * layout.bounds, layout.bounds * 2);
    unsigned char* points = rows + layout.bounds * 2;
    dense_copy_async(points, points_in + g * layout.entries, en16 * 2);
    if (weighted) dense_copy_async(points + layout.entries * 2, weights_in + g * layout.entries, en16 * 4);
    T* rows_to = kTransposed ? raw : reinterpret_cast<T*>(rows + layout.rows_bytes());
    for (int u = 0; u < cn; ++u) {
      if (async_rows)
        dense_copy_async(rows_to + u * raw_row, g_b + u * P + p0, pn * static_cast<int64_t>(sizeof(T)));
      else
        copy_in_flight<kDenseThreads, 4>(g_b + u * P + p0, pn, rows_to + u * raw_row);
    }
    async_copies_commit();
  };
  float acc[K][CS];
#pragma unroll
  for (int k = 0; k < K; ++k) {
#pragma unroll
    for (int u = 0; u < CS; ++u) acc[k][u] = 0.0f;
  }
  load(0);
  for (int64_t q = 0; q < chunks; ++q) {
    if constexpr (kTransposed) {
      async_copies_wait<0>();
      __syncthreads();  // chunk q has arrived; every thread is done with the previous stage
      const int64_t pn = points_of(q);
      T* flat = reinterpret_cast<T*>(stage);
      for (int64_t i = t; i < pn * CS; i += kDenseThreads) {  // channels fastest: no bank conflicts
        const int64_t u = i % CS, p = i / CS;
        flat[i] = u < cn ? raw[u * raw_row + p] : T(0.0f);
      }
      __syncthreads();  // `raw` is free: the next chunk arrives while this one is summed
      if (q + 1 < chunks) load(q + 1);
    } else {
      if (q + 1 < chunks) {
        load(q + 1);  // into the buffer that chunk q - 1 used: every thread is done with it
        async_copies_wait<1>();
      } else {
        async_copies_wait<0>();
      }
      __syncthreads();
    }
    const unsigned char* buffer = smem_raw + (q & 1) * buffer_bytes;
    const uint16_t* bounds = reinterpret_cast<const uint16_t*>(buffer);
    const uint16_t* points = bounds + layout.bounds;
    const float* weights = reinterpret_cast<const float*>(points + layout.entries);
    const T* rows = reinterpret_cast<const T*>(buffer + layout.rows_bytes());  // untransposed
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int64_t n = t + int64_t{k} * kDenseThreads;
      if (n >= N) continue;
      const uint32_t lo = bounds[n], hi = bounds[n + 1];
      for (uint32_t r = lo; r < hi; ++r) {
        const float w = weighted ? weights[r] : 1.0f;
        if constexpr (kTransposed) {
          const DensePoint<T, CS> column = stage[points[r]];
#pragma unroll
          for (int u = 0; u < CS; ++u) {
            const float v = to_acc(column.v[u]);
            acc[k][u] = add_rn(acc[k][u], weighted ? mul_rn(w, v) : v);
          }
        } else {
          const T* column = rows + points[r];
#pragma unroll
          for (int u = 0; u < CS; ++u) {
            if (u < cn) {
              const float v = to_acc(column[u * p_chunk]);
              acc[k][u] = add_rn(acc[k][u], weighted ? mul_rn(w, v) : v);
            }
          }
        }
      }
    }
    if constexpr (!kTransposed) __syncthreads();  // the next iteration loads chunk q + 2 here
  }
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t n = t + int64_t{k} * kDenseThreads;
    if (n < N) {
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
