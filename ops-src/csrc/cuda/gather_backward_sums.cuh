// The sum strategies of the gather backward (CUDA): each writes grad_feat[b, c, n] as the sum
// of w * grad_out over target n's entries, in ascending entry order (deterministic, no float
// atomics). gather_backward_plan.cuh chooses among them; gather_backward.cu launches them.
//   - row_sum_kernel: straight from grad_out, a thread per (channel chunk, b, n);
//   - transposed (dense rows): grad_out transposed one 64-channel slab at a time;
//   - sparse: a lane per target, from grad_out or from grad_out rows staged in shared memory;
//   - fused sparse: rows built and summed in shared memory by one kernel (no workspace).
#pragma once

#include <cub/block/block_scan.cuh>

#include "common.cuh"
#include "gather_backward_rows.cuh"

namespace pointops {
namespace cuda_detail {

constexpr int kGatherBackwardThreads = 256;

// One thread per (channel chunk, b, n), n fastest so that grad_feat writes are coalesced;
// kUnroll channels share each pass over the row's entries.
constexpr int kUnroll = 4;

template <class T, class I>
__global__ void __launch_bounds__(kGatherBackwardThreads)
    row_sum_kernel(const T* __restrict__ grad_out, const T* __restrict__ weight,
                   const I* __restrict__ row_start, const I* __restrict__ entries, int64_t B, int64_t C,
                   int64_t N, int64_t P, int64_t T_, int64_t c_chunk, T* __restrict__ grad_feat) {
  using A = acc_t<T>;
  const int64_t chunks = ceil_div(C, c_chunk);
  const int64_t total = chunks * B * N;
  const int64_t per_batch = P * T_;
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < total;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = o % (B * N);
    const int64_t chunk = o / (B * N);
    const int64_t b = row / N, n = row - b * N;
    const int64_t begin = static_cast<int64_t>(row_start[row]);
    const int64_t end = static_cast<int64_t>(row_start[row + 1]);
    const int64_t c_begin = chunk * c_chunk;
    const int64_t c_end = c_begin + c_chunk < C ? c_begin + c_chunk : C;
    const T* g = grad_out + b * C * P;
    T* out = grad_feat + b * C * N + n;
    for (int64_t c = c_begin; c < c_end; c += kUnroll) {
      A acc[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) acc[u] = A(0);
      for (int64_t r = begin; r < end; ++r) {
        const int64_t e = static_cast<int64_t>(entries[r]) - b * per_batch;
        const int64_t p = T_ == 1 ? e : e / T_;
        const A w = weight == nullptr ? A(1) : to_acc(weight[b * per_batch + e]);
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          if (c + u < c_end) {
            const A v = to_acc(g[(c + u) * P + p]);
            acc[u] = add_rn(acc[u], weight == nullptr ? v : mul_rn(w, v));
          }
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (c + u < c_end) out[(c + u) * N] = from_acc<T>(acc[u]);
      }
    }
  }
}

// Transposed path (the default): a slab of kChannelTile channels of
// grad_out [B, C, P] is transposed into the workspace as [B, P, min(C, kChannelTile)], so that the
// channel values of one entry are one contiguous (coalesced) read instead of one scattered
// 4-byte read per channel. A block then sums 32 rows for the slab, lanes over channels, each
// row in ascending entry order, and writes through a shared-memory tile so that the
// grad_feat stores (n fastest) stay coalesced.
constexpr int kChannelTile = 64;
constexpr int64_t kOverlapMinEntries = int64_t{1} << 16;  // rows built beside the transpose from here
constexpr int kTransposeRows = 8;  // threadIdx.y extent of the transpose blocks (32 x 8)
// Two slabs in the workspace where there are several and they are small enough: the second is
// then transposed beside the row building too.
constexpr int64_t kTwoSlabsMaxBytes = int64_t{128} << 20;

// Slabs the workspace holds (1 or 2).
inline int64_t slab_buffers(int64_t B, int64_t C, int64_t P, size_t elem_bytes) {
  const int64_t one = B * P * (C < kChannelTile ? C : kChannelTile) * static_cast<int64_t>(elem_bytes);
  return C > kChannelTile && 2 * one <= kTwoSlabsMaxBytes ? 2 : 1;
}

// A block moves 64 channels x kTransposeSpan points: whole slab rows of stride <= 64 channels
// are written by one block, and each block has enough work to amortize its start.
constexpr int kTransposeSpan = 128;

template <class T>
__global__ void __launch_bounds__(32 * kTransposeRows)
    transpose_slab_kernel(const T* __restrict__ src, int64_t B, int64_t C, int64_t P, int64_t c0, int cn,
                          int stride, T* __restrict__ dst) {
  __shared__ T tile[kChannelTile][33];
  for (int64_t b = blockIdx.z; b < B; b += gridDim.z) {
    for (int64_t p_base = static_cast<int64_t>(blockIdx.x) * kTransposeSpan;
         p_base < P && p_base < (static_cast<int64_t>(blockIdx.x) + 1) * kTransposeSpan; p_base += 32) {
      const int64_t p_load = p_base + threadIdx.x;
      for (int cc = threadIdx.y; cc < cn; cc += kTransposeRows) {
        if (p_load < P) tile[cc][threadIdx.x] = src[(b * C + c0 + cc) * P + p_load];
      }
      __syncthreads();
      for (int i = threadIdx.y; i < 32; i += kTransposeRows) {
        const int64_t p = p_base + i;
        if (p >= P) break;
        for (int cc = threadIdx.x; cc < cn; cc += 32) dst[(b * P + p) * stride + cc] = tile[cc][i];
      }
      __syncthreads();
    }
  }
}

template <class T, class I, int TT>
__global__ void __launch_bounds__(256)
    row_sum_transposed_kernel(const T* __restrict__ slab, const T* __restrict__ weight,
                              const I* __restrict__ row_start, const I* __restrict__ entries, int64_t B,
                              int64_t C, int64_t N, int64_t P, int64_t T_, int64_t c0, int cn, int stride,
                              T* __restrict__ grad_feat) {
  using A = acc_t<T>;
  __shared__ A tile[kChannelTile][33];  // [channel][row of the block]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * 32;
  const I t_count = static_cast<I>(T_);
  for (int64_t b = blockIdx.y; b < B; b += gridDim.y) {
    const I batch_first = static_cast<I>(b * P * T_);
    const T* w_batch = weight == nullptr ? nullptr : weight + b * P * T_;
    for (int j = warp; j < 32; j += 8) {
      const int64_t n = n0 + j;
      A acc0 = A(0), acc1 = A(0);
      if (n < N) {
        const I end = row_start[b * N + n + 1];
        I r = row_start[b * N + n];
        for (; r < end; ++r) {
          const I e = entries[r] - batch_first;
          const I p = TT == 1 ? e : (TT > 0 ? e / static_cast<I>(TT) : e / t_count);
          const A w = w_batch == nullptr ? A(1) : to_acc(w_batch[e]);
          const T* values = slab + (b * P + static_cast<int64_t>(p)) * stride;
          if (lane < cn) {
            const A v = to_acc(values[lane]);
            acc0 = add_rn(acc0, w_batch == nullptr ? v : mul_rn(w, v));
          }
          if (lane + 32 < cn) {
            const A v = to_acc(values[lane + 32]);
            acc1 = add_rn(acc1, w_batch == nullptr ? v : mul_rn(w, v));
          }
        }
      }
      tile[lane][j] = acc0;
      tile[lane + 32][j] = acc1;
    }
    __syncthreads();
    const int64_t n = n0 + lane;
    for (int cc = warp; cc < cn; cc += 8) {
      if (n < N) grad_feat[(b * C + c0 + cc) * N + n] = from_acc<T>(tile[cc][lane]);
    }
    __syncthreads();
  }
}

// Sparse rows (at most one entry per target on average: gather_points of M < N points, where
// most rows are empty and writing grad_feat is the bound). One warp covers 32 rows, a lane
// each, for kSparseChannels channels: the row bounds are one coalesced load, a lane adds its
// row's entries with the loads of all its channels in flight at once, and the 32 sums of a
// channel are one coalesced store. No shared memory or barriers. (A warp walking all channels
// of its rows, paying the row loads once, measured slower on the H200: 66 vs 54 µs.) Values
// are read from grad_out itself, which stays in L2 (one scattered read per entry and channel);
// reading a transposed copy instead measured slower (the transpose costs more than it saves).
constexpr int kSparseChannels = 16;

template <class I>
__device__ __forceinline__ I warp_max(I v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const I other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = other > v ? other : v;
  }
  return v;
}

// Sums a lane's target (entries list[begin..end), ascending) for `count` <= U channels:
// acc[u] = sum of w * value(p, u). The warp steps through `longest` entries together.
template <int U, int TT, class T, class I, class A, class Value>
__device__ __forceinline__ void sum_target(const I* list, I begin, I end, I longest, I batch_first, I t_count,
                                           const T* __restrict__ weight, int count, Value value,
                                           A (&acc)[U]) {
#pragma unroll
  for (int u = 0; u < U; ++u) acc[u] = A(0);
  for (I k = 0; k < longest; ++k) {
    if (begin + k < end) {
      const I e = list[begin + k] - batch_first;
      const I p = TT == 1 ? e : (TT > 0 ? e / static_cast<I>(TT) : e / t_count);
      const A w = weight == nullptr ? A(1) : to_acc(weight[static_cast<int64_t>(batch_first) + e]);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (u < count) {
          const A v = to_acc(value(p, u));
          acc[u] = add_rn(acc[u], weight == nullptr ? v : mul_rn(w, v));
        }
      }
    }
  }
}

template <class T, class I, int TT>
__global__ void __launch_bounds__(kGatherBackwardThreads)
    row_sum_sparse_kernel(const T* __restrict__ grad_out, const T* __restrict__ weight,
                          const I* __restrict__ row_start, const I* __restrict__ entries, int64_t B,
                          int64_t C, int64_t N, int64_t P, int64_t T_, T* __restrict__ grad_feat) {
  using A = acc_t<T>;
  const int lane = threadIdx.x & 31;
  const int64_t row_groups = ceil_div(N, 32);
  const int64_t chunks = ceil_div(C, kSparseChannels);
  const int64_t warps = B * chunks * row_groups;
  const int64_t warp_stride = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  const I t_count = static_cast<I>(T_);
  for (int64_t wi = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32; wi < warps;
       wi += warp_stride) {
    // Row groups fastest: neighbouring warps store neighbouring pieces of the same channel rows.
    const int64_t group = wi % row_groups;
    const int64_t chunk = (wi / row_groups) % chunks;
    const int64_t b = wi / row_groups / chunks;
    const int64_t n = group * 32 + lane;
    const bool valid = n < N;
    const I begin = valid ? row_start[b * N + n] : I(0);
    const I end = valid ? row_start[b * N + n + 1] : I(0);
    const I longest = warp_max<I>(end - begin);
    const I batch_first = static_cast<I>(b * P * T_);
    const int64_t c_first = chunk * kSparseChannels;
    const int c_count = static_cast<int>(C - c_first < kSparseChannels ? C - c_first : kSparseChannels);
    const T* values_b = grad_out + (b * C + c_first) * P;
    A acc[kSparseChannels];
    sum_target<kSparseChannels, TT>(
        entries, begin, end, longest, batch_first, t_count, weight, c_count,
        [&](I p, int u) { return values_b[static_cast<int64_t>(p) + u * P]; }, acc);
    if (valid) {
      T* out = grad_feat + (b * C + c_first) * N + n;
#pragma unroll
      for (int u = 0; u < kSparseChannels; ++u) {
        if (u < c_count) out[u * N] = from_acc<T>(acc[u]);
      }
    }
  }
}

// Sparse rows with short grad_out rows (P * elem small enough that several channels of a
// cloud fit in shared memory, as in gather_points): a block stages kStagedSumChannels-or-fewer
// whole grad_out rows of one cloud with coalesced loads, and the row bounds and entry numbers
// of a span of targets, then each warp sums 32 targets (a lane each) from shared memory only
// and stores each channel's 32 sums in one coalesced piece. The scattered reads of the other
// sparse sums (one L1 wavefront per entry and channel) become shared-memory reads, and no
// global load latency sits between a warp and its stores.
constexpr int kStagedSumThreads = 512;
// A block stages up to 8 grad_out rows (at most 128 KB) and the bounds and entries of 4096
// targets. On the H200 (B8 C128 N16384 P4096, back to back) 8 rows were best in both float32
// (128 KB, one block per SM: 0.068 ms; 4 rows 0.072) and float16 (64 KB, two blocks per SM:
// 0.053 ms; 16 rows 0.056); spans of 1024 or 2048 targets with smaller stages, which fit 2-4
// blocks per SM, were 1.2-2.5x slower: every block restages its rows and bounds.
constexpr int64_t kStagedSumRowBytes = 128 * 1024;
constexpr int64_t kStagedSumSpan = 4096;
// POINTOPS_GATHER_SUM_STAGE_KB and POINTOPS_GATHER_SUM_SPAN override the two (benchmarks).
inline int64_t staged_sum_row_bytes() {
  return int64_t{1024} * tuning_or(Knob::GatherSumStageKb, kStagedSumRowBytes / 1024);
}
inline int64_t staged_sum_span() { return tuning_or(Knob::GatherSumSpan, kStagedSumSpan); }
constexpr int kStagedSumChannels = 8;  // at most this many grad_out rows per block
constexpr int kStagedSumUnroll = 8;    // channels summed per pass over a target's entries

// Shared memory of a block: the grad_out rows, then the span's row bounds (span + 1, padded to
// 4 elements so that the entries after them start 16-byte aligned), then up to span entries.
__host__ __device__ inline int64_t staged_sum_entries_offset(int64_t span) { return (span + 4) / 4 * 4; }

template <class I>
inline size_t staged_sum_smem(int64_t channels, int64_t P, size_t elem_bytes, int64_t span) {
  return align_up(static_cast<size_t>(channels * P) * elem_bytes) +
         static_cast<size_t>(staged_sum_entries_offset(span) + span) * sizeof(I);
}

template <class T, class I, int TT>
__global__ void __launch_bounds__(kStagedSumThreads)
    row_sum_sparse_staged_kernel(const T* __restrict__ grad_out, const T* __restrict__ weight,
                                 const I* __restrict__ row_start, const I* __restrict__ entries, int64_t B,
                                 int64_t C, int64_t N, int64_t P, int64_t T_, int64_t CS, int64_t span_rows,
                                 T* __restrict__ grad_feat) {
  using A = acc_t<T>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const unsigned int spans = static_cast<unsigned int>(ceil_div(N, span_rows));
  const unsigned int c_groups = static_cast<unsigned int>(ceil_div(C, CS));
  const int64_t span = blockIdx.x % spans;
  const int64_t c0 = (blockIdx.x / spans) % c_groups * CS;
  const int64_t b = blockIdx.x / spans / c_groups;
  const int cn = static_cast<int>(C - c0 < CS ? C - c0 : CS);
  const int64_t n0 = span * span_rows;
  const int rows = static_cast<int>(N - n0 < span_rows ? N - n0 : span_rows);
  T* stage = reinterpret_cast<T*>(smem_raw);
  I* s_start = reinterpret_cast<I*>(smem_raw + align_up(static_cast<size_t>(CS * P) * sizeof(T)));
  I* s_entries = s_start + staged_sum_entries_offset(span_rows);

  // grad_out rows c0..c0+cn of cloud b are one contiguous range; so are the span's row bounds.
  stage_to_shared<kStagedSumThreads, 8>(grad_out + (b * C + c0) * P, cn * P, stage);
  stage_to_shared<kStagedSumThreads, 8>(row_start + b * N + n0, rows + 1, s_start);
  __syncthreads();
  const I first = s_start[0];
  const I total = s_start[rows] - first;
  const bool staged = total <= static_cast<I>(span_rows);  // else read from global
  if (staged) stage_to_shared<kStagedSumThreads, 8>(entries + first, static_cast<int64_t>(total), s_entries);
  __syncthreads();
  const I* list = staged ? s_entries : entries + first;  // entry r of the span is list[r - first]
  const I batch_first = static_cast<I>(b * P * T_);
  const I t_count = static_cast<I>(T_);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int g = warp * 32; g < rows; g += kStagedSumThreads) {
    const int n = g + lane;
    const bool valid = n < rows;
    const I begin = valid ? s_start[n] - first : I(0);
    const I end = valid ? s_start[n + 1] - first : I(0);
    const I longest = warp_max<I>(end - begin);
    for (int c = 0; c < cn; c += kStagedSumUnroll) {
      A acc[kStagedSumUnroll];
      sum_target<kStagedSumUnroll, TT>(
          list, begin, end, longest, batch_first, t_count, weight, cn - c,
          [&](I p, int u) { return stage[static_cast<int64_t>(c + u) * P + p]; }, acc);
      if (valid) {
        T* out = grad_feat + (b * C + c0 + c) * N + n0 + n;
#pragma unroll
        for (int u = 0; u < kStagedSumUnroll; ++u) {
          if (c + u < cn) out[static_cast<int64_t>(u) * N] = from_acc<T>(acc[u]);
        }
      }
    }
  }
}

// Fused sparse sums, the default for sparse rows when a cloud's entries and a few grad_out rows
// fit in shared memory (gather_points): one launch and no workspace, in place of the seven
// launches of the pipeline above (memset, count, two scan kernels, fill, sort, sums) and its
// global row arrays. A block takes kFusedSpan targets of one cloud and a range of channels. It
// reads the cloud's indices once, keeps the entries that land in its span, and builds their
// rows in shared memory (count, scan, fill; a row is sorted ascending by the one thread that
// reads it, and only if it has several entries). Then it stages a few
// grad_out rows at a time, loading the next rows while it stores the outputs of these (two
// buffers, cp.async). Each staged row has two extra parts: a zero, and a slot per target
// with several entries (or any entry, when weighted), where the block first writes that
// target's sum in ascending entry order. So every target's output for a channel is one
// shared-memory read at an offset fixed for the block (its entry's column, the zero, or its
// slot), with no branches, and a thread's consecutive targets are one 16-byte store. Blocks
// with more such targets than slots (or weights on many targets) sum every row in a loop.
// Two blocks fit on an SM.
constexpr int kFusedThreads = 512;
constexpr int kFusedTargetsPerThread = 8;
constexpr int kFusedSpan = kFusedThreads * kFusedTargetsPerThread;  // targets per block (< 2^16)
constexpr int kFusedEntriesPerThread = 16;
constexpr int64_t kFusedMaxEntries = int64_t{kFusedThreads} * kFusedEntriesPerThread;  // P * T cap
constexpr int kFusedSlots = kFusedSpan / 8;  // summed targets per staged row
static_assert(kFusedSlots <= kFusedThreads, "a thread sums each slot");
// Shared memory per block; two blocks per SM need at most half of the H100/H200's 228 KB.
constexpr int64_t kFusedSmemBytes = 110 * 1024;

// Elements per staged row: grad_out's P, the zero, the slots; a multiple of 16 bytes.
__host__ __device__ inline int64_t fused_row_stride(int64_t P, int64_t elem_bytes) {
  const int64_t per_vec = 16 / elem_bytes;
  return ceil_div(P + 1 + kFusedSlots, per_vec) * per_vec;
}

// Shared memory before the staged rows: the row positions (kFusedSpan + 1, padded), the entries
// (P * T, padded), the slots' targets.
__host__ __device__ inline size_t fused_rows_bytes(int64_t entries) {
  return align_up(static_cast<size_t>(kFusedSpan + 4 + (entries + 3) / 4 * 4 + kFusedSlots) *
                  sizeof(uint32_t));
}

template <class T, int TT>
__global__ void __launch_bounds__(kFusedThreads, 2)
    fused_sparse_sum_kernel(const T* __restrict__ grad_out, const int64_t* __restrict__ idx,
                            const T* __restrict__ weight, int64_t B, int64_t C, int64_t N, int64_t P,
                            int64_t T_, int64_t channels_per_block, int stage_rows, bool vector_stores,
                            T* __restrict__ grad_feat, KernelChecks checks) {
  using A = acc_t<T>;
  constexpr int VEC = 16 / sizeof(T);  // targets per 16-byte store
  constexpr int kGroups = kFusedTargetsPerThread / VEC;
  using BlockScan = cub::BlockScan<uint32_t, kFusedThreads>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const int64_t E = P * T_;
  const unsigned int spans = static_cast<unsigned int>(ceil_div(N, kFusedSpan));
  const unsigned int c_groups = static_cast<unsigned int>(ceil_div(C, channels_per_block));
  const int64_t n0 = static_cast<int64_t>(blockIdx.x % spans) * kFusedSpan;
  const int64_t c_begin = static_cast<int64_t>(blockIdx.x / spans % c_groups) * channels_per_block;
  const int64_t b = blockIdx.x / spans / c_groups;
  const int64_t c_end = C - c_begin < channels_per_block ? C : c_begin + channels_per_block;
  const int rows = static_cast<int>(N - n0 < kFusedSpan ? N - n0 : kFusedSpan);
  const uint32_t S = static_cast<uint32_t>(fused_row_stride(P, sizeof(T)));
  const uint32_t zero_at = static_cast<uint32_t>(P), slots_at = zero_at + 1;
  uint32_t* s_pos = reinterpret_cast<uint32_t*>(smem_raw);  // row r: s_list[s_pos[r] .. s_pos[r + 1])
  uint32_t* s_list = s_pos + kFusedSpan + 4;
  uint32_t* s_slot_target = s_list + (E + 3) / 4 * 4;
  T* stage = reinterpret_cast<T*>(smem_raw + fused_rows_bytes(E));
  const int t = threadIdx.x;

  // Rows of the span: count into s_pos[r + 1], scan to row starts, fill (each entry's claim of a
  // list position moves s_pos[r + 1] on to the next row's start); rows are sorted later, by the
  // thread that sums them.
  for (int i = t; i <= kFusedSpan; i += kFusedThreads) s_pos[i] = 0;
  for (int u = t; u < 2 * stage_rows; u += kFusedThreads) stage[static_cast<int64_t>(u) * S + zero_at] = T(0);
  // The span-relative target of entry t + k * kFusedThreads, 16 bits each (kNoTarget: none or
  // outside the span), two to a register: they live through the scan.
  constexpr uint32_t kNoTarget = 0xffffu;
  uint32_t targets[kFusedEntriesPerThread / 2];
#pragma unroll
  for (int k = 0; k < kFusedEntriesPerThread; ++k) {
    const int64_t e = t + int64_t{k} * kFusedThreads;
    const int64_t j = e < E ? idx[b * E + e] : -1;
    if (j < -1 || j >= N) checks.report();
    const uint64_t local = static_cast<uint64_t>(j - n0);  // < rows exactly when n0 <= j < n0 + rows
    const uint32_t packed = local < static_cast<uint64_t>(rows) ? static_cast<uint32_t>(local) : kNoTarget;
    if (k % 2 == 0)
      targets[k / 2] = packed;
    else
      targets[k / 2] |= packed << 16;
  }
  auto target_of = [&](int k) { return (targets[k / 2] >> (k % 2 * 16)) & kNoTarget; };
  __syncthreads();
#pragma unroll
  for (int k = 0; k < kFusedEntriesPerThread; ++k) {
    if (target_of(k) != kNoTarget) atomicAdd(&s_pos[target_of(k) + 1], 1u);
  }
  __syncthreads();
  uint32_t counts[kFusedTargetsPerThread], total = 0;
#pragma unroll
  for (int i = 0; i < kFusedTargetsPerThread; ++i) {
    counts[i] = s_pos[t * kFusedTargetsPerThread + i + 1];
    total += counts[i];
  }
  uint32_t start;
  BlockScan(scan_storage).ExclusiveSum(total, start);
  __syncthreads();  // every count is read before the starts overwrite them
#pragma unroll
  for (int i = 0; i < kFusedTargetsPerThread; ++i) {
    s_pos[t * kFusedTargetsPerThread + i + 1] = start;
    start += counts[i];
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < kFusedEntriesPerThread; ++k) {
    if (target_of(k) != kNoTarget) s_list[atomicAdd(&s_pos[target_of(k) + 1], 1u)] = t + k * kFusedThreads;
  }
  __syncthreads();
  // A thread's targets: VEC consecutive ones per group, groups kFusedThreads * VEC apart. It
  // finds where each reads its output in a staged row: its entry's column, the zero, or a slot
  // (numbered by a block scan, in thread order).
  auto target_n = [&](int i) { return (t + i / VEC * kFusedThreads) * VEC + i % VEC; };
  const T* w_batch = weight == nullptr ? nullptr : weight + b * E;
  auto column = [&](uint32_t e) { return TT == 1 ? e : (TT > 0 ? e / TT : e / static_cast<uint32_t>(T_)); };
  uint32_t read_at[kFusedTargetsPerThread];
  uint32_t wants_slot = 0;  // bit i: target i is summed into a slot
#pragma unroll
  for (int i = 0; i < kFusedTargetsPerThread; ++i) {
    const int n = target_n(i);
    const uint32_t lo = n < rows ? s_pos[n] : 0, count = n < rows ? s_pos[n + 1] - lo : 0;
    read_at[i] = count == 1 && w_batch == nullptr ? column(s_list[lo]) : zero_at;
    if (count > 1 || (count == 1 && w_batch != nullptr)) wants_slot |= 1u << i;
  }
  uint32_t slot, summed;  // the scan storage is free: barriers followed its first use
  BlockScan(scan_storage).ExclusiveSum(static_cast<uint32_t>(__popc(wants_slot)), slot, summed);
#pragma unroll
  for (int i = 0; i < kFusedTargetsPerThread; ++i) {
    if ((wants_slot >> i) & 1u) {
      if (slot < kFusedSlots) {
        s_slot_target[slot] = target_n(i);
        read_at[i] = slots_at + slot;
      }
      ++slot;
    }
  }
  const bool all_slotted = summed <= kFusedSlots;  // else every target sums its row below
  if (!all_slotted) {  // rows are read in ascending order; each thread reads only its targets' rows
    for (int i = 0; i < kFusedTargetsPerThread; ++i) {
      const int n = target_n(i);
      if (n < rows && s_pos[n + 1] - s_pos[n] > 1)
        sort_row(s_list + s_pos[n], static_cast<int64_t>(s_pos[n + 1] - s_pos[n]));
    }
  }
  __syncthreads();
  // Thread t sums slot t (kFusedSlots <= kFusedThreads): its target's entries, which only it
  // reads, so it sorts them here; rows of up to kSlotCached entries stay in registers.
  constexpr int kSlotCached = 4;
  const bool sums_slot = all_slotted && static_cast<uint32_t>(t) < summed;
  const int slot_n = sums_slot ? static_cast<int>(s_slot_target[t]) : 0;
  const uint32_t slot_lo = sums_slot ? s_pos[slot_n] : 0,
                 slot_len = sums_slot ? s_pos[slot_n + 1] - slot_lo : 0;
  if (slot_len > 1) sort_row(s_list + slot_lo, static_cast<int64_t>(slot_len));
  uint32_t slot_entry[kSlotCached];
#pragma unroll
  for (int j = 0; j < kSlotCached; ++j) slot_entry[j] = j < slot_len ? s_list[slot_lo + j] : 0;

  // w * grad_out[c, p] of entry e, from the staged row of channel c.
  auto term = [&](const T* row, uint32_t e) {
    const A x = to_acc(row[column(e)]);
    return w_batch == nullptr ? x : mul_rn(to_acc(w_batch[e]), x);
  };
  auto row_sum = [&](const T* row, int n) {
    A acc = A(0);
    for (uint32_t r = s_pos[n]; r < s_pos[n + 1]; ++r) acc = add_rn(acc, term(row, s_list[r]));
    return from_acc<T>(acc);
  };
  auto slot_sum = [&](const T* row) {
    if (slot_len > kSlotCached) return row_sum(row, slot_n);
    A acc = A(0);
#pragma unroll
    for (int j = 0; j < kSlotCached; ++j) {
      if (j < slot_len) acc = add_rn(acc, term(row, slot_entry[j]));
    }
    return from_acc<T>(acc);
  };

  // Chunks of stage_rows channels go through two buffers: the next chunk's rows load (cp.async)
  // while this chunk's outputs are summed and stored.
  const T* g_batch = grad_out + b * C * P;
  const bool vector_copy = P * sizeof(T) % 16 == 0 && reinterpret_cast<uintptr_t>(grad_out) % 16 == 0;
  const int64_t chunks = ceil_div(c_end - c_begin, stage_rows);
  auto buffer = [&](int64_t chunk) { return stage + (chunk & 1) * static_cast<int64_t>(stage_rows) * S; };
  auto rows_in = [&](int64_t chunk) {
    const int64_t c0 = c_begin + chunk * stage_rows;
    return static_cast<int>(c_end - c0 < stage_rows ? c_end - c0 : stage_rows);
  };
  auto load = [&](int64_t chunk) {
    const T* src = g_batch + (c_begin + chunk * stage_rows) * P;
    const uint32_t cs = static_cast<uint32_t>(rows_in(chunk));
    if (vector_copy) {
      const uint32_t len = static_cast<uint32_t>(P / VEC);
      uint4* dst = reinterpret_cast<uint4*>(buffer(chunk));
      const uint4* from = reinterpret_cast<const uint4*>(src);
      for (uint32_t u = 0; u < cs; ++u, dst += S / VEC, from += len) {
        for (uint32_t i = t; i < len; i += kFusedThreads) copy16_async(dst + i, from + i);
      }
    } else {
      for (uint32_t u = 0; u < cs; ++u)
        copy_in_flight<kFusedThreads, 4>(src + u * P, P, buffer(chunk) + u * S);
    }
    async_copies_commit();
  };
  load(0);
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    if (chunk + 1 < chunks) {
      load(chunk + 1);
      async_copies_wait<1>();
    } else {
      async_copies_wait<0>();
    }
    __syncthreads();  // this chunk's rows are in place for every thread
    T* const rows_base = buffer(chunk);
    const int cs = rows_in(chunk);
    if (all_slotted) {
      if (sums_slot) {
        for (int u = 0; u < cs; ++u) rows_base[u * S + slots_at + t] = slot_sum(rows_base + u * S);
      }
      __syncthreads();
    }
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const int n_first = (t + k * kFusedThreads) * VEC;
      if (n_first >= rows) break;
      T* dst = grad_feat + (b * C + c_begin + chunk * stage_rows) * N + n0 + n_first;
      for (int u = 0; u < cs; ++u, dst += N) {
        const T* row = rows_base + static_cast<uint32_t>(u) * S;
        alignas(16) T out[VEC];
#pragma unroll
        for (int v = 0; v < VEC; ++v)
          out[v] = all_slotted ? row[read_at[k * VEC + v]] : row_sum(row, n_first + v);
        if (vector_stores) {
          *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(out);
        } else {
#pragma unroll
          for (int v = 0; v < VEC; ++v) {
            if (n_first + v < rows) dst[v] = out[v];
          }
        }
      }
    }
    __syncthreads();  // this chunk's buffer is free for chunk + 2
  }
}

}  // namespace cuda_detail
}  // namespace pointops
