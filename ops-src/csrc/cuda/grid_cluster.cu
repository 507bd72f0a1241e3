// grid_cluster on CUDA (kernels.h): at most two launches and no host synchronization.
// When start or end is missing, grid_bounds_kernel reduces pos to per-block column minima and
// maxima, one partial per block: no atomics, so no buffer to clear first (that would be a third
// launch). Every block of grid_ids_kernel then finishes that reduction itself (a few hundred
// partials per column, read from L2), derives the cells and x-fastest strides into shared
// memory and writes the ids of its points. Subtraction and division round as torch's do (no
// fast math), so the ids equal those of the torch expression the op replaces.
#include "common.cuh"

namespace pointops {

using namespace cuda_detail;

namespace {

constexpr int kThreads = 256;
// Rows each thread of the bounds kernel reads at least (fewer partials for the id kernel to merge).
constexpr int64_t kRowsPerBoundsThread = 8;

// torch.min / torch.max: a NaN wins.
template <class T>
__device__ __forceinline__ T nan_min(T a, T b) {
  return (b < a || b != b) ? b : a;
}
template <class T>
__device__ __forceinline__ T nan_max(T a, T b) {
  return (b > a || b != b) ? b : a;
}

// trunc(q) as int64 like torch's .to(torch.long) (cvt.rzi), as uint64 for the wrapping
// arithmetic; false for NaN, +-inf and |q| >= 2^63.
template <class T>
__device__ __forceinline__ bool truncate_to_int64(T q, uint64_t* out) {
  const T limit = static_cast<T>(9223372036854775808.0);  // 2^63, exact in float and double
  if (!(q >= -limit && q < limit)) {
    *out = 0;
    return false;
  }
  *out = static_cast<uint64_t>(static_cast<int64_t>(q));
  return true;
}

// A block's threads as a [lanes, width] matrix over a chunk of `width` columns: each thread
// keeps one column, so pos is read row by row, coalesced, and reductions run over the lanes.
struct ColumnLayout {
  int width, lanes, col, lane;
  bool active;  // lane < lanes (the last threads idle when kThreads is not a multiple of width)
  __device__ explicit ColumnLayout(int64_t D) {
    width = D < kThreads ? static_cast<int>(D) : kThreads;
    lanes = kThreads / width;
    col = static_cast<int>(threadIdx.x) % width;
    lane = static_cast<int>(threadIdx.x) / width;
    active = lane < lanes;
  }
};

// Reduces (lo, hi) over the lanes of each column; lane 0 of column c finds the result at
// lo_s[c], hi_s[c]. Every thread of the block calls it.
template <class T>
__device__ void reduce_lanes(const ColumnLayout& L, T lo, T hi, T* lo_s, T* hi_s) {
  lo_s[threadIdx.x] = lo;
  hi_s[threadIdx.x] = hi;
  __syncthreads();
  int s = 1;
  while (s < L.lanes) s <<= 1;
  for (s >>= 1; s > 0; s >>= 1) {
    if (L.active && L.lane < s && L.lane + s < L.lanes) {
      const int other = threadIdx.x + s * L.width;
      lo_s[threadIdx.x] = nan_min(lo_s[threadIdx.x], lo_s[other]);
      hi_s[threadIdx.x] = nan_max(hi_s[threadIdx.x], hi_s[other]);
    }
    __syncthreads();
  }
}

// Partial bounds: block (x, y) covers columns y*width .. of the rows x*lanes + lane + k*gridDim.x*lanes
// and writes part_lo / part_hi [gridDim.x, D] row x.
template <class T>
__global__ void __launch_bounds__(kThreads)
    grid_bounds_kernel(const T* __restrict__ pos, int64_t N, int64_t D, T* __restrict__ part_lo,
                       T* __restrict__ part_hi) {
  __shared__ T lo_s[kThreads];
  __shared__ T hi_s[kThreads];
  const ColumnLayout L(D);
  const int64_t col = static_cast<int64_t>(blockIdx.y) * L.width + L.col;
  T lo = acc_inf<T>(), hi = -acc_inf<T>();
  if (L.active && col < D) {
    const int64_t step = static_cast<int64_t>(gridDim.x) * L.lanes;
#pragma unroll 8
    for (int64_t r = static_cast<int64_t>(blockIdx.x) * L.lanes + L.lane; r < N; r += step) {
      const T v = pos[r * D + col];
      lo = nan_min(lo, v);
      hi = nan_max(hi, v);
    }
  }
  reduce_lanes(L, lo, hi, lo_s, hi_s);
  if (L.active && L.lane == 0 && col < D) {
    part_lo[static_cast<int64_t>(blockIdx.x) * D + col] = lo_s[threadIdx.x];
    part_hi[static_cast<int64_t>(blockIdx.x) * D + col] = hi_s[threadIdx.x];
  }
}

extern __shared__ __align__(16) unsigned char grid_smem[];

// Shared memory of grid_ids_kernel: stride [D] uint64, origin [D], size [D], extent [D] (end, then
// the cell count), and the reduction's lo / hi scratch [kThreads] each.
template <class T>
size_t grid_ids_smem_bytes(int64_t D) {
  return static_cast<size_t>(D) * (sizeof(uint64_t) + 3 * sizeof(T)) + 2 * kThreads * sizeof(T);
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    grid_ids_kernel(const T* __restrict__ pos, int64_t N, int64_t D, const T* __restrict__ size,
                    const T* __restrict__ start, const T* __restrict__ end, const T* __restrict__ part_lo,
                    const T* __restrict__ part_hi, int64_t parts, int64_t* __restrict__ out) {
  uint64_t* stride_s = reinterpret_cast<uint64_t*>(grid_smem);
  T* origin_s = reinterpret_cast<T*>(stride_s + D);
  T* size_s = origin_s + D;
  T* extent_s = size_s + D;
  T* lo_s = extent_s + D;
  T* hi_s = lo_s + kThreads;
  __shared__ int bad_s;
  if (threadIdx.x == 0) bad_s = 0;

  if (start == nullptr || end == nullptr) {  // finish the bounds kernel's reduction
    const ColumnLayout L(D);
    for (int64_t c0 = 0; c0 < D; c0 += L.width) {
      const int64_t col = c0 + L.col;
      T lo = acc_inf<T>(), hi = -acc_inf<T>();
      if (L.active && col < D) {
        for (int64_t g = L.lane; g < parts; g += L.lanes) {
          lo = nan_min(lo, part_lo[g * D + col]);
          hi = nan_max(hi, part_hi[g * D + col]);
        }
      }
      reduce_lanes(L, lo, hi, lo_s, hi_s);
      if (L.active && L.lane == 0 && col < D) {
        origin_s[col] = lo_s[threadIdx.x];
        extent_s[col] = hi_s[threadIdx.x];
      }
      __syncthreads();  // lo_s / hi_s are reused by the next chunk
    }
  }
  __syncthreads();  // bad_s
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    const T a = start != nullptr ? start[d] : origin_s[d];
    const T b = end != nullptr ? end[d] : extent_s[d];
    const T cell = size[d];
    uint64_t cells = 0;
    const bool ok =
        cell > 0 && isfinite(cell) && isfinite(a) && isfinite(b) && truncate_to_int64((b - a) / cell, &cells);
    if (!ok) bad_s = 1;
    origin_s[d] = a;
    size_s[d] = cell;
    stride_s[d] = cells + 1;
  }
  __syncthreads();
  if (threadIdx.x == 0) {  // exclusive prefix product, x fastest (D is small: serial is fine)
    uint64_t step = 1;
    for (int64_t d = 0; d < D; ++d) {
      const uint64_t cells = stride_s[d];
      stride_s[d] = step;
      step *= cells;
    }
  }
  __syncthreads();
  const bool bad = bad_s != 0;  // a bad grid parameter poisons every id

  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < N; i += step) {
    const T* row = pos + i * D;
    uint64_t id = 0;
    bool ok = !bad;
    for (int64_t d = 0; d < D; ++d) {
      uint64_t cell = 0;
      ok = truncate_to_int64((row[d] - origin_s[d]) / size_s[d], &cell) && ok;
      id += cell * stride_s[d];
    }
    out[i] = ok ? static_cast<int64_t>(id) : kPoisonIndex;
  }
}

template <class T>
Status launch_grid_cluster(const CudaPlan& plan, const T* pos, const T* size, const T* start, const T* end,
                           int64_t N, int64_t D, int64_t* out, void* workspace, cudaStream_t s) {
  const int64_t parts = plan.shape[1];
  T* part_lo = nullptr;
  T* part_hi = nullptr;
  if (parts > 0) {
    WorkspaceCarver carve(workspace);
    part_lo = carve.take<T>(static_cast<size_t>(parts * D));
    part_hi = carve.take<T>(static_cast<size_t>(parts * D));
    const dim3 grid(static_cast<unsigned int>(parts), static_cast<unsigned int>(plan.shape[2]));
    grid_bounds_kernel<T><<<grid, kThreads, 0, s>>>(pos, N, D, part_lo, part_hi);
    if (const Status st = launch_status()) return st;
  }
  grid_ids_kernel<T><<<static_cast<unsigned int>(plan.shape[0]), kThreads, grid_ids_smem_bytes<T>(D), s>>>(
      pos, N, D, size, start, end, part_lo, part_hi, parts, out);
  return launch_status();
}

}  // namespace

// shape[0]: blocks of the id kernel; shape[1]: blocks (partials) of the bounds kernel, 0 when
// start and end are given; shape[2]: its column chunks.
CudaPlan grid_cluster_cuda_plan(Dtype dt, int64_t N, int64_t D, bool need_bounds) {
  CudaPlan plan;
  const int64_t sms = current_device_sm_count();
  // 8 blocks of 256 threads fill an SM; more blocks would only repeat the prologue
  plan.shape[0] = grid_for(N, kThreads, 8 * sms);
  if (need_bounds && N > 0 && D > 0) {
    const int64_t width = D < kThreads ? D : kThreads, lanes = kThreads / width;
    int64_t parts = ceil_div(N, lanes * kRowsPerBoundsThread);
    if (parts > 4 * sms) parts = 4 * sms;
    plan.shape[1] = parts;
    plan.shape[2] = ceil_div(D, width);
    const size_t bytes = static_cast<size_t>(parts * D) * (dt == Dtype::Float64 ? 8 : 4);
    plan.workspace_bytes = 2 * align_up(bytes);
  }
  plan.path = need_bounds ? 1 : 0;
  return plan;
}

Status grid_cluster_cuda(const CudaPlan& plan, Dtype dt, const void* pos, const void* size, const void* start,
                         const void* end, int64_t N, int64_t D, int64_t* out, void* workspace, void* stream) {
  if (N <= 0) return nullptr;
  if (D > kGridClusterMaxCudaDims) return "grid_cluster on CUDA takes at most 1024 dimensions";
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (dt) {
    case Dtype::Float32:
      return launch_grid_cluster(plan, static_cast<const float*>(pos), static_cast<const float*>(size),
                                 static_cast<const float*>(start), static_cast<const float*>(end), N, D, out,
                                 workspace, s);
    case Dtype::Float64:
      return launch_grid_cluster(plan, static_cast<const double*>(pos), static_cast<const double*>(size),
                                 static_cast<const double*>(start), static_cast<const double*>(end), N, D,
                                 out, workspace, s);
    default: return "grid_cluster takes float32 or float64 on CUDA";
  }
}

}  // namespace pointops
