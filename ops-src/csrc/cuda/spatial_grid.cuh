// A uniform grid over each cloud, built by counting sort, for the neighbour searches on large
// clouds (ball query and kNN), padded or packed (CloudRows). Float accumulation only
// (float32/float16/bfloat16 points), and fewer than 2^31 rows so that positions fit int32.
// Cloud b owns the count slots cell_base(b) .. + capacity(b): 2 cells per row it may hold, plus
// 8 (so a tiny cloud still gets a few), plus the end sentinel.
//
// Build: per-cloud bounding box -> cell size and dims -> count points per cell -> exclusive scan
// -> scatter the points, cell by cell, into `sorted` as (x, y, z, index bits). The points of the
// cells (x0..x1, y, z) are then one contiguous run of `sorted`.
#pragma once

#include <cub/device/device_scan.cuh>

#include "common.cuh"

namespace pointops {
namespace cuda_detail {

struct GridParams {
  float lo[3];
  double inv_cell;  // binning in double keeps a point and a query on the same side of a border
  float cell;
  int dims[3];
};

struct SpatialGrid {
  GridParams* params;  // [B]
  int* min_bits;       // [B*3] ordered-int bounding box
  int* max_bits;       // [B*3]
  int* counts;         // [slots], then reused as fill cursors
  int* cell_start;     // [slots] global positions into sorted
  int* point_cell;     // [rows]
  float4* sorted;      // [rows]: x, y, z and the index written out (local padded, global packed)
  void* scan_temp;
  size_t scan_temp_bytes;
  int64_t slots;
  size_t bytes;
};

// Cells cloud b may use, and the first of its count slots.
__device__ __forceinline__ int64_t grid_capacity(const CloudRows& clouds, int64_t b) {
  return 2 * (clouds.is_packed() ? clouds.count(b) : clouds.N) + 8;
}
__device__ __forceinline__ int64_t grid_cell_base(const CloudRows& clouds, int64_t b) {
  return 2 * clouds.begin(b) + 9 * b;
}

// The neighbour searches' paths, chosen from the sizes alone: the uniform grid from
// `min_points` points per cloud (float accumulation, and B*N < 2^31 so positions fit int32;
// the GridMinPoints knob overrides the threshold), else the tiled scan of tiled_scan.cuh.
enum NeighbourPath : int32_t { kTiledScan = 0, kUniformGrid = 1 };

inline NeighbourPath neighbour_path(Dtype dt, int64_t B, int64_t N, int64_t M, int64_t min_points) {
  const int64_t threshold = tuning_or(Knob::GridMinPoints, min_points);
  const bool grid = dt != Dtype::Float64 && N >= threshold && B * N < (int64_t{1} << 31) && M > 0;
  return grid ? kUniformGrid : kTiledScan;
}

// Packed clouds take the grid for float accumulation (no per-cloud sizes on the host to
// choose by) and a plain scan of the cloud per query otherwise (float64, or 2^31 rows or more).
enum PackedPath : int32_t { kPackedScan = 0, kPackedGrid = 1 };

inline PackedPath packed_path(Dtype dt, int64_t P) {
  return dt != Dtype::Float64 && P < (int64_t{1} << 31) ? kPackedGrid : kPackedScan;
}

// Carves the grid's arrays for B clouds of `rows` rows in all from `base` (null: only sizes them).
inline SpatialGrid carve_grid(void* base, int64_t B, int64_t rows) {
  SpatialGrid g;
  const int64_t slots = 2 * rows + 9 * B;
  g.slots = slots;
  WorkspaceCarver carve(base);
  g.params = carve.take<GridParams>(static_cast<size_t>(B));
  g.min_bits = carve.take<int>(static_cast<size_t>(B * 3));
  g.max_bits = carve.take<int>(static_cast<size_t>(B * 3));
  g.counts = carve.take<int>(static_cast<size_t>(slots));
  g.cell_start = carve.take<int>(static_cast<size_t>(slots));
  g.point_cell = carve.take<int>(static_cast<size_t>(rows));
  g.sorted = carve.take<float4>(static_cast<size_t>(rows));
  size_t scan_bytes = 0;
  cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, g.counts, g.cell_start, slots);
  g.scan_temp_bytes = scan_bytes;
  g.scan_temp = carve.take<char>(scan_bytes);
  g.bytes = carve.used();
  return g;
}

// Monotonic map between floats and signed ints, for atomicMin/atomicMax on floats.
__device__ __forceinline__ int ordered_bits(float f) {
  const int i = __float_as_int(f);
  return i >= 0 ? i : i ^ 0x7fffffff;
}
__device__ __forceinline__ float from_ordered_bits(int i) {
  return __int_as_float(i >= 0 ? i : i ^ 0x7fffffff);
}

template <class T>
__global__ void grid_bbox_kernel(const T* __restrict__ xyz, CloudRows clouds, int* min_bits, int* max_bits) {
  for (int64_t b = blockIdx.y; b < clouds.B; b += gridDim.y) {
    const int64_t n = clouds.count(b), first = clouds.begin(b);
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < n;
         j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
#pragma unroll
      for (int a = 0; a < 3; ++a) {
        const float v = to_acc(xyz[(first + j) * 3 + a]);
        lo[a] = fminf(lo[a], v);
        hi[a] = fmaxf(hi[a], v);
      }
    }
#pragma unroll
    for (int a = 0; a < 3; ++a) {
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1) {
        lo[a] = fminf(lo[a], __shfl_xor_sync(0xffffffffu, lo[a], offset));
        hi[a] = fmaxf(hi[a], __shfl_xor_sync(0xffffffffu, hi[a], offset));
      }
    }
    if ((threadIdx.x & 31) == 0 && lo[0] <= hi[0]) {
#pragma unroll
      for (int a = 0; a < 3; ++a) {
        atomicMin(&min_bits[b * 3 + a], ordered_bits(lo[a]));
        atomicMax(&max_bits[b * 3 + a], ordered_bits(hi[a]));
      }
    }
  }
}

// Cell size: at least `min_cell` (the radius, for ball query) and at least what gives about
// `points_per_cell` points per cell on a uniform cloud; grown until the cells fit the capacity.
static __global__ void grid_params_kernel(CloudRows clouds, const int* min_bits, const int* max_bits,
                                          float min_cell, float points_per_cell, GridParams* params) {
  const int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (b >= clouds.B) return;
  const int64_t n = clouds.count(b);
  const int64_t capacity = grid_capacity(clouds, b);
  GridParams g;
  float ext[3], longest = 0.f;
  for (int a = 0; a < 3; ++a) {
    float lo = from_ordered_bits(min_bits[b * 3 + a]);
    float hi = from_ordered_bits(max_bits[b * 3 + a]);
    if (n == 0 || !(lo <= hi) || !isfinite(lo) || !isfinite(hi)) lo = hi = 0.f;
    g.lo[a] = lo;
    ext[a] = hi - lo;
    longest = fmaxf(longest, ext[a]);
  }
  double cell = static_cast<double>(min_cell) * 1.001;  // margin for rounding near borders
  if (points_per_cell > 0.f && n > 0) {
    double volume = 1.0;
    for (int a = 0; a < 3; ++a) volume *= fmax(static_cast<double>(ext[a]), longest * 1e-3 + 1e-30);
    cell = fmax(cell, cbrt(volume * points_per_cell / static_cast<double>(n)));
  }
  cell = fmax(cell, longest / 1024.0);
  cell = fmax(cell, 1e-30);
  for (;;) {
    int64_t total = 1;
    for (int a = 0; a < 3; ++a) {
      const double d = floor(ext[a] / cell) + 1.0;
      g.dims[a] = static_cast<int>(d < 2048.0 ? d : 2048.0);
      total *= g.dims[a];
    }
    if (total <= capacity) break;
    cell *= 1.25;
  }
  g.cell = static_cast<float>(cell);
  g.inv_cell = 1.0 / cell;
  params[b] = g;
}

__device__ __forceinline__ int cell_coord(const GridParams& g, int a, float v) {
  double u = (static_cast<double>(v) - g.lo[a]) * g.inv_cell;
  u = floor(u);
  if (!(u >= 0.0)) return 0;  // also NaN
  if (u > g.dims[a] - 1) return g.dims[a] - 1;
  return static_cast<int>(u);
}

__device__ __forceinline__ int cell_index(const GridParams& g, int x, int y, int z) {
  return (z * g.dims[1] + y) * g.dims[0] + x;
}

// The cloud of row e, or -1 when the row is padding (or no cloud's, packed).
__device__ __forceinline__ int64_t grid_cloud_of(const CloudRows& clouds, int64_t e) {
  const int64_t b = clouds.cloud_of(e);
  if (b < 0 || clouds.is_packed()) return b;
  return e - b * clouds.N < clouds.count(b) ? b : -1;
}

template <class T>
__global__ void grid_count_kernel(const T* __restrict__ xyz, CloudRows clouds,
                                  const GridParams* __restrict__ params, int* counts, int* point_cell) {
  const int64_t total = clouds.total_rows();
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = grid_cloud_of(clouds, e);
    if (b < 0) continue;
    const GridParams g = params[b];
    const int c =
        cell_index(g, cell_coord(g, 0, to_acc(xyz[e * 3])), cell_coord(g, 1, to_acc(xyz[e * 3 + 1])),
                   cell_coord(g, 2, to_acc(xyz[e * 3 + 2])));
    point_cell[e] = c;
    atomicAdd(&counts[grid_cell_base(clouds, b) + c], 1);
  }
}

template <class T>
__global__ void grid_scatter_kernel(const T* __restrict__ xyz, CloudRows clouds,
                                    const int* __restrict__ point_cell, const int* __restrict__ cell_start,
                                    int* cursor, float4* __restrict__ sorted) {
  const int64_t total = clouds.total_rows();
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = grid_cloud_of(clouds, e);
    if (b < 0) continue;
    const int64_t slot = grid_cell_base(clouds, b) + point_cell[e];
    const int pos = cell_start[slot] + atomicAdd(&cursor[slot], 1);
    const int64_t written = clouds.is_packed() ? e : e - b * clouds.N;  // the index outputs carry
    sorted[pos] = make_float4(to_acc(xyz[e * 3]), to_acc(xyz[e * 3 + 1]), to_acc(xyz[e * 3 + 2]),
                              __int_as_float(static_cast<int>(written)));
  }
}

// Builds the grid of every cloud on stream s.
template <class T>
Status build_grid(const SpatialGrid& g, const T* xyz, const CloudRows& clouds, float min_cell,
                  float points_per_cell, cudaStream_t s) {
  const int64_t B = clouds.B, rows = clouds.total_rows();
  const size_t slots = static_cast<size_t>(g.slots);
  cudaError_t err = cudaMemsetAsync(g.min_bits, 0x7f, static_cast<size_t>(B * 3) * sizeof(int), s);
  if (err == cudaSuccess) {
    err = cudaMemsetAsync(g.max_bits, 0x80, static_cast<size_t>(B * 3) * sizeof(int), s);
  }
  if (err == cudaSuccess) err = cudaMemsetAsync(g.counts, 0, slots * sizeof(int), s);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  const unsigned int by = static_cast<unsigned int>(B < 65535 ? B : 65535);
  const int64_t chunks = ceil_div(ceil_div(rows, B > 0 ? B : 1), 256 * 8);  // for the average cloud
  const unsigned int bx = static_cast<unsigned int>(chunks < 1024 ? (chunks < 1 ? 1 : chunks) : 1024);
  grid_bbox_kernel<T><<<dim3(bx, by), 256, 0, s>>>(xyz, clouds, g.min_bits, g.max_bits);
  grid_params_kernel<<<grid_for(B, 128), 128, 0, s>>>(clouds, g.min_bits, g.max_bits, min_cell,
                                                      points_per_cell, g.params);
  grid_count_kernel<T><<<grid_for(rows, 256), 256, 0, s>>>(xyz, clouds, g.params, g.counts, g.point_cell);
  if (Status st = launch_status()) return st;
  size_t bytes = g.scan_temp_bytes;
  err = cub::DeviceScan::ExclusiveSum(g.scan_temp, bytes, g.counts, g.cell_start, static_cast<int64_t>(slots),
                                      s);
  if (err == cudaSuccess) err = cudaMemsetAsync(g.counts, 0, slots * sizeof(int), s);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  grid_scatter_kernel<T>
      <<<grid_for(rows, 256), 256, 0, s>>>(xyz, clouds, g.point_cell, g.cell_start, g.counts, g.sorted);
  return launch_status();
}

}  // namespace cuda_detail
}  // namespace pointops
