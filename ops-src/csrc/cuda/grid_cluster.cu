// grid_cluster on CUDA (kernels.h): one launch, no host synchronization and, past a few points,
// no memory besides the ids (a workspace allocation costs as much host time as the kernels take;
// the op is bound by host time at PyG's shapes).
// With start and end given, grid_ids_kernel alone. Without, for up to kFusedMaxDims dimensions,
// grid_fused_kernel, one cooperative launch: every block reduces its rows to column minima and
// maxima in the first bytes of the ids, and after a grid-wide sync every block merges them (a
// few hundred partials, from L2), derives cells and x-fastest strides into shared memory and
// writes the ids of its rows; the rows that held the partials are written once every block has
// read them (a ticket). Where that cannot run (more dimensions, no cooperative launch, a tuning
// knob, or a cooperative launch the driver refuses at run time), two kernels:
// grid_bounds_kernel writes the partials (no atomics, so nothing to clear first) into the ids'
// first rows, which every id block skips and the block that reads them last writes, or, for
// clouds too small to hold them, a workspace.
// Subtraction and division round as torch's do (no fast math), so the ids equal those of the
// torch expression the op replaces. Bad values (size not finite and > 0, non-finite bounds or
// coordinates, end < start, a grid or an id beyond int64) are recorded for the host (kernels.h's
// InKernelChecks, one code per problem) and give kPoisonIndex for every point they affect; while
// a problem is recorded, by this call or an earlier one, ids may all be kPoisonIndex.
#include <cooperative_groups.h>

#include <atomic>

#include "../value_check_codes.h"
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

// trunc(q) as int64 like torch's .to(torch.long) (cvt.rzi); false for NaN, +-inf and
// |q| >= 2^63.
template <class T>
__device__ __forceinline__ bool truncate_to_int64(T q, int64_t* out) {
  const T limit = static_cast<T>(9223372036854775808.0);  // 2^63, exact in float and double
  if (!(q >= -limit && q < limit)) {
    *out = 0;
    return false;
  }
  *out = static_cast<int64_t>(q);
  return true;
}

// id += cell * stride (stride in 1 .. 2^63 - 1); false where the term or the sum would leave
// [-(2^63 - 1), 2^63 - 1] (INT64_MIN stays the poison).
__device__ __forceinline__ bool add_cell(int64_t cell, uint64_t stride, int64_t* id) {
  const uint64_t magnitude = cell < 0 ? 0 - static_cast<uint64_t>(cell) : static_cast<uint64_t>(cell);
  const uint64_t product = magnitude * stride;
  if (__umul64hi(magnitude, stride) != 0 || product > static_cast<uint64_t>(INT64_MAX)) return false;
  const int64_t term = cell < 0 ? -static_cast<int64_t>(product) : static_cast<int64_t>(product);
  if (term > 0 ? *id > INT64_MAX - term : *id < -INT64_MAX - term) return false;
  *id += term;
  return true;
}

constexpr int32_t grid_code(CheckedArg arg, Problem problem) {
  return check_code(CheckedOp::GridCluster, arg, problem);
}

// Records `code` (checks.device_code null: checks off) like the check kernel does.
__device__ __forceinline__ void report_grid(KernelChecks checks, int32_t code) {
  checks.code = code;
  checks.report();
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

// One block's partial bounds of the columns c0 .. c0 + width of the rows part*lanes + lane +
// k*parts*lanes, written to part_lo / part_hi [parts, D] row `part`.
template <class T>
__device__ void partial_bounds(const T* __restrict__ pos, int64_t N, int64_t D, int64_t c0, int64_t part,
                               int64_t parts, T* part_lo, T* part_hi, T* lo_s, T* hi_s) {
  const ColumnLayout L(D);
  const int64_t col = c0 + L.col;
  T lo = acc_inf<T>(), hi = -acc_inf<T>();
  if (L.active && col < D) {
    const int64_t step = parts * L.lanes;
#pragma unroll 8
    for (int64_t r = part * L.lanes + L.lane; r < N; r += step) {
      const T v = pos[r * D + col];
      lo = nan_min(lo, v);
      hi = nan_max(hi, v);
    }
  }
  reduce_lanes(L, lo, hi, lo_s, hi_s);
  if (L.active && L.lane == 0 && col < D) {
    part_lo[part * D + col] = lo_s[threadIdx.x];
    part_hi[part * D + col] = hi_s[threadIdx.x];
  }
  __syncthreads();  // lo_s / hi_s are reused by the caller
}

// Partial bounds, one launch for them: block (x, y) takes column chunk y, partial x; block
// (0, 0) zeroes the id kernel's ticket when there is one.
template <class T>
__global__ void __launch_bounds__(kThreads)
    grid_bounds_kernel(const T* __restrict__ pos, int64_t N, int64_t D, T* part_lo, T* part_hi,
                       unsigned int* ticket) {
  __shared__ T lo_s[kThreads];
  __shared__ T hi_s[kThreads];
  if (ticket != nullptr && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *ticket = 0;
  const int64_t width = D < kThreads ? D : kThreads;
  partial_bounds(pos, N, D, static_cast<int64_t>(blockIdx.y) * width, blockIdx.x, gridDim.x, part_lo, part_hi,
                 lo_s, hi_s);
}

extern __shared__ __align__(16) unsigned char grid_smem[];

// Shared memory of the id kernels: stride [D] uint64, origin [D], size [D], extent [D] (end, then
// the cell count), and the reduction's lo / hi scratch [kThreads] each.
template <class T>
size_t grid_ids_smem_bytes(int64_t D) {
  return static_cast<size_t>(D) * (sizeof(uint64_t) + 3 * sizeof(T)) + 2 * kThreads * sizeof(T);
}

// The grid's parameters in shared memory, derived by every block.
template <class T>
struct GridShared {
  uint64_t* stride;
  T *origin, *size, *extent, *lo, *hi;
  __device__ GridShared(int64_t D) {
    stride = reinterpret_cast<uint64_t*>(grid_smem);
    origin = reinterpret_cast<T*>(stride + D);
    size = origin + D;
    extent = size + D;
    lo = extent + D;
    hi = lo + kThreads;
  }
};

// Merges `parts` partial bounds into g.origin (minima) and g.extent (maxima).
template <class T>
__device__ void merge_partials(const GridShared<T>& g, const T* part_lo, const T* part_hi, int64_t parts,
                               int64_t D) {
  const ColumnLayout L(D);
  for (int64_t c0 = 0; c0 < D; c0 += L.width) {
    const int64_t col = c0 + L.col;
    T lo = acc_inf<T>(), hi = -acc_inf<T>();
    if (L.active && col < D) {
#pragma unroll 8
      for (int64_t p = L.lane; p < parts; p += L.lanes) {
        lo = nan_min(lo, part_lo[p * D + col]);
        hi = nan_max(hi, part_hi[p * D + col]);
      }
    }
    reduce_lanes(L, lo, hi, g.lo, g.hi);
    if (L.active && L.lane == 0 && col < D) {
      g.origin[col] = g.lo[threadIdx.x];
      g.extent[col] = g.hi[threadIdx.x];
    }
    __syncthreads();  // g.lo / g.hi are reused by the next chunk
  }
}

// Origin, cell size and x-fastest strides into g from start / end (or the merged bounds where
// they are null); whether the grid is good (sizes finite and > 0, finite bounds, end >= start,
// fewer cells than 2^63) and no problem was recorded before: when not, every id is poison. The
// block's first problem is recorded. Every thread of the block calls it; ticket: taken by thread
// 0 after the block has read everything it needs from global memory, *last set when it was the
// final one.
template <class T>
__device__ bool derive_grid(const GridShared<T>& g, const T* __restrict__ size, const T* __restrict__ start,
                            const T* __restrict__ end, int64_t D, const KernelChecks& checks,
                            unsigned int* ticket, bool* last) {
  __shared__ int problem_s;  // 0, or the code of a problem of the grid
  __shared__ bool poison_s;
  if (threadIdx.x == 0) {
    problem_s = 0;
    poison_s = checks.recorded();  // an earlier call's problem: every output is poison
  }
  __syncthreads();
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    const T a = start != nullptr ? start[d] : g.origin[d];
    const T b = end != nullptr ? end[d] : g.extent[d];
    const T cell = size[d];
    int64_t cells = 0;
    int32_t problem = 0;
    if (!(cell > 0 && isfinite(cell))) {
      problem = grid_code(CheckedArg::Size, Problem::OutOfRange);
    } else if (!isfinite(a)) {  // computed bounds are non-finite only where pos is
      problem = grid_code(start != nullptr ? CheckedArg::Start : CheckedArg::Pos, Problem::NotFinite);
    } else if (!isfinite(b)) {
      problem = grid_code(end != nullptr ? CheckedArg::End : CheckedArg::Pos, Problem::NotFinite);
    } else if (b < a) {
      problem = grid_code(CheckedArg::End, Problem::OutOfRange);
    } else if (!truncate_to_int64((b - a) / cell, &cells)) {
      problem = grid_code(CheckedArg::Size, Problem::Overflow);
    }
    if (problem != 0) problem_s = problem;  // any one of them
    g.origin[d] = a;
    g.size[d] = cell;
    g.stride[d] = static_cast<uint64_t>(cells) + 1;
  }
  __syncthreads();
  if (threadIdx.x == 0) {  // exclusive prefix product, x fastest (D is small: serial is fine)
    uint64_t step = 1;
    for (int64_t d = 0; d < D; ++d) {
      const uint64_t count = g.stride[d];
      g.stride[d] = step;
      if (count > static_cast<uint64_t>(INT64_MAX) / step) {
        if (problem_s == 0) problem_s = grid_code(CheckedArg::Size, Problem::Overflow);
        break;
      }
      step *= count;
    }
    if (problem_s != 0) report_grid(checks, problem_s);
    *last = ticket != nullptr && atomicAdd(ticket, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  return problem_s == 0 && !poison_s;
}

// Bytes before the partial arrays in the ids' first rows or a workspace (the ticket).
constexpr size_t kTicketBytes = 16;

// Rows each thread of the id kernels has in flight at once.
constexpr int kRowsPerPass = 4;

// The id of one row of pos (a problem of the row is recorded); ok: whether the grid is good.
// kD > 0: D known when compiling (the loop unrolls), 0: D as given.
template <int kD, class T>
__device__ __forceinline__ int64_t voxel_id(const T* __restrict__ row, int64_t D, const GridShared<T>& g,
                                            bool ok, const KernelChecks& checks) {
  const int64_t dims = kD > 0 ? kD : D;
  int64_t id = 0;
  bool fits = true, finite = true;
#pragma unroll
  for (int64_t d = 0; d < dims; ++d) {
    const T v = row[d];
    int64_t cell = 0;
    if (truncate_to_int64((v - g.origin[d]) / g.size[d], &cell)) {
      fits = add_cell(cell, g.stride[d], &id) && fits;
    } else {
      finite = finite && isfinite(v);
      fits = false;
    }
  }
  if (ok && !fits)  // (a bad grid was recorded once per block)
    report_grid(checks, grid_code(CheckedArg::Pos, finite ? Problem::Overflow : Problem::NotFinite));
  return ok && fits ? id : kPoisonIndex;
}

// out[i] for the rows first, first + step, ... in [begin, end), kRowsPerPass of them in flight.
template <int kD, class T>
__device__ void write_ids(const T* __restrict__ pos, int64_t D, const GridShared<T>& g, bool ok,
                          const KernelChecks& checks, int64_t begin, int64_t end, int64_t first, int64_t step,
                          int64_t* out) {
  for (int64_t base = first; base < end; base += kRowsPerPass * step) {
    int64_t ids[kRowsPerPass];
#pragma unroll
    for (int r = 0; r < kRowsPerPass; ++r) {
      const int64_t i = base + r * step;
      ids[r] = i < end ? voxel_id<kD>(pos + i * D, D, g, ok, checks) : 0;
    }
#pragma unroll
    for (int r = 0; r < kRowsPerPass; ++r) {
      const int64_t i = base + r * step;
      if (i < end && i >= begin) out[i] = ids[r];
    }
  }
}

// The ids after grid_bounds_kernel (or with start and end given: part_lo null). part_lo /
// part_hi / ticket may live in out's first `reserved` rows (no __restrict__ on them): every
// block skips those rows, and the block that takes the last ticket, when every block has read
// the partials, writes them.
template <int kD, class T>
__global__ void __launch_bounds__(kThreads)
    grid_ids_kernel(const T* __restrict__ pos, int64_t N, int64_t D, const T* __restrict__ size,
                    const T* __restrict__ start, const T* __restrict__ end, const T* part_lo,
                    const T* part_hi, int64_t parts, unsigned int* ticket, int64_t reserved, int64_t* out,
                    KernelChecks checks) {
  const GridShared<T> g(D);
  __shared__ bool last_s;
  if (start == nullptr || end == nullptr) merge_partials(g, part_lo, part_hi, parts, D);
  const bool ok = derive_grid(g, size, start, end, D, checks, ticket, &last_s);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  write_ids<kD>(pos, D, g, ok, checks, reserved, N,
                static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x, step, out);
  if (last_s) write_ids<kD>(pos, D, g, ok, checks, 0, reserved, threadIdx.x, blockDim.x, out);
}

// Bounds and ids in one cooperative launch (D <= kFusedMaxDims, all blocks co-resident): each
// block writes its partial bounds into out's first `reserved` rows (block 0 also zeroes a ticket
// there); after one grid-wide sync every block merges them, takes a ticket, and writes the ids of
// its rows past the reserved ones. A block that also owns reserved rows writes them last, once
// every block has taken its ticket (has read the partials); co-residency makes that wait safe,
// and it costs less than a second grid sync, since those blocks wait only after their own rows.
template <int kD, class T>
__global__ void __launch_bounds__(kThreads)
    grid_fused_kernel(const T* __restrict__ pos, int64_t N, int64_t D, const T* __restrict__ size,
                      const T* __restrict__ start, const T* __restrict__ end, int64_t reserved, int64_t* out,
                      KernelChecks checks) {
  const GridShared<T> g(D);
  unsigned int* ticket = reinterpret_cast<unsigned int*>(out);
  T* part_lo = reinterpret_cast<T*>(reinterpret_cast<char*>(out) + kTicketBytes);
  T* part_hi = part_lo + static_cast<int64_t>(gridDim.x) * D;
  if (blockIdx.x == 0 && threadIdx.x == 0) *ticket = 0;
  partial_bounds(pos, N, D, 0, blockIdx.x, gridDim.x, part_lo, part_hi, g.lo, g.hi);
  cooperative_groups::this_grid().sync();
  merge_partials(g, part_lo, part_hi, gridDim.x, D);
  __shared__ bool unused;
  const bool ok = derive_grid(g, size, start, end, D, checks, ticket, &unused);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  write_ids<kD>(pos, D, g, ok, checks, reserved, N, first, step, out);
  if (static_cast<int64_t>(blockIdx.x) * blockDim.x >= reserved) return;  // no reserved rows here
  if (threadIdx.x == 0) {
    while (atomicAdd(ticket, 0u) < gridDim.x) __nanosleep(64);
  }
  __syncthreads();
  write_ids<kD>(pos, D, g, ok, checks, 0, reserved < N ? reserved : N, first, step, out);
}

// How the bounds are found (CudaPlan::path).
enum GridPath : int32_t {
  kGivenBounds = 0,          // start and end given: the id kernel alone
  kPartialsInWorkspace = 1,  // two kernels, partials in a workspace (clouds too small for them)
  kPartialsInIds = 2,        // two kernels, partials in the ids' first rows (ticket)
  kFused = 3,                // one cooperative kernel, partials in the ids' first rows
};

// The fused kernel merges every block's partial: up to this many columns (one chunk).
constexpr int64_t kFusedMaxDims = 8;

// Per device: whether the driver has refused a cooperative launch of the fused kernel; the
// planner then plans the two kernels from the start.
constexpr int kRefusalDevices = 64;
std::atomic<bool>* fused_refused() {
  static std::atomic<bool> table[kRefusalDevices];
  return table;
}

bool fused_refused_here() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return device >= 0 && device < kRefusalDevices && fused_refused()[device].load(std::memory_order_relaxed);
}

// The two kernels' plan (bounds kernel, then ids) with at most max_parts partials: in the ids'
// first rows where they fit, else in a workspace.
void plan_two_kernels(int64_t N, int64_t D, size_t elem, int64_t max_parts, CudaPlan* plan) {
  const int64_t width = D < kThreads ? D : kThreads, lanes = kThreads / width;
  int64_t parts = ceil_div(N, lanes * kRowsPerBoundsThread);
  if (parts > max_parts) parts = max_parts;
  if (parts < 1) parts = 1;
  plan->shape[1] = parts;
  plan->shape[2] = ceil_div(D, width);
  const size_t bytes = kTicketBytes + 2 * static_cast<size_t>(parts * D) * elem;
  if (bytes <= static_cast<size_t>(N) * sizeof(int64_t)) {
    plan->path = kPartialsInIds;
    plan->shape[3] = ceil_div(static_cast<int64_t>(bytes), sizeof(int64_t));
  } else {
    plan->path = kPartialsInWorkspace;
    plan->workspace_bytes = align_up(bytes);
  }
}

template <int kD, class T>
Status launch_two_kernels(const CudaPlan& plan, const T* pos, const T* size, const T* start, const T* end,
                          int64_t N, int64_t D, int64_t* out, void* workspace, KernelChecks checks,
                          cudaStream_t s) {
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
  grid_ids_kernel<kD, T>
      <<<static_cast<unsigned int>(plan.shape[0]), kThreads, grid_ids_smem_bytes<T>(D), s>>>(
          pos, N, D, size, start, end, part_lo, part_hi, parts, ticket, plan.shape[3], out, checks);
  return launch_status();
}

// The fused kernel, or the two kernels where the driver refuses the cooperative launch (fewer
// blocks can be resident than planned for: another context or MPS client on the GPU, a forced
// grid). The planner left room in the ids for the two kernels' partials, so no workspace.
template <int kD, class T>
Status launch_fused(const CudaPlan& plan, const T* pos, const T* size, const T* start, const T* end,
                    int64_t N, int64_t D, int64_t* out, KernelChecks checks, cudaStream_t s) {
  int64_t reserved = plan.shape[3];
  void* args[] = {&pos, &N, &D, &size, &start, &end, &reserved, &out, &checks};
  const cudaError_t err = cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(grid_fused_kernel<kD, T>),
                                                      dim3(static_cast<unsigned int>(plan.shape[0])),
                                                      dim3(kThreads), args, grid_ids_smem_bytes<T>(D), s);
  if (err != cudaErrorCooperativeLaunchTooLarge && err != cudaErrorNotSupported) return status_of(err);
  cudaGetLastError();  // a refused launch is not a sticky error
  int device = 0;      // remembered unless a test forced the grid
  if (tuning(Knob::GridClusterFusedBlocks) <= 0 && cudaGetDevice(&device) == cudaSuccess && device >= 0 &&
      device < kRefusalDevices)
    fused_refused()[device].store(true, std::memory_order_relaxed);
  CudaPlan fallback = plan;
  const int64_t fit = (N * static_cast<int64_t>(sizeof(int64_t)) - static_cast<int64_t>(kTicketBytes)) /
                      (2 * D * static_cast<int64_t>(sizeof(T)));
  const int64_t most = 4 * int64_t{current_device_sm_count()};
  plan_two_kernels(N, D, sizeof(T), fit < most ? fit : most, &fallback);
  if (fallback.path != kPartialsInIds) return "grid_cluster: the cooperative launch was refused";
  return launch_two_kernels<kD>(fallback, pos, size, start, end, N, D, out, nullptr, checks, s);
}

template <int kD, class T>
Status launch_grid_path(const CudaPlan& plan, const T* pos, const T* size, const T* start, const T* end,
                        int64_t N, int64_t D, int64_t* out, void* workspace, KernelChecks checks,
                        cudaStream_t s) {
  if (plan.path == kFused) return launch_fused<kD>(plan, pos, size, start, end, N, D, out, checks, s);
  return launch_two_kernels<kD>(plan, pos, size, start, end, N, D, out, workspace, checks, s);
}

template <class T>
Status launch_grid_cluster(const CudaPlan& plan, const T* pos, const T* size, const T* start, const T* end,
                           int64_t N, int64_t D, int64_t* out, void* workspace, KernelChecks checks,
                           cudaStream_t s) {
  if (D == 3) return launch_grid_path<3>(plan, pos, size, start, end, N, D, out, workspace, checks, s);
  return launch_grid_path<0>(plan, pos, size, start, end, N, D, out, workspace, checks, s);
}

// Blocks of grid_fused_kernel that can be resident at once on the current device (0: none, or
// no cooperative launch), for D <= kFusedMaxDims; cached per device and dtype.
template <class T>
int64_t fused_resident_blocks() {
  constexpr int kCachedDevices = 64;
  static std::atomic<int64_t> cache[kCachedDevices];  // 0: not read yet, -1: none
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  if (device >= 0 && device < kCachedDevices) {
    const int64_t known = cache[device].load(std::memory_order_relaxed);
    if (known != 0) return known > 0 ? known : 0;
  }
  int per_sm = 0;
  const bool cooperative = current_device_attribute<cudaDevAttrCooperativeLaunch>() != 0;
  // the two kernel variants use the same registers within a few; the smaller count is kept
  int per_sm_other = 0;
  if (!cooperative ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, grid_fused_kernel<3, T>, kThreads,
                                                    grid_ids_smem_bytes<T>(kFusedMaxDims)) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_other, grid_fused_kernel<0, T>, kThreads,
                                                    grid_ids_smem_bytes<T>(kFusedMaxDims)) != cudaSuccess) {
    cudaGetLastError();
    per_sm = 0;
  }
  if (per_sm_other < per_sm) per_sm = per_sm_other;
  const int64_t blocks = static_cast<int64_t>(per_sm) * current_device_sm_count();
  if (device >= 0 && device < kCachedDevices) cache[device].store(blocks > 0 ? blocks : -1);
  return blocks;
}

}  // namespace

// path: GridPath. shape[0]: blocks of the id (or fused) kernel; shape[1]: blocks (partials) of
// the bounds kernel of the two-kernel paths, else 0; shape[2]: its column chunks; shape[3]:
// rows of the ids that hold the ticket and partials (kPartialsInIds, kFused), else 0.
CudaPlan grid_cluster_cuda_plan(Dtype dt, int64_t N, int64_t D, bool need_bounds) {
  CudaPlan plan;
  const int64_t sms = current_device_sm_count();
  // 8 blocks of 256 threads fill an SM; more blocks would only repeat the prologue
  plan.shape[0] = grid_for(N, kThreads, 8 * sms);
  plan.path = kGivenBounds;
  if (!need_bounds || N <= 0 || D <= 0) return plan;
  const size_t elem = dt == Dtype::Float64 ? sizeof(double) : sizeof(float);
  const size_t id_bytes = static_cast<size_t>(N) * sizeof(int64_t);
  const int64_t forced_blocks = tuning(Knob::GridClusterFusedBlocks);
  if (D <= kFusedMaxDims && tuning(Knob::GridClusterTwoKernels) != 1 &&
      (forced_blocks > 0 || !fused_refused_here())) {
    // every block merges every partial: a few hundred at most, each thread's rows in flight
    int64_t blocks = grid_for(ceil_div(N, kRowsPerPass), kThreads, 4 * sms);
    const int64_t resident =
        dt == Dtype::Float64 ? fused_resident_blocks<double>() : fused_resident_blocks<float>();
    if (blocks > resident) blocks = resident;
    if (forced_blocks > 0 && resident > 0) blocks = forced_blocks;
    // The ids also hold the two kernels' partials and ticket, should the launch be refused.
    const size_t reserved_bytes = kTicketBytes + 2 * static_cast<size_t>(blocks * D) * elem;
    if (blocks > 0 && blocks <= INT32_MAX && reserved_bytes <= id_bytes) {
      plan.path = kFused;
      plan.shape[0] = blocks;
      plan.shape[3] = ceil_div(static_cast<int64_t>(reserved_bytes), sizeof(int64_t));
      return plan;
    }
  }
  plan_two_kernels(N, D, elem, 4 * sms, &plan);
  return plan;
}

Status grid_cluster_cuda(const CudaPlan& plan, Dtype dt, const void* pos, const void* size, const void* start,
                         const void* end, int64_t N, int64_t D, int64_t* out, void* workspace,
                         const InKernelChecks* checks, void* stream) {
  if (N <= 0) return nullptr;
  if (D > kGridClusterMaxCudaDims) return "grid_cluster on CUDA takes at most 1024 dimensions";
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const KernelChecks recording = KernelChecks::from(checks);
  switch (dt) {
    case Dtype::Float32:
      return launch_grid_cluster(plan, static_cast<const float*>(pos), static_cast<const float*>(size),
                                 static_cast<const float*>(start), static_cast<const float*>(end), N, D, out,
                                 workspace, recording, s);
    case Dtype::Float64:
      return launch_grid_cluster(plan, static_cast<const double*>(pos), static_cast<const double*>(size),
                                 static_cast<const double*>(start), static_cast<const double*>(end), N, D,
                                 out, workspace, recording, s);
    default: return "grid_cluster takes float32 or float64 on CUDA";
  }
}

}  // namespace pointops
