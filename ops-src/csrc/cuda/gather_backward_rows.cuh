// Row building for the gather backward (CUDA): the (p,t) entries of idx grouped by target
// point, each target's row in ascending (p,t) order, the order the contract sums in. Either a
// counting sort (count, scan, fill) with each row sorted after, or a stable radix sort (cub) of
// the entries by target row, with each row's start found by a binary search.
#pragma once

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "common.cuh"

namespace pointops {
namespace cuda_detail {

// 32-bit row positions and entry numbers while they fit (half the traffic), 64-bit beyond.
inline bool fits_u32(int64_t B, int64_t N, int64_t P, int64_t T) {
  const int64_t limit = static_cast<int64_t>(UINT32_MAX) - 1;
  return B * N + 1 <= limit && B * P * T <= limit;
}

// Ix: the index type (int64_t, or int32_t for the packed gather's int32 indices).
template <class I, class Ix>
__global__ void count_kernel(const Ix* __restrict__ idx, int64_t B, int64_t N, int64_t entries_per_batch,
                             I* __restrict__ counts, KernelChecks checks) {
  const int64_t total = B * entries_per_batch;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = idx[e];
    if (j >= 0 && j < N)
      atomicAdd(&counts[(e / entries_per_batch) * N + j], I(1));
    else if (j != -1)
      checks.report();
  }
}

// Places each entry in its target's row, counting the row's size in `cursor` back down to zero
// (so the counts need no second memset); the first to claim a row takes its first slot, which
// keeps rows nearly ascending for sort_rows_kernel (it fixes the order exactly).
template <class I, class Ix>
__global__ void fill_kernel(const Ix* __restrict__ idx, int64_t B, int64_t N, int64_t entries_per_batch,
                            const I* __restrict__ row_start, I* __restrict__ cursor,
                            I* __restrict__ entries) {
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

// The workspace of the row-building sums: the rows (counting sort of the entries by target),
// the transposed sums' slab, and cub's scan storage.
template <class I>
struct RowArrays {
  I* counts;     // B*N+1, then the fill cursors
  I* row_start;  // B*N+1
  I* entries;    // B*P*T
  void* slab;    // B*P*min(C, kChannelTile) elements for the transposed path, else empty
  void* temp;
  size_t temp_bytes;
  size_t total_bytes;
};

template <class I>
Status carve_rows(void* workspace, int64_t B, int64_t N, int64_t P, int64_t T, size_t slab_bytes,
                  RowArrays<I>* plan) {
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

// ---- rows by radix sort (row positions and entries in 32 bits) ----

// The workspace: keys and values twice (cub's double buffer), row starts (B*N + 1), `extra`
// bytes for the sums, cub's temporary storage. After build_radix_rows, vals.Current() holds
// the entries, row by row.
struct RadixRows {
  cub::DoubleBuffer<uint32_t> keys, vals;
  uint32_t* row_start;
  void* extra;
  void* temp;
  size_t temp_bytes;
  size_t total_bytes;
  int end_bit;
};

inline bool radix_rows_fit(int64_t B, int64_t N, int64_t P, int64_t T) {
  return B * P * T <= static_cast<int64_t>(INT32_MAX) && B * N < static_cast<int64_t>(UINT32_MAX);
}

inline Status carve_radix_rows(void* workspace, int64_t B, int64_t N, int64_t P, int64_t T,
                               size_t extra_bytes, RadixRows* out) {
  const int64_t entries = B * P * T, rows = B * N;
  WorkspaceCarver carve(workspace);
  uint32_t* k0 = carve.take<uint32_t>(entries);
  uint32_t* k1 = carve.take<uint32_t>(entries);
  uint32_t* v0 = carve.take<uint32_t>(entries);
  uint32_t* v1 = carve.take<uint32_t>(entries);
  out->keys = cub::DoubleBuffer<uint32_t>(k0, k1);
  out->vals = cub::DoubleBuffer<uint32_t>(v0, v1);
  out->row_start = carve.take<uint32_t>(rows + 1);
  out->extra = carve.take<char>(extra_bytes);
  out->end_bit = 1;  // bits that hold every key 0..rows
  while ((int64_t{1} << out->end_bit) <= rows) ++out->end_bit;
  size_t bytes = 0;
  cudaError_t err = cub::DeviceRadixSort::SortPairs(nullptr, bytes, out->keys, out->vals,
                                                    static_cast<int>(entries), 0, out->end_bit);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  out->temp_bytes = bytes;
  out->temp = carve.take<char>(bytes);
  out->total_bytes = carve.used();
  return nullptr;
}

// keys[e] = b * N + idx[e] where it addresses a target, else B * N (sorted after every row);
// vals[e] = e.
template <class Ix>
__global__ void target_keys_kernel(const Ix* __restrict__ idx, uint32_t N, uint32_t rows,
                                   uint32_t entries_per_batch, uint32_t entries, uint32_t* __restrict__ keys,
                                   uint32_t* __restrict__ vals, KernelChecks checks) {
  for (uint32_t e = blockIdx.x * blockDim.x + threadIdx.x; e < entries; e += gridDim.x * blockDim.x) {
    const int64_t j = idx[e];
    const bool in_range = j >= 0 && j < N;
    if (!in_range && j != -1) checks.report();
    keys[e] = in_range ? (e / entries_per_batch) * N + static_cast<uint32_t>(j) : rows;
    vals[e] = e;
  }
}

// The first sorted position whose key is >= row (a binary search: no serial walk over long runs
// of empty rows).
__device__ __forceinline__ uint32_t sorted_row_start(const uint32_t* __restrict__ sorted_keys,
                                                     uint32_t entries, uint32_t row) {
  uint32_t lo = 0, hi = entries;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (sorted_keys[mid] < row)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

template <class Unused = void>  // a template, so that every file that includes this can launch it
__global__ void sorted_row_starts_kernel(const uint32_t* __restrict__ sorted_keys, uint32_t entries,
                                         uint32_t rows, uint32_t* __restrict__ row_start) {
  for (uint32_t r = blockIdx.x * blockDim.x + threadIdx.x; r <= rows; r += gridDim.x * blockDim.x) {
    row_start[r] = sorted_row_start(sorted_keys, entries, r);
  }
}

// Keys and the sort; with `row_starts`, the row starts too (the chunked sums find them in their
// packing kernel instead). Ix: int64_t, or int32_t for the packed gather's indices.
template <class Ix>
Status build_radix_rows(const Ix* idx, int64_t B, int64_t N, int64_t P, int64_t T, bool row_starts,
                        RadixRows* rows, KernelChecks checks, cudaStream_t s) {
  const uint32_t entries = static_cast<uint32_t>(B * P * T), targets = static_cast<uint32_t>(B * N);
  if (entries > 0) {
    target_keys_kernel<Ix><<<grid_for(entries, 256), 256, 0, s>>>(
        idx, static_cast<uint32_t>(N), targets, static_cast<uint32_t>(P * T), entries, rows->keys.Current(),
        rows->vals.Current(), checks);
    if (Status st = launch_status()) return st;
    size_t bytes = rows->temp_bytes;
    cudaError_t err = cub::DeviceRadixSort::SortPairs(rows->temp, bytes, rows->keys, rows->vals,
                                                      static_cast<int>(entries), 0, rows->end_bit, s);
    if (err != cudaSuccess) return cudaGetErrorString(err);
  }
  if (row_starts) {
    sorted_row_starts_kernel<><<<grid_for(int64_t{targets} + 1, 256), 256, 0, s>>>(
        rows->keys.Current(), entries, targets, rows->row_start);
    return launch_status();
  }
  return nullptr;
}

}  // namespace cuda_detail
}  // namespace pointops
