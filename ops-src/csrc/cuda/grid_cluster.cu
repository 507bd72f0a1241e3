// grid_cluster on CUDA (kernels.h): at most two launches, no host synchronization and, past a
// few points, no memory besides the ids.
// When start or end is missing, grid_bounds_kernel reduces pos to per-block column minima and
// maxima, one partial per block: no atomics, so no buffer to clear first (that would be a third
// launch). Every block of grid_ids_kernel then finishes that reduction itself (a few hundred
// partials per column, read from L2), derives the cells and x-fastest strides into shared
// memory and writes the ids of its points. Subtraction and division round as torch's do (no
// fast math), so the ids equal those of the torch expression the op replaces.
// The partials live in the first bytes of the ids themselves (a workspace allocation costs as
// much host time as the kernels take): every id block skips those rows, and the block that reads
// the partials last, counted by a ticket the bounds kernel zeroes, writes them. Clouds too small
// to hold the partials take a workspace.
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
// and writes part_lo / part_hi [gridDim.x, D] row x; block (0, 0) zeroes the ids kernel's ticket.
template <class T>
__global__ void __launch_bounds__(kThreads)
    grid_bounds_kernel(const T* __restrict__ pos, int64_t N, int64_t D, T* __restrict__ part_lo,
                       T* __restrict__ part_hi, unsigned int* __restrict__ ticket) {
  __shared__ T lo_s[kThreads];
  __shared__ T hi_s[kThreads];
  if (ticket != nullptr && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *ticket = 0;
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

// Rows each thread of the id kernel has in flight at once.
constexpr int kRowsPerPass = 4;

// The id of one row of pos; ok: whether the grid is good. kD > 0: D known when compiling (the
// loop unrolls), 0: D as given.
template <int kD, class T>
__device__ __forceinline__ int64_t voxel_id(const T* __restrict__ row, int64_t D, const T* origin,
                                            const T* size, const uint64_t* stride, bool ok) {
  const int64_t dims = kD > 0 ? kD : D;
  uint64_t id = 0;
#pragma unroll
  for (int64_t d = 0; d < dims; ++d) {
    uint64_t cell = 0;
    ok = truncate_to_int64((row[d] - origin[d]) / size[d], &cell) && ok;
    id += cell * stride[d];
  }
  return ok ? static_cast<int64_t>(id) : kPoisonIndex;
}

// part_lo / part_hi / ticket may live in out's first `reserved` rows (no __restrict__ on them):
// those rows are written by the block that takes the last ticket, after every block has read
// the partials.
template <int kD, class T>
__global__ void __launch_bounds__(kThreads)
    grid_ids_kernel(const T* __restrict__ pos, int64_t N, int64_t D, const T* __restrict__ size,
                    const T* __restrict__ start, const T* __restrict__ end, const T* part_lo,
                    const T* part_hi, int64_t parts, unsigned int* ticket, int64_t reserved, int64_t* out) {
  uint64_t* stride_s = reinterpret_cast<uint64_t*>(grid_smem);
  T* origin_s = reinterpret_cast<T*>(stride_s + D);
  T* size_s = origin_s + D;
  T* extent_s = size_s + D;
  T* lo_s = extent_s + D;
  T* hi_s = lo_s + kThreads;
  __shared__ int bad_s;
  __shared__ bool last_s;
  if (threadIdx.x == 0) bad_s = 0;

  if (start == nullptr || end == nullptr) {  // finish the bounds kernel's reduction
    const ColumnLayout L(D);
    for (int64_t c0 = 0; c0 < D; c0 += L.width) {
      const int64_t col = c0 + L.col;
      T lo = acc_inf<T>(), hi = -acc_inf<T>();
      if (L.active && col < D) {
#pragma unroll 8
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
  __syncthreads();  // bad_s; every thread's partials are read
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
    last_s = ticket != nullptr && atomicAdd(ticket, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  const bool ok = bad_s == 0;  // a bad grid parameter poisons every id

  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; base < N;
       base += kRowsPerPass * step) {
    int64_t ids[kRowsPerPass];
#pragma unroll
    for (int r = 0; r < kRowsPerPass; ++r) {
      const int64_t i = base + r * step;
      ids[r] = i < N ? voxel_id<kD>(pos + i * D, D, origin_s, size_s, stride_s, ok) : 0;
    }
#pragma unroll
    for (int r = 0; r < kRowsPerPass; ++r) {
      const int64_t i = base + r * step;
      if (i < N && i >= reserved) out[i] = ids[r];
    }
  }
  if (last_s) {
    for (int64_t i = threadIdx.x; i < reserved; i += blockDim.x)
      out[i] = voxel_id<kD>(pos + i * D, D, origin_s, size_s, stride_s, ok);
  }
}

// Where the bounds kernel's partials go (CudaPlan::path).
enum GridPath : int32_t { kGivenBounds = 0, kPartialsInWorkspace = 1, kPartialsInIds = 2 };

// Bytes of the ticket and both partial arrays, laid out from `base` (out or the workspace).
constexpr size_t kTicketBytes = 16;
template <class T>
size_t partials_bytes(int64_t parts, int64_t D) {
  return kTicketBytes + 2 * static_cast<size_t>(parts * D) * sizeof(T);
}

template <int kD, class T>
void launch_ids(const CudaPlan& plan, const T* pos, const T* size, const T* start, const T* end, int64_t N,
                int64_t D, const T* part_lo, const T* part_hi, unsigned int* ticket, int64_t* out,
                cudaStream_t s) {
  grid_ids_kernel<kD, T>
      <<<static_cast<unsigned int>(plan.shape[0]), kThreads, grid_ids_smem_bytes<T>(D), s>>>(
          pos, N, D, size, start, end, part_lo, part_hi, plan.shape[1], ticket, plan.shape[3], out);
}

template <class T>
Status launch_grid_cluster(const CudaPlan& plan, const T* pos, const T* size, const T* start, const T* end,
                           int64_t N, int64_t D, int64_t* out, void* workspace, cudaStream_t s) {
  const int64_t parts = plan.shape[1];
  T* part_lo = nullptr;
  T* part_hi = nullptr;
  unsigned int* ticket = nullptr;
  if (plan.path != kGivenBounds) {
    char* base = static_cast<char*>(plan.path == kPartialsInIds ? static_cast<void*>(out) : workspace);
    part_lo = reinterpret_cast<T*>(base + kTicketBytes);
    part_hi = part_lo + parts * D;
    if (plan.path == kPartialsInIds) ticket = reinterpret_cast<unsigned int*>(base);
    const dim3 grid(static_cast<unsigned int>(parts), static_cast<unsigned int>(plan.shape[2]));
    grid_bounds_kernel<T><<<grid, kThreads, 0, s>>>(pos, N, D, part_lo, part_hi, ticket);
    if (const Status st = launch_status()) return st;
  }
  if (D == 3)
    launch_ids<3>(plan, pos, size, start, end, N, D, part_lo, part_hi, ticket, out, s);
  else
    launch_ids<0>(plan, pos, size, start, end, N, D, part_lo, part_hi, ticket, out, s);
  return launch_status();
}

}  // namespace

// path: GridPath. shape[0]: blocks of the id kernel; shape[1]: blocks (partials) of the bounds
// kernel, 0 when start and end are given; shape[2]: its column chunks; shape[3]: rows of the ids
// that hold the partials (kPartialsInIds), else 0.
CudaPlan grid_cluster_cuda_plan(Dtype dt, int64_t N, int64_t D, bool need_bounds) {
  CudaPlan plan;
  const int64_t sms = current_device_sm_count();
  // 8 blocks of 256 threads fill an SM; more blocks would only repeat the prologue
  plan.shape[0] = grid_for(N, kThreads, 8 * sms);
  plan.path = kGivenBounds;
  if (!need_bounds || N <= 0 || D <= 0) return plan;
  const int64_t width = D < kThreads ? D : kThreads, lanes = kThreads / width;
  int64_t parts = ceil_div(N, lanes * kRowsPerBoundsThread);
  if (parts > 4 * sms) parts = 4 * sms;
  plan.shape[1] = parts;
  plan.shape[2] = ceil_div(D, width);
  const size_t bytes =
      dt == Dtype::Float64 ? partials_bytes<double>(parts, D) : partials_bytes<float>(parts, D);
  if (bytes <= static_cast<size_t>(N) * sizeof(int64_t)) {
    plan.path = kPartialsInIds;
    plan.shape[3] = ceil_div(static_cast<int64_t>(bytes), sizeof(int64_t));
  } else {
    plan.path = kPartialsInWorkspace;
    plan.workspace_bytes = align_up(bytes);
  }
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
