// Ball query on CUDA: the first K points (ascending index) within the radius of each query.
//
// Small clouds: the block's queries share tiles of the cloud staged in shared memory and scan
// them in index order, stopping once every query has K hits; a thread per query, or, when that
// leaves the GPU mostly idle (PointNet++'s B16 M512 N1024 is 8192 threads), a group of lanes per
// query.
// Large clouds (float accumulation): a uniform grid with cells no smaller than the radius, so a
// query scans the 27 cells around its own; it keeps the K smallest hit indices (sorted, in its
// idx row) because cells are not visited in index order.
#include "common.cuh"
#include "spatial_grid.cuh"
#include "tiled_scan.cuh"

namespace pointops {
namespace {

using namespace cuda_detail;

constexpr int kThreads = kScanThreads;
// From 8192 points the grid wins (H200: B8 N16384 M4096 r0.05 0.11 ms on the grid, 1.03 ms
// scanning); at B16 N4096 r0.2 scanning with early exit is faster (0.29 vs 0.89 ms).
constexpr int64_t kGridMinPoints = 8192;

template <class A>
__device__ __forceinline__ bool in_ball(A d, A r2, bool inclusive) {
  return inclusive ? d <= r2 : d < r2;
}

// Pads a row after the search: repeat the first hit, or -1/+inf for an empty ball.
template <class T>
__device__ __forceinline__ void finish_row(int64_t hits, int64_t K, int64_t* out_i, T* out_d,
                                           acc_t<T> first_d) {
  if (hits == 0) {
    for (int64_t k = 0; k < K; ++k) {
      out_i[k] = -1;
      if (out_d) out_d[k] = from_acc<T>(acc_inf<acc_t<T>>());
    }
    return;
  }
  const int64_t first = out_i[0];
  for (int64_t k = hits; k < K; ++k) out_i[k] = first;
  if (out_d) {
    for (int64_t k = hits; k < K; ++k) out_d[k] = from_acc<T>(first_d);
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    ball_query_tiled_kernel(const T* __restrict__ xyz, const T* __restrict__ query,
                            const int64_t* __restrict__ lengths, const int64_t* __restrict__ query_lengths,
                            int64_t B, int64_t N, int64_t M, acc_t<T> r2, bool inclusive, int64_t K,
                            int64_t* __restrict__ idx, int64_t* __restrict__ count,
                            T* __restrict__ dist2_out) {
  using A = acc_t<T>;
  __shared__ Point4<A> tile[kScanTile];
  for (int64_t b = blockIdx.y; b < B; b += gridDim.y) {
    const ScanQuery<A> sq(query, lengths, query_lengths, b, N, M);
    const int64_t n = sq.n, m = sq.m, q = sq.q;
    const bool active = sq.active;
    int64_t* out_i = idx + q * K;
    T* out_d = dist2_out == nullptr ? nullptr : dist2_out + q * K;
    int64_t hits = 0;
    A first_d = 0;
    const T* pts = xyz + b * N * 3;
    for (int64_t base = 0; base < n; base += kScanTile) {
      // Also the barrier that lets the previous tile be overwritten.
      if (__syncthreads_and(!active || hits >= K)) break;
      const int len = stage_tile(tile, pts, base, n);
      __syncthreads();
      if (active && hits < K) {
        for (int t = 0; t < len; ++t) {
          const Point4<A> p = tile[t];
          const A d = dist2(p.x, p.y, p.z, sq.x, sq.y, sq.z);
          if (in_ball(d, r2, inclusive)) {
            if (hits == 0) first_d = d;
            out_i[hits] = base + t;
            if (out_d) out_d[hits] = from_acc<T>(d);
            if (++hits == K) break;
          }
        }
      }
    }
    if (m < M) {
      if (active) {
        count[q] = hits;
        finish_row<T>(hits, K, out_i, out_d, first_d);
      } else {
        count[q] = 0;
        finish_row<T>(0, K, out_i, out_d, first_d);
      }
    }
    __syncthreads();  // the next cloud reuses the tile
  }
}

// The tiled scan with `lanes` threads per query (a power of two up to a warp): lane l tests
// points t0 + l of each step of the tile; the group's ballot orders the step's hits by index,
// so the kept hits are the first K, as a single thread scanning in order keeps them.
template <class T>
__global__ void __launch_bounds__(kThreads)
    ball_query_lanes_kernel(const T* __restrict__ xyz, const T* __restrict__ query,
                            const int64_t* __restrict__ lengths, const int64_t* __restrict__ query_lengths,
                            int64_t B, int64_t N, int64_t M, acc_t<T> r2, bool inclusive, int64_t K,
                            int lanes, int64_t* __restrict__ idx, int64_t* __restrict__ count,
                            T* __restrict__ dist2_out) {
  using A = acc_t<T>;
  __shared__ Point4<A> tile[kScanTile];
  const int lane = static_cast<int>(threadIdx.x) & (lanes - 1);
  const int group_base = static_cast<int>(threadIdx.x & 31) & ~(lanes - 1);
  const unsigned group_mask = (lanes == 32 ? 0xffffffffu : (1u << lanes) - 1u) << group_base;
  const unsigned lanes_below = (1u << lane) - 1u;
  for (int64_t b = blockIdx.y; b < B; b += gridDim.y) {
    const ScanQuery<A> sq(query, lengths, query_lengths, b, N, M, lanes);
    const int64_t n = sq.n, m = sq.m, q = sq.q;
    const bool active = sq.active;
    int64_t* out_i = idx + q * K;
    T* out_d = dist2_out == nullptr ? nullptr : dist2_out + q * K;
    int64_t hits = 0, first_j = -1;
    A first_d = A(0);
    const T* pts = xyz + b * N * 3;
    for (int64_t base = 0; base < n; base += kScanTile) {
      // Also the barrier that lets the previous tile be overwritten.
      if (__syncthreads_and(!active || hits >= K)) break;
      const int len = stage_tile(tile, pts, base, n);
      __syncthreads();
      if (!active || hits >= K) continue;  // the same for every lane of the group
      for (int t0 = 0; t0 < len; t0 += lanes) {
        const int t = t0 + lane;
        A d = A(0);
        bool hit = false;
        if (t < len) {
          const Point4<A> p = tile[t];
          d = dist2(p.x, p.y, p.z, sq.x, sq.y, sq.z);
          hit = in_ball(d, r2, inclusive);
        }
        const unsigned found = __ballot_sync(group_mask, hit) >> group_base;
        if (found == 0) continue;
        const int64_t slot = hits + __popc(found & lanes_below);
        if (hit && slot < K) {
          out_i[slot] = base + t;
          if (out_d) out_d[slot] = from_acc<T>(d);
        }
        if (hits == 0) {
          const int src = __ffs(static_cast<int>(found)) - 1;
          first_j = base + t0 + src;
          first_d = __shfl_sync(group_mask, d, group_base + src);
        }
        hits += __popc(found);
        if (hits >= K) {
          hits = K;
          break;
        }
      }
    }
    if (m < M) {  // pad the row as finish_row does, the group's lanes taking turns
      if (lane == 0) count[q] = hits;
      for (int64_t k = hits + lane; k < K; k += lanes) {
        out_i[k] = first_j;  // -1 for an empty ball
        if (out_d) out_d[k] = hits ? from_acc<T>(first_d) : from_acc<T>(acc_inf<A>());
      }
    }
    __syncthreads();  // the next cloud reuses the tile
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    ball_query_grid_kernel(const T* __restrict__ xyz, const T* __restrict__ query, CloudRows queries,
                           CloudRows clouds, float r2, bool inclusive, int64_t K,
                           const GridParams* __restrict__ params, const int* __restrict__ cell_start,
                           const float4* __restrict__ sorted, int64_t* __restrict__ idx,
                           int64_t* __restrict__ count, T* __restrict__ dist2_out) {
  const int64_t total = queries.total_rows();
  for (int64_t q = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; q < total;
       q += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t b = queries.cloud_of(q);
    if (b >= 0 && !queries.is_packed() && q - b * queries.N >= queries.count(b)) b = -1;
    int64_t* out_i = idx + q * K;
    T* out_d = dist2_out == nullptr ? nullptr : dist2_out + q * K;
    if (b < 0) {
      count[q] = 0;
      finish_row<T>(0, K, out_i, out_d, 0.f);
      continue;
    }
    const float qx = to_acc(query[q * 3]), qy = to_acc(query[q * 3 + 1]), qz = to_acc(query[q * 3 + 2]);
    const GridParams g = params[b];
    const int cx = cell_coord(g, 0, qx), cy = cell_coord(g, 1, qy), cz = cell_coord(g, 2, qz);
    const int* starts = cell_start + grid_cell_base(clouds, b);
    const int x0 = cx > 0 ? cx - 1 : 0, x1 = cx + 1 < g.dims[0] ? cx + 1 : g.dims[0] - 1;
    int64_t hits = 0;  // entries in the sorted list out_i[0..hits)
    for (int z = (cz > 0 ? cz - 1 : 0); z <= cz + 1 && z < g.dims[2]; ++z) {
      for (int y = (cy > 0 ? cy - 1 : 0); y <= cy + 1 && y < g.dims[1]; ++y) {
        const int end = starts[cell_index(g, x1, y, z) + 1];
        for (int r = starts[cell_index(g, x0, y, z)]; r < end; ++r) {
          const float4 p = sorted[r];
          const float d = dist2(p.x, p.y, p.z, qx, qy, qz);
          if (!in_ball(d, r2, inclusive)) continue;
          const int64_t j = __float_as_int(p.w);
          if (hits == K && j > out_i[K - 1]) continue;
          // Insert j into the ascending list, dropping the largest when full.
          int64_t pos = hits < K ? hits : K - 1;
          while (pos > 0 && out_i[pos - 1] > j) {
            out_i[pos] = out_i[pos - 1];
            --pos;
          }
          out_i[pos] = j;
          if (hits < K) ++hits;
        }
      }
    }
    count[q] = hits;
    float first_d = 0.f;
    if (out_d != nullptr) {  // distances of the kept hits, computed exactly as in the search
      const T* pts = xyz + (clouds.is_packed() ? 0 : clouds.begin(b)) * 3;  // out_i holds what sorted carries
      for (int64_t k = 0; k < hits; ++k) {
        const int64_t j = out_i[k];
        const float d = dist2(to_acc(pts[j * 3]), to_acc(pts[j * 3 + 1]), to_acc(pts[j * 3 + 2]), qx, qy, qz);
        if (k == 0) first_d = d;
        out_d[k] = from_acc<T>(d);
      }
    }
    finish_row<T>(hits, K, out_i, out_d, first_d);
  }
}

// Packed clouds without the grid (float64, or 2^31 rows and more): a thread per query row scans
// its cloud's rows in ascending order until it has K hits.
template <class T>
__global__ void __launch_bounds__(kThreads)
    ball_query_packed_scan_kernel(const T* __restrict__ xyz, const T* __restrict__ query, CloudRows queries,
                                  CloudRows clouds, acc_t<T> r2, bool inclusive, int64_t K,
                                  int64_t* __restrict__ idx, int64_t* __restrict__ count,
                                  T* __restrict__ dist2_out) {
  using A = acc_t<T>;
  const int64_t total = queries.total_rows();
  for (int64_t q = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; q < total;
       q += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = queries.cloud_of(q);
    int64_t* out_i = idx + q * K;
    T* out_d = dist2_out == nullptr ? nullptr : dist2_out + q * K;
    int64_t hits = 0;
    A first_d = A(0);
    if (b >= 0) {
      const A qx = to_acc(query[q * 3]), qy = to_acc(query[q * 3 + 1]), qz = to_acc(query[q * 3 + 2]);
      const int64_t first = clouds.begin(b), end = first + clouds.count(b);
      for (int64_t r = first; r < end && hits < K; ++r) {
        const A d = dist2(to_acc(xyz[r * 3]), to_acc(xyz[r * 3 + 1]), to_acc(xyz[r * 3 + 2]), qx, qy, qz);
        if (!in_ball(d, r2, inclusive)) continue;
        if (hits == 0) first_d = d;
        out_i[hits] = r;
        if (out_d) out_d[hits] = from_acc<T>(d);
        ++hits;
      }
    }
    count[q] = hits;
    finish_row<T>(hits, K, out_i, out_d, first_d);
  }
}

// Threads per query of the scanning path: one where the B * M queries give the GPU about 1024
// threads per SM; else the fewest of 8, 16 and 32 that give it about 2048. At PointNet++'s
// shapes (H100) 32 lanes beat 16 and 8, and 2 or 4 lost even to one thread (likely because a
// warp's groups diverge, so each group's ballot runs on its own).
int64_t scan_lanes(int64_t B, int64_t M) {
  const int64_t forced = tuning_or(Knob::BallQueryLanes, kUnset);
  if (forced >= 1 && forced <= 32 && (forced & (forced - 1)) == 0) return forced;
  const int64_t sms = current_device_sm_count();
  if (B * M >= sms * 1024) return 1;
  int64_t lanes = 8;
  while (lanes < 32 && B * M * lanes < sms * 2048) lanes *= 2;
  return lanes;
}

}  // namespace

// plan.path: a NeighbourPath; the grid's arrays are the workspace; shape[0] the scan's lanes
// per query.
CudaPlan ball_query_cuda_plan(Dtype dt, int64_t B, int64_t N, int64_t M, int64_t K) {
  (void)K;
  CudaPlan plan;
  plan.path = neighbour_path(dt, B, N, M, kGridMinPoints);
  if (plan.path == kUniformGrid) plan.workspace_bytes = carve_grid(nullptr, B, B * N).bytes;
  plan.shape[0] = plan.path == kUniformGrid ? 1 : scan_lanes(B, M);
  return plan;
}

Status ball_query_cuda(const CudaPlan& plan, Dtype dt, const void* xyz, const void* query,
                       const int64_t* lengths, const int64_t* query_lengths, int64_t B, int64_t N, int64_t M,
                       double radius, bool inclusive, int64_t K, int64_t* idx, int64_t* count, void* dist2,
                       void* workspace, void* stream) {
  if (B == 0 || M == 0) return nullptr;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  return dispatch_dtype(dt, [&](auto tag) -> Status {
    using T = decltype(tag);
    using A = acc_t<T>;
    // radius*radius in double, rounded once to the accumulation type (the contract's rule).
    const A r2 = static_cast<A>(radius * radius);
    if constexpr (!std::is_same<T, double>::value) {
      if (plan.path == kUniformGrid) {
        const SpatialGrid g = carve_grid(workspace, B, B * N);
        const CloudRows clouds = CloudRows::padded(lengths, B, N);
        if (Status st =
                build_grid<T>(g, static_cast<const T*>(xyz), clouds, static_cast<float>(radius), 0.f, s)) {
          return st;
        }
        ball_query_grid_kernel<T><<<grid_for(B * M, kThreads), kThreads, 0, s>>>(
            static_cast<const T*>(xyz), static_cast<const T*>(query), CloudRows::padded(query_lengths, B, M),
            clouds, r2, inclusive, K, g.params, g.cell_start, g.sorted, idx, count, static_cast<T*>(dist2));
        return launch_status();
      }
    }
    const int lanes = static_cast<int>(plan.shape[0]);
    if (lanes > 1) {
      ball_query_lanes_kernel<T><<<tiled_scan_blocks(B, M, lanes), kThreads, 0, s>>>(
          static_cast<const T*>(xyz), static_cast<const T*>(query), lengths, query_lengths, B, N, M, r2,
          inclusive, K, lanes, idx, count, static_cast<T*>(dist2));
      return launch_status();
    }
    ball_query_tiled_kernel<T><<<tiled_scan_blocks(B, M), kThreads, 0, s>>>(
        static_cast<const T*>(xyz), static_cast<const T*>(query), lengths, query_lengths, B, N, M, r2,
        inclusive, K, idx, count, static_cast<T*>(dist2));
    return launch_status();
  });
}

// Packed: plan.path a PackedPath; the grid's arrays are the workspace.
CudaPlan ball_query_packed_cuda_plan(Dtype dt, int64_t B, int64_t P, int64_t Q, int64_t K) {
  (void)Q, (void)K;
  CudaPlan plan;
  plan.path = packed_path(dt, P);
  if (plan.path == kPackedGrid) plan.workspace_bytes = carve_grid(nullptr, B, P).bytes;
  return plan;
}

Status ball_query_packed_cuda(const CudaPlan& plan, Dtype dt, const void* xyz, const int64_t* ptr, int64_t P,
                              const void* query, const int64_t* query_ptr, int64_t Q, int64_t B,
                              double radius, bool inclusive, int64_t K, int64_t* idx, int64_t* count,
                              void* dist2, void* workspace, void* stream) {
  if (Q == 0 || K == 0) return nullptr;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const CloudRows clouds = CloudRows::packed(ptr, B, P), queries = CloudRows::packed(query_ptr, B, Q);
  return dispatch_dtype(dt, [&](auto tag) -> Status {
    using T = decltype(tag);
    using A = acc_t<T>;
    const A r2 = static_cast<A>(radius * radius);
    const T* x = static_cast<const T*>(xyz);
    const T* qy = static_cast<const T*>(query);
    if constexpr (!std::is_same<T, double>::value) {
      if (plan.path == kPackedGrid) {
        const SpatialGrid g = carve_grid(workspace, B, P);
        if (Status st = build_grid<T>(g, x, clouds, static_cast<float>(radius), 0.f, s)) return st;
        ball_query_grid_kernel<T><<<grid_for(Q, kThreads), kThreads, 0, s>>>(
            x, qy, queries, clouds, r2, inclusive, K, g.params, g.cell_start, g.sorted, idx, count,
            static_cast<T*>(dist2));
        return launch_status();
      }
    }
    ball_query_packed_scan_kernel<T><<<grid_for(Q, kThreads), kThreads, 0, s>>>(
        x, qy, queries, clouds, r2, inclusive, K, idx, count, static_cast<T*>(dist2));
    return launch_status();
  });
}

}  // namespace pointops
