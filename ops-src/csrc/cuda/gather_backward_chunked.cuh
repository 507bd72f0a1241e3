// Chunked sums of the gather backward (CUDA), for dense rows of few targets (three_interpolate):
// grad_out is read once, in its own [B, C, P] layout, with no transposed copy.
//
// Rows: the radix rows of gather_backward_rows.cuh. One kernel then finds each row's start and
// packs the sorted entries as (p, weight) pairs, each row followed by a sentinel p = UINT32_MAX,
// so that a row's walk needs no end position.
//
// Sums: a block takes one cloud, CS of its channels and every one of its targets (K per thread,
// their sums in registers). It walks the sources in chunks of p_chunk
// points: it stages the chunk's CS grad_out rows in shared memory (coalesced loads), and each
// thread carries each of its targets' sums on through the row's entries that fall in the chunk.
// Chunks go in ascending p, so every sum still runs in ascending entry order: the same bits as
// the other sums and the CPU.
#pragma once

#include "common.cuh"
#include "gather_backward_rows.cuh"

namespace pointops {
namespace cuda_detail {

constexpr int kChunkedThreads = 512;  // two blocks per SM
// K * CS sums per thread. On the H200, 16 beat 24 and 32 (which spills at K = 8) wherever the
// chunked sums beat the transposed ones (kernel oracle `gathers`, three_interpolate backward
// B16 C256 N256 P1024 f32: 0.073 / 0.080 / 0.098 ms).
constexpr int kChunkedAccumulators = 16;
// The planner's limit: with more targets per block every block rereads more rows, and the
// transposed sums were faster (B8 C128 N4096 P16384: 0.18 against 0.23-0.30 ms).
constexpr int64_t kChunkedDefaultMaxTargets = 1024;
constexpr int64_t kChunkedStageBytes = 96 * 1024;  // grad_out chunk per block (two per SM)
constexpr uint32_t kChunkedSentinel = UINT32_MAX;

template <class A>
struct ChunkEntry {
  uint32_t p;  // source point of the entry (its grad_out column); kChunkedSentinel ends a row
  A w;         // its weight in the accumulation type (1 when unweighted)
};

// Targets per thread for N targets (1, 2, 4 or 8); 0 when N is too large for the path (more
// targets per thread spill their sums out of the registers).
inline int chunked_targets_per_thread(int64_t N) {
  for (int k = 1; k <= 8; k *= 2) {
    if (N <= int64_t{kChunkedThreads} * k) return k;
  }
  return 0;
}

// Grad_out points staged per chunk: as many as fit (in the device's shared memory too), a
// multiple of 64 (16-byte rows).
inline int64_t chunked_points_per_chunk(int64_t P, int cs, size_t elem_bytes) {
  int64_t points = smem_budget(kChunkedStageBytes) / (cs * static_cast<int64_t>(elem_bytes)) / 64 * 64;
  const int64_t whole = ceil_div(P, 64) * 64;
  return points < whole ? points : whole;
}

// The chunked sums' rows: radix rows (gather_backward_rows.cuh) whose `extra` holds the packed
// rows: E entries, B*N sentinels and a final sentinel where threads without a target start.
inline size_t chunked_packed_bytes(int64_t B, int64_t N, int64_t P, int64_t T) {
  return static_cast<size_t>(B * P * T + B * N + 1) * sizeof(ChunkEntry<float>);
}

// Whether the chunked sums apply: accumulation in float, row positions in 32 bits, few enough
// targets for the registers. (Whether they fill the GPU is the planner's question.)
inline bool chunked_applies(bool float_acc, int64_t B, int64_t C, int64_t N, int64_t P, int64_t T) {
  const int k = chunked_targets_per_thread(N);
  if (!float_acc || k == 0 || P <= 0 || T <= 0) return false;
  const int64_t entries = B * P * T;
  return entries + B * N + 1 <= static_cast<int64_t>(INT32_MAX) &&
         ceil_div(C, kChunkedAccumulators / k) * B <= INT32_MAX;
}

// Thread i: for i <= rows, row i's start (a binary search) and the sentinel that ends row i - 1;
// for i < entries, sorted entry i into its row. Row q's entries sit at row_start[q] + q onward.
template <class T, class A>
__global__ void chunked_pack_kernel(const uint32_t* __restrict__ sorted_keys,
                                    const uint32_t* __restrict__ sorted_vals, const T* __restrict__ weight,
                                    uint32_t rows, uint32_t entries, uint32_t entries_per_batch, uint32_t T_,
                                    uint32_t* __restrict__ row_start, ChunkEntry<A>* __restrict__ packed) {
  const uint32_t total = (rows + 1 > entries ? rows + 1 : entries);
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    if (i <= rows) {
      const uint32_t lo = sorted_row_start(sorted_keys, entries, i);
      row_start[i] = lo;
      if (i > 0) packed[lo + i - 1] = ChunkEntry<A>{kChunkedSentinel, A(0)};
      if (i == rows) packed[entries + rows] = ChunkEntry<A>{kChunkedSentinel, A(0)};  // no target
    }
    if (i < entries) {
      const uint32_t key = sorted_keys[i];
      if (key < rows) {
        const uint32_t e = sorted_vals[i];
        const uint32_t p = e % entries_per_batch / T_;
        packed[i + key] = ChunkEntry<A>{p, weight == nullptr ? A(1) : to_acc(weight[e])};
      }
    }
  }
}

// grid: B * ceil(C / CS) blocks, channel groups of one cloud adjacent (they share its rows in
// L2). Thread t owns targets t, t + kChunkedThreads, ... (K of them).
template <class T, int K, int CS>
__global__ void __launch_bounds__(kChunkedThreads, 2)
    chunked_sum_kernel(const T* __restrict__ grad_out, const uint32_t* __restrict__ row_start,
                       const ChunkEntry<float>* __restrict__ packed, int64_t C, int64_t N, int64_t P,
                       int64_t p_chunk, uint32_t no_target, T* __restrict__ grad_feat) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* stage = reinterpret_cast<T*>(smem_raw);  // [CS][p_chunk]
  const int64_t groups = ceil_div(C, CS);
  const int64_t b = blockIdx.x / groups;
  const int64_t c0 = blockIdx.x % groups * CS;
  const int cn = static_cast<int>(C - c0 < CS ? C - c0 : CS);
  const int t = threadIdx.x;
  uint32_t cursor[K];
  float acc[K][CS];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t n = t + int64_t{k} * kChunkedThreads;
    const int64_t row = b * N + n;
    cursor[k] = n < N ? row_start[row] + static_cast<uint32_t>(row) : no_target;
#pragma unroll
    for (int u = 0; u < CS; ++u) acc[k][u] = 0.0f;
  }
  for (int64_t p0 = 0; p0 < P; p0 += p_chunk) {
    const int64_t pn = P - p0 < p_chunk ? P - p0 : p_chunk;
    __syncthreads();  // every thread is done with the previous chunk
    for (int u = 0; u < cn; ++u) {
      stage_to_shared<kChunkedThreads, 4>(grad_out + ((b * C + c0 + u) * P + p0), pn, stage + u * p_chunk);
    }
    __syncthreads();
    const uint32_t first = static_cast<uint32_t>(p0), past = static_cast<uint32_t>(p0 + pn);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      uint32_t r = cursor[k];
      for (;;) {
        const ChunkEntry<float> entry = packed[r];
        if (entry.p >= past) break;  // the next chunk's entry, or the row's sentinel
        const T* column = stage + (entry.p - first);
#pragma unroll
        for (int u = 0; u < CS; ++u) {
          if (u < cn) acc[k][u] = add_rn(acc[k][u], mul_rn(entry.w, to_acc(column[u * p_chunk])));
        }
        ++r;
      }
      cursor[k] = r;
    }
  }
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t n = t + int64_t{k} * kChunkedThreads;
    if (n < N) {
#pragma unroll
      for (int u = 0; u < CS; ++u) {
        if (u < cn) grad_feat[(b * C + c0 + u) * N + n] = from_acc<T>(acc[k][u]);
      }
    }
  }
}

}  // namespace cuda_detail
}  // namespace pointops
