// Row building for the gather backward (CUDA): a counting sort groups the (p,t) entries of
// idx by target point (count, scan, fill) and sorts each target's row into ascending (p,t)
// order, the order the contract sums in.
#pragma once

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
                             I* __restrict__ counts) {
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

}  // namespace cuda_detail
}  // namespace pointops
