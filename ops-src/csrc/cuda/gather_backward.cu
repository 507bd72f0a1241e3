// Backward of the weighted gather on CUDA, deterministic (no float atomics).
//
// grad_feat: a counting sort groups the (p,t) entries by target point (count, scan, fill),
// each target's row is sorted into ascending (p,t) order, then each row is summed in that
// order. Dense rows (more entries than targets), or grad_out larger than half the L2: from
// grad_out transposed into the workspace one 64-channel slab at a time, lanes over channels.
// Sparse rows: a lane per target. Where a cloud's entries and a few grad_out rows fit in shared
// memory (gather_points), one fused kernel builds the rows of a span of targets in shared
// memory and sums them there; else from the global rows above, with grad_out rows staged in
// shared memory where several fit, or from grad_out directly. POINTOPS_GATHER_STAGED=0:
// straight from grad_out by threads over (channel chunk, b, n).
// grad_weight: one thread per (b,p,t) sums over c in ascending order.
#include <atomic>

#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include "common.cuh"
#include "stream_fork.cuh"

namespace pointops {
namespace {

using namespace cuda_detail;

constexpr int kThreads = 256;

// 32-bit row positions and entry numbers while they fit (half the traffic), 64-bit beyond.
inline bool fits_u32(int64_t B, int64_t N, int64_t P, int64_t T) {
  const int64_t limit = static_cast<int64_t>(UINT32_MAX) - 1;
  return B * N + 1 <= limit && B * P * T <= limit;
}

template <class I>
__global__ void count_kernel(const int64_t* __restrict__ idx, int64_t B, int64_t N,
                             int64_t entries_per_batch, I* __restrict__ counts) {
  const int64_t total = B * entries_per_batch;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = idx[e];
    if (j >= 0 && j < N) atomicAdd(&counts[(e / entries_per_batch) * N + j], I(1));
  }
}

// Places each entry in its target's row, counting the row's size in `cursor` back down to zero
// (so the counts need no second memset); the first to claim a row takes its first slot, which
// keeps rows nearly ascending for sort_rows_kernel (it fixes the order exactly).
template <class I>
__global__ void fill_kernel(const int64_t* __restrict__ idx, int64_t B, int64_t N,
                            int64_t entries_per_batch, const I* __restrict__ row_start,
                            I* __restrict__ cursor, I* __restrict__ entries) {
  const int64_t total = B * entries_per_batch;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = idx[e];
    if (j < 0 || j >= N) continue;
    const int64_t row = (e / entries_per_batch) * N + j;
    // Adding the all-ones value subtracts 1 (atomicSub has no 64-bit overload).
    const I remaining = atomicAdd(&cursor[row], ~I(0));
    entries[row_start[row + 1] - remaining] = static_cast<I>(e);
  }
}

// Rows are sorted ascending (the contract's summation order). sift_down restores the max-heap
// below root, for the heap sort of long rows.
template <class I>
__device__ void sift_down(I* a, int64_t root, int64_t len) {
  for (;;) {
    int64_t child = 2 * root + 1;
    if (child >= len) return;
    if (child + 1 < len && a[child + 1] > a[child]) ++child;
    if (!(a[child] > a[root])) return;
    const I tmp = a[root];
    a[root] = a[child];
    a[child] = tmp;
    root = child;
  }
}

// Sorts a[0..len) ascending: insertion sort for short rows (the usual case), heap sort for long
// ones (many entries on one point).
template <class I>
__device__ void sort_row(I* a, int64_t len) {
  if (len <= 32) {
    for (int64_t i = 1; i < len; ++i) {
      const I v = a[i];
      int64_t k = i;
      while (k > 0 && a[k - 1] > v) {
        a[k] = a[k - 1];
        --k;
      }
      a[k] = v;
    }
    return;
  }
  for (int64_t i = len / 2 - 1; i >= 0; --i) sift_down(a, i, len);
  for (int64_t end = len - 1; end > 0; --end) {
    const I tmp = a[0];
    a[0] = a[end];
    a[end] = tmp;
    sift_down(a, 0, end);
  }
}

template <class I>
__global__ void sort_rows_kernel(const I* __restrict__ row_start, int64_t rows, I* entries) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    sort_row(entries + row_start[r], static_cast<int64_t>(row_start[r + 1] - row_start[r]));
  }
}

// One thread per (channel chunk, b, n), n fastest so that grad_feat writes are coalesced;
// kUnroll channels share each pass over the row's entries.
constexpr int kUnroll = 4;

template <class T, class I>
__global__ void __launch_bounds__(kThreads)
    row_sum_kernel(const T* __restrict__ grad_out, const T* __restrict__ weight,
                   const I* __restrict__ row_start, const I* __restrict__ entries, int64_t B,
                   int64_t C, int64_t N, int64_t P, int64_t T_, int64_t c_chunk,
                   T* __restrict__ grad_feat) {
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

// A block moves 64 channels x kTransposeSpan points: whole slab rows of stride <= 64 channels
// are written by one block, and each block has enough work to amortize its start.
constexpr int kTransposeSpan = 128;

template <class T>
__global__ void __launch_bounds__(32 * kTransposeRows)
    transpose_slab_kernel(const T* __restrict__ src, int64_t B, int64_t C, int64_t P, int64_t c0,
                          int cn, int stride, T* __restrict__ dst) {
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
                              const I* __restrict__ row_start, const I* __restrict__ entries,
                              int64_t B, int64_t C, int64_t N, int64_t P, int64_t T_, int64_t c0,
                              int cn, int stride, T* __restrict__ grad_feat) {
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
        for (I r = row_start[b * N + n]; r < end; ++r) {
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
                                           const T* __restrict__ weight, int count, Value value, A (&acc)[U]) {
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
__global__ void __launch_bounds__(kThreads)
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
    sum_target<kSparseChannels, TT>(entries, begin, end, longest, batch_first, t_count, weight, c_count,
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
  return int64_t{1024} * env_int("POINTOPS_GATHER_SUM_STAGE_KB", static_cast<int>(kStagedSumRowBytes / 1024));
}
inline int64_t staged_sum_span() { return env_int("POINTOPS_GATHER_SUM_SPAN", static_cast<int>(kStagedSumSpan)); }
constexpr int kStagedSumChannels = 8;  // at most this many grad_out rows per block
constexpr int kStagedSumUnroll = 8;     // channels summed per pass over a target's entries

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
                                 const I* __restrict__ row_start, const I* __restrict__ entries,
                                 int64_t B, int64_t C, int64_t N, int64_t P, int64_t T_, int64_t CS,
                                 int64_t span_rows, T* __restrict__ grad_feat) {
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
      sum_target<kStagedSumUnroll, TT>(list, begin, end, longest, batch_first, t_count, weight, cn - c,
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
  return align_up(static_cast<size_t>(kFusedSpan + 4 + (entries + 3) / 4 * 4 + kFusedSlots) * sizeof(uint32_t));
}

template <class T, int TT>
__global__ void __launch_bounds__(kFusedThreads, 2)
    fused_sparse_sum_kernel(const T* __restrict__ grad_out, const int64_t* __restrict__ idx,
                            const T* __restrict__ weight, int64_t B, int64_t C, int64_t N, int64_t P,
                            int64_t T_, int64_t channels_per_block, int stage_rows, bool vector_stores,
                            T* __restrict__ grad_feat) {
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
    const uint64_t local = static_cast<uint64_t>(j - n0);  // < rows exactly when n0 <= j < n0 + rows
    const uint32_t packed = local < static_cast<uint64_t>(rows) ? static_cast<uint32_t>(local) : kNoTarget;
    if (k % 2 == 0) targets[k / 2] = packed;
    else targets[k / 2] |= packed << 16;
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
      if (n < rows && s_pos[n + 1] - s_pos[n] > 1) sort_row(s_list + s_pos[n], static_cast<int64_t>(s_pos[n + 1] - s_pos[n]));
    }
  }
  __syncthreads();
  // Thread t sums slot t (kFusedSlots <= kFusedThreads): its target's entries, which only it
  // reads, so it sorts them here; rows of up to kSlotCached entries stay in registers.
  constexpr int kSlotCached = 4;
  const bool sums_slot = all_slotted && static_cast<uint32_t>(t) < summed;
  const int slot_n = sums_slot ? static_cast<int>(s_slot_target[t]) : 0;
  const uint32_t slot_lo = sums_slot ? s_pos[slot_n] : 0, slot_len = sums_slot ? s_pos[slot_n + 1] - slot_lo : 0;
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
      for (uint32_t u = 0; u < cs; ++u) copy_in_flight<kFusedThreads, 4>(src + u * P, P, buffer(chunk) + u * S);
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
        for (int v = 0; v < VEC; ++v) out[v] = all_slotted ? row[read_at[k * VEC + v]] : row_sum(row, n_first + v);
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

struct FusedPlan {
  int stage_rows;              // grad_out rows per buffer (two buffers)
  int64_t channels_per_block;  // a multiple of stage_rows
  int64_t blocks;
  size_t smem;
};

// The fused sums' launch, or false where they do not apply (too many entries for the block's
// registers and shared memory, or grad_out rows too long to stage).
inline bool plan_fused(int64_t B, int64_t C, int64_t N, int64_t P, int64_t T, size_t elem_bytes, FusedPlan* plan) {
  const int64_t entries = P * T;
  if (P <= 0 || entries > kFusedMaxEntries) return false;
  const int64_t row_bytes = fused_row_stride(P, static_cast<int64_t>(elem_bytes)) * static_cast<int64_t>(elem_bytes);
  int64_t stage_rows = (kFusedSmemBytes - static_cast<int64_t>(fused_rows_bytes(entries))) / (2 * row_bytes);
  if (stage_rows < 1) return false;
  if (stage_rows > C) stage_rows = C;
  // Two blocks per SM at least: fewer channels per block where the clouds and spans are few.
  const int64_t slices = B * ceil_div(N, kFusedSpan);
  int64_t groups = ceil_div(2 * int64_t{current_device_sm_count()}, slices);
  const int64_t max_groups = ceil_div(C, stage_rows);
  if (groups > max_groups) groups = max_groups;
  if (groups < 1) groups = 1;
  plan->stage_rows = static_cast<int>(stage_rows);
  plan->channels_per_block = ceil_div(ceil_div(C, groups), stage_rows) * stage_rows;
  plan->blocks = slices * ceil_div(C, plan->channels_per_block);
  plan->smem = fused_rows_bytes(entries) + static_cast<size_t>(2 * stage_rows * row_bytes);
  return plan->blocks <= INT32_MAX;
}

template <class T>
Status launch_fused(const T* grad_out, const int64_t* idx, const T* weight, int64_t B, int64_t C, int64_t N,
                    int64_t P, int64_t T_, const FusedPlan& plan, T* grad_feat, cudaStream_t s) {
  const int variant = T_ == 1 ? 0 : (T_ == 3 ? 1 : 2);
  auto kernel = variant == 0 ? fused_sparse_sum_kernel<T, 1>
                             : (variant == 1 ? fused_sparse_sum_kernel<T, 3> : fused_sparse_sum_kernel<T, 0>);
  // Every plan fits in kFusedSmemBytes: raise the kernel's limit to that once per device (the
  // call costs host time on every op call otherwise).
  static std::atomic<uint64_t> limit_raised[3];
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  const uint64_t bit = dev < 64 ? uint64_t{1} << dev : 0;
  if (bit == 0 || (limit_raised[variant].load(std::memory_order_acquire) & bit) == 0) {
    err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kFusedSmemBytes));
    if (err != cudaSuccess) return cudaGetErrorString(err);
    limit_raised[variant].fetch_or(bit, std::memory_order_acq_rel);
  }
  constexpr int VEC = 16 / sizeof(T);
  const bool vector_stores = N % VEC == 0 && reinterpret_cast<uintptr_t>(grad_feat) % 16 == 0;
  kernel<<<static_cast<unsigned int>(plan.blocks), kFusedThreads, plan.smem, s>>>(
      grad_out, idx, weight, B, C, N, P, T_, plan.channels_per_block, plan.stage_rows, vector_stores, grad_feat);
  return launch_status();
}

// Which sums run (chosen from the sizes alone, so the workspace size and the launch agree):
// the transposed (dense) sums, the sparse sums above (fused, staged or direct), or with
// POINTOPS_GATHER_STAGED=0 the direct sums (no slab in the workspace). The transposed sums
// replaced an earlier variant that summed every row, a block of rows at a time, from grad_out
// rows staged in shared memory (three_interpolate 308 -> 198 µs, gather_points float16 137 ->
// 102 µs, group_points equal on the H200); the sparse sums instead give each target a lane and
// serve only sparse rows. POINTOPS_GATHER_SPARSE forces one (benchmarks and tests compare
// them): 0 the dense sums, 1 the sparse sums from grad_out, 2 the sparse sums from staged
// grad_out rows (falling back to 1 where those rows do not fit), 3 the fused sparse sums
// (falling back to 2).
enum class SumPath { Direct, Transposed, SparseDirect, SparseStaged, SparseFused };

// grad_out rows staged per block for the staged sparse sums (0: they do not fit usefully).
inline int64_t staged_sum_channels(int64_t C, int64_t P, size_t elem_bytes) {
  if (P <= 0) return 0;
  int64_t cs = staged_sum_row_bytes() / (P * static_cast<int64_t>(elem_bytes));
  if (cs > kStagedSumChannels) cs = kStagedSumChannels;
  if (cs > C) cs = C;
  return cs >= (C < 4 ? C : 4) ? cs : 0;  // fewer rows per block re-read the bounds too often
}

// `fused` receives the fused sums' plan when they are chosen.
inline SumPath sparse_path(int64_t B, int64_t C, int64_t N, int64_t P, int64_t T, size_t elem_bytes,
                           FusedPlan* fused) {
  if (plan_fused(B, C, N, P, T, elem_bytes, fused)) return SumPath::SparseFused;
  return staged_sum_channels(C, P, elem_bytes) > 0 ? SumPath::SparseStaged : SumPath::SparseDirect;
}

inline SumPath choose_sum_path(int64_t B, int64_t C, int64_t N, int64_t P, int64_t T, size_t elem_bytes,
                               FusedPlan* fused) {
  if (env_int("POINTOPS_GATHER_STAGED", -1) == 0) return SumPath::Direct;
  switch (env_int("POINTOPS_GATHER_SPARSE", -1)) {
    case 0: return SumPath::Transposed;
    case 1: return SumPath::SparseDirect;
    case 2: return SumPath::SparseStaged;
    case 3: return sparse_path(B, C, N, P, T, elem_bytes, fused);
    default: break;
  }
  // The sparse sums read grad_out scattered (or restage its rows for every span of targets):
  // cheap while it stays in half of the L2. Beyond, each read would come from DRAM; the dense
  // sums measured faster there (B8 C256 N262144 P131072: 2.06 vs 2.31 ms, float32).
  const int64_t grad_bytes = B * C * P * static_cast<int64_t>(elem_bytes);
  if (P * T > N || grad_bytes > current_device_l2_bytes() / 2) return SumPath::Transposed;
  return sparse_path(B, C, N, P, T, elem_bytes, fused);
}

inline size_t slab_bytes(int64_t B, int64_t C, int64_t P, size_t elem_bytes, SumPath path) {
  if (path != SumPath::Transposed) return 0;
  const int64_t channels = C < kChannelTile ? C : kChannelTile;
  return static_cast<size_t>(B * P * channels) * elem_bytes;
}

template <class I>
struct BackwardPlan {
  I* counts;     // B*N+1, then the fill cursors
  I* row_start;  // B*N+1
  I* entries;    // B*P*T
  void* slab;    // B*P*min(C, kChannelTile) elements for the transposed path, else empty
  void* temp;
  size_t temp_bytes;
  size_t total_bytes;
};

template <class I>
Status plan_backward(void* workspace, int64_t B, int64_t N, int64_t P, int64_t T, size_t slab_bytes,
                     BackwardPlan<I>* plan) {
  const int64_t rows = B * N + 1;
  WorkspaceCarver carve(workspace);
  plan->counts = carve.take<I>(rows);
  plan->row_start = carve.take<I>(rows);
  plan->entries = carve.take<I>(B * P * T);
  plan->slab = carve.take<char>(slab_bytes);
  size_t scan_bytes = 0;
  cudaError_t err = cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, plan->counts, plan->row_start, rows);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  plan->temp_bytes = scan_bytes;
  plan->temp = carve.take<char>(scan_bytes);
  plan->total_bytes = carve.used();
  return nullptr;
}

template <class T, class I>
Status backward_feat(const T* grad_out, const int64_t* idx, const T* weight, int64_t B, int64_t C,
                     int64_t N, int64_t P, int64_t T_, T* grad_feat, void* workspace,
                     cudaStream_t s) {
  FusedPlan fused;
  const SumPath path = choose_sum_path(B, C, N, P, T_, sizeof(T), &fused);
  if (path == SumPath::SparseFused) return launch_fused(grad_out, idx, weight, B, C, N, P, T_, fused, grad_feat, s);
  BackwardPlan<I> plan;
  if (Status st = plan_backward<I>(workspace, B, N, P, T_, slab_bytes(B, C, P, sizeof(T), path), &plan)) {
    return st;
  }
  const int64_t entries = B * P * T_;
  const int64_t rows = B * N + 1;
  // The transposed sums' first slab does not depend on the rows: build the rows on a second
  // stream meanwhile (the transpose is bandwidth-bound, the row building bound by atomics and
  // latency, so they can share the GPU; measured 20-35 us saved on group_points' 1M entries).
  // Worth a fork and a join only for many entries; POINTOPS_GATHER_OVERLAP=0 builds them in
  // line (benchmarks compare the two).
  StreamFork fork(s);
  if (path == SumPath::Transposed && P > 0 && entries >= kOverlapMinEntries &&
      env_int("POINTOPS_GATHER_OVERLAP", 1) != 0) {
    if (Status st = fork.begin()) return st;
  }
  const cudaStream_t rows_stream = fork.side();  // s when not forked
  cudaError_t err = cudaMemsetAsync(plan.counts, 0, static_cast<size_t>(rows) * sizeof(I), rows_stream);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  if (entries > 0) {
    count_kernel<I><<<grid_for(entries, kThreads), kThreads, 0, rows_stream>>>(idx, B, N, P * T_, plan.counts);
    if (Status st = launch_status()) return st;
  }
  size_t bytes = plan.temp_bytes;
  err = cub::DeviceScan::ExclusiveSum(plan.temp, bytes, plan.counts, plan.row_start, rows, rows_stream);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  if (entries > 0) {
    fill_kernel<I><<<grid_for(entries, kThreads), kThreads, 0, rows_stream>>>(idx, B, N, P * T_, plan.row_start,
                                                                              plan.counts, plan.entries);
    sort_rows_kernel<I><<<grid_for(B * N, kThreads), kThreads, 0, rows_stream>>>(plan.row_start, B * N,
                                                                                 plan.entries);
  }
  if (path == SumPath::SparseStaged) {
    const int64_t CS = staged_sum_channels(C, P, sizeof(T));
    if (CS > 0) {
      auto row_sum = T_ == 1 ? row_sum_sparse_staged_kernel<T, I, 1>
                             : (T_ == 3 ? row_sum_sparse_staged_kernel<T, I, 3> : row_sum_sparse_staged_kernel<T, I, 0>);
      const int64_t span = staged_sum_span();
      const size_t smem = staged_sum_smem<I>(CS, P, sizeof(T), span);
      err = cudaFuncSetAttribute(row_sum, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
      if (err != cudaSuccess) return cudaGetErrorString(err);
      const int64_t blocks = B * ceil_div(C, CS) * ceil_div(N, span);
      if (blocks <= INT32_MAX) {
        row_sum<<<static_cast<unsigned int>(blocks), kStagedSumThreads, smem, s>>>(
            grad_out, weight, plan.row_start, plan.entries, B, C, N, P, T_, CS, span, grad_feat);
        return launch_status();
      }
    }
  }
  if (path == SumPath::SparseDirect || path == SumPath::SparseStaged) {  // SparseStaged that did not fit
    auto row_sum = T_ == 1 ? row_sum_sparse_kernel<T, I, 1>
                           : (T_ == 3 ? row_sum_sparse_kernel<T, I, 3> : row_sum_sparse_kernel<T, I, 0>);
    const unsigned int blocks = grid_for(B * ceil_div(C, kSparseChannels) * ceil_div(N, 32) * 32, kThreads);
    row_sum<<<blocks, kThreads, 0, s>>>(grad_out, weight, plan.row_start, plan.entries, B, C, N, P, T_, grad_feat);
    return launch_status();
  }
  if (path == SumPath::Transposed) {
    T* slab = static_cast<T*>(plan.slab);
    // The slab holds min(C, kChannelTile) channels per point (its size in slab_bytes).
    const int stride = static_cast<int>(C < kChannelTile ? C : kChannelTile);
    const unsigned int batches = static_cast<unsigned int>(B < 65535 ? B : 65535);
    for (int64_t c0 = 0; c0 < C; c0 += kChannelTile) {
      const int cn = static_cast<int>(C - c0 < kChannelTile ? C - c0 : kChannelTile);
      const dim3 t_grid(static_cast<unsigned int>(ceil_div(P, kTransposeSpan)), 1, batches);
      if (P > 0) {  // with P = 0 the rows are empty and the sums below write zeros
        transpose_slab_kernel<T><<<t_grid, dim3(32, kTransposeRows), 0, s>>>(grad_out, B, C, P, c0, cn, stride,
                                                                             slab);
      }
      if (Status st = fork.join()) return st;  // the sums need the rows (no-op after the first slab)
      const dim3 r_grid(static_cast<unsigned int>(ceil_div(N, 32)), batches);
      auto row_sum = T_ == 1 ? row_sum_transposed_kernel<T, I, 1>
                             : (T_ == 3 ? row_sum_transposed_kernel<T, I, 3> : row_sum_transposed_kernel<T, I, 0>);
      row_sum<<<r_grid, 256, 0, s>>>(slab, weight, plan.row_start, plan.entries, B, C, N, P, T_, c0, cn, stride,
                                     grad_feat);
    }
    return launch_status();
  }
  // Enough (channel chunk, b, n) threads to fill the GPU, channels in multiples of kUnroll.
  int64_t chunks = ceil_div(int64_t{1} << 20, B * N);
  const int64_t max_chunks = ceil_div(C, kUnroll);
  if (chunks > max_chunks) chunks = max_chunks;
  if (chunks < 1) chunks = 1;
  const int64_t c_chunk = ceil_div(ceil_div(C, chunks), kUnroll) * kUnroll;
  const int64_t threads = ceil_div(C, c_chunk) * B * N;
  row_sum_kernel<T, I><<<grid_for(threads, kThreads), kThreads, 0, s>>>(
      grad_out, weight, plan.row_start, plan.entries, B, C, N, P, T_, c_chunk, grad_feat);
  return launch_status();
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    backward_weight_kernel(const T* __restrict__ grad_out, const T* __restrict__ feat,
                           const int64_t* __restrict__ idx, int64_t B, int64_t C, int64_t N,
                           int64_t P, int64_t T_, T* __restrict__ grad_w) {
  using A = acc_t<T>;
  const int64_t total = B * P * T_;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t bp = e / T_;
    const int64_t b = bp / P, p = bp - b * P;
    const int64_t j = idx[e];
    A acc = A(0);
    if (j >= 0 && j < N) {
      const T* g = grad_out + b * C * P + p;
      const T* f = feat + b * C * N + j;
      for (int64_t c = 0; c < C; ++c) acc = add_rn(acc, mul_rn(to_acc(g[c * P]), to_acc(f[c * N])));
    }
    grad_w[e] = from_acc<T>(acc);
  }
}

}  // namespace

size_t gather_backward_feat_cuda_workspace_bytes(Dtype dt, int64_t B, int64_t C, int64_t N, int64_t P,
                                                 int64_t T) {
  const size_t elem = dt == Dtype::Float64 ? 8 : (dt == Dtype::Float32 ? 4 : 2);
  FusedPlan fused;
  const SumPath path = choose_sum_path(B, C, N, P, T, elem, &fused);
  if (path == SumPath::SparseFused) return 0;  // builds its rows in shared memory
  const size_t slab = slab_bytes(B, C, P, elem, path);
  if (fits_u32(B, N, P, T)) {
    BackwardPlan<uint32_t> plan;
    if (plan_backward<uint32_t>(nullptr, B, N, P, T, slab, &plan) != nullptr) return 0;
    return plan.total_bytes;
  }
  BackwardPlan<unsigned long long> plan;
  if (plan_backward<unsigned long long>(nullptr, B, N, P, T, slab, &plan) != nullptr) return 0;
  return plan.total_bytes;
}

Status gather_backward_feat_cuda(Dtype dt, const void* grad_out, const int64_t* idx,
                                 const void* weight, int64_t B, int64_t C, int64_t N, int64_t P,
                                 int64_t T, void* grad_feat, void* workspace, void* stream) {
  if (B == 0 || C == 0 || N == 0) return nullptr;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const bool narrow = fits_u32(B, N, P, T);
  return dispatch_dtype(dt, [&](auto tag) -> Status {
    using E = decltype(tag);
    const E* g = static_cast<const E*>(grad_out);
    const E* w = static_cast<const E*>(weight);
    E* out = static_cast<E*>(grad_feat);
    if (narrow) return backward_feat<E, uint32_t>(g, idx, w, B, C, N, P, T, out, workspace, s);
    return backward_feat<E, unsigned long long>(g, idx, w, B, C, N, P, T, out, workspace, s);
  });
}

Status gather_backward_weight_cuda(Dtype dt, const void* grad_out, const void* feat,
                                   const int64_t* idx, int64_t B, int64_t C, int64_t N,
                                   int64_t P, int64_t T, void* grad_weight, void* stream) {
  if (B == 0 || P == 0 || T == 0) return nullptr;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  return dispatch_dtype(dt, [&](auto tag) -> Status {
    using E = decltype(tag);
    backward_weight_kernel<E><<<grid_for(B * P * T, kThreads), kThreads, 0, s>>>(
        static_cast<const E*>(grad_out), static_cast<const E*>(feat), idx, B, C, N, P, T,
        static_cast<E*>(grad_weight));
    return launch_status();
  });
}

}  // namespace pointops
