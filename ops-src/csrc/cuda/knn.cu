// k nearest neighbours on CUDA, sorted by (squared distance, index).
//
// The K best of each query live in a TopK list ordered by (d2, index): in registers for
// K <= 32 (sizes 4/8/16/32, unrolled so the arrays never leave registers), else in the
// workspace (distances) and the idx row.
// Small clouds: one thread per query; the block's queries share tiles of the cloud staged in
// shared memory. Large clouds (float accumulation): a uniform grid of about two points per cell;
// each query visits rings of cells around its own until the K-th distance is below the distance
// to every unvisited cell.
#include "common.cuh"
#include "spatial_grid.cuh"
#include "tiled_scan.cuh"

namespace pointops {
namespace {

using namespace cuda_detail;

constexpr int kThreads = kScanThreads;
// From 4096 points the grid wins (H200: three_nn B8 N4096 M16384 0.15 ms on the grid, 0.65 ms
// scanning); below, scanning the cloud is cheaper than building the grid.
constexpr int64_t kGridMinPoints = 4096;

template <class A>
__device__ __forceinline__ bool before(A d, int64_t i, A od, int64_t oi) {
  return d < od || (d == od && i < oi);
}

// K <= KMAX best in registers, ascending by (d, i). Slots k >= K are unused.
template <class A, int KMAX>
struct RegisterTopK {
  A d[KMAX];
  int i[KMAX];  // 32-bit: the host sends clouds of 2^31 points or more to MemoryTopK
  int K;
  A worst_d;
  int worst_i;

  __device__ __forceinline__ void init(int k_, int64_t /*q*/, A* /*work_d*/, int64_t* /*idx*/) {
    K = k_;
#pragma unroll
    for (int s = 0; s < KMAX; ++s) {
      d[s] = acc_inf<A>();
      i[s] = INT32_MAX;
    }
    worst_d = acc_inf<A>();
    worst_i = INT32_MAX;
  }
  __device__ __forceinline__ bool accepts(A dd, int64_t ii) const { return before(dd, ii, worst_d, worst_i); }
  __device__ __forceinline__ void insert(A dd, int64_t ii) {
    bool placed = false;
#pragma unroll
    for (int s = KMAX - 1; s >= 0; --s) {
      if (s < K && !placed) {
        if (s > 0 && before(dd, ii, d[s - 1], i[s - 1])) {
          d[s] = d[s - 1];
          i[s] = i[s - 1];
        } else {
          d[s] = dd;
          i[s] = static_cast<int>(ii);
          placed = true;
        }
      }
    }
#pragma unroll
    for (int s = 0; s < KMAX; ++s) {
      if (s == K - 1) {
        worst_d = d[s];
        worst_i = i[s];
      }
    }
  }
  __device__ __forceinline__ A kth() const { return worst_d; }
  template <class T>
  __device__ __forceinline__ void write(T* out_d, int64_t* out_i) const {
#pragma unroll
    for (int s = 0; s < KMAX; ++s) {
      if (s < K) {
        const bool found = i[s] != INT32_MAX;
        out_d[s] = from_acc<T>(found ? d[s] : acc_inf<A>());
        out_i[s] = found ? i[s] : -1;
      }
    }
  }
};

// Any K: distances in the workspace, indices in the query's idx row.
template <class A>
struct MemoryTopK {
  A* d;
  int64_t* i;
  int64_t K, filled;

  __device__ __forceinline__ void init(int64_t k_, int64_t q, A* work_d, int64_t* idx) {
    K = k_;
    filled = 0;
    d = work_d + q * K;
    i = idx + q * K;
  }
  __device__ __forceinline__ bool accepts(A dd, int64_t ii) const {
    return filled < K || before(dd, ii, d[K - 1], i[K - 1]);
  }
  __device__ __forceinline__ void insert(A dd, int64_t ii) {
    int64_t pos = filled < K ? filled : K - 1;
    while (pos > 0 && before(dd, ii, d[pos - 1], i[pos - 1])) {
      d[pos] = d[pos - 1];
      i[pos] = i[pos - 1];
      --pos;
    }
    d[pos] = dd;
    i[pos] = ii;
    if (filled < K) ++filled;
  }
  __device__ __forceinline__ A kth() const { return filled < K ? acc_inf<A>() : d[K - 1]; }
  template <class T>
  __device__ __forceinline__ void write(T* out_d, int64_t* out_i) const {
    for (int64_t s = 0; s < K; ++s) {
      if (s < filled) {
        out_d[s] = from_acc<T>(d[s]);
      } else {
        out_d[s] = from_acc<T>(acc_inf<A>());
        out_i[s] = -1;
      }
    }
  }
};

template <class T, class TopK>
__global__ void __launch_bounds__(kThreads)
    knn_tiled_kernel(const T* __restrict__ xyz, const T* __restrict__ query,
                     const int64_t* __restrict__ lengths, const int64_t* __restrict__ query_lengths,
                     int64_t B, int64_t N, int64_t M, int64_t K, T* __restrict__ dist2_out,
                     int64_t* __restrict__ idx, acc_t<T>* __restrict__ work_d) {
  using A = acc_t<T>;
  __shared__ Point4<A> tile[kScanTile];
  for (int64_t b = blockIdx.y; b < B; b += gridDim.y) {
    const ScanQuery<A> sq(query, lengths, query_lengths, b, N, M);
    const int64_t n = sq.n, m = sq.m, q = sq.q;
    const bool active = sq.active;
    TopK top;
    top.init(static_cast<int>(K), active ? q : 0, work_d, idx);
    const T* pts = xyz + b * N * 3;
    // Queries past query_lengths still help stage tiles; the block scans only if one is active.
    const int64_t scan_n = __syncthreads_or(active) ? n : 0;
    for (int64_t base = 0; base < scan_n; base += kScanTile) {
      __syncthreads();  // the previous tile may be overwritten now
      const int len = stage_tile(tile, pts, base, n);
      __syncthreads();
      if (active) {
        for (int t = 0; t < len; ++t) {
          const Point4<A> p = tile[t];
          const A d = dist2(p.x, p.y, p.z, sq.x, sq.y, sq.z);
          if (top.accepts(d, base + t)) top.insert(d, base + t);
        }
      }
    }
    if (m < M) {
      if (active) {
        top.write(dist2_out + q * K, idx + q * K);
      } else {
        for (int64_t k = 0; k < K; ++k) {
          dist2_out[q * K + k] = from_acc<T>(acc_inf<A>());
          idx[q * K + k] = -1;
        }
      }
    }
    __syncthreads();  // the next cloud reuses the tile
  }
}

// Visits the cells (x0..x1, y, z) of one grid row, clipped to the grid.
template <class TopK>
__device__ __forceinline__ void visit_run(const GridParams& g, const int* starts, const float4* sorted,
                                          int x0, int x1, int y, int z, float qx, float qy, float qz,
                                          TopK& top) {
  if (y < 0 || y >= g.dims[1] || z < 0 || z >= g.dims[2]) return;
  x0 = x0 < 0 ? 0 : x0;
  x1 = x1 >= g.dims[0] ? g.dims[0] - 1 : x1;
  if (x0 > x1) return;
  const int end = starts[cell_index(g, x1, y, z) + 1];
  for (int r = starts[cell_index(g, x0, y, z)]; r < end; ++r) {
    const float4 p = sorted[r];
    const float d = dist2(p.x, p.y, p.z, qx, qy, qz);
    const int64_t j = __float_as_int(p.w);
    if (top.accepts(d, j)) top.insert(d, j);
  }
}

// Whether query row q is one to answer, and its cloud: padded rows past the cloud's query
// count, and packed rows of no cloud, are not.
__device__ __forceinline__ int64_t query_cloud(const CloudRows& queries, int64_t q) {
  const int64_t b = queries.cloud_of(q);
  if (b < 0 || queries.is_packed()) return b;
  return q - b * queries.N < queries.count(b) ? b : -1;
}

template <class T, class TopK>
__global__ void __launch_bounds__(kThreads)
    knn_grid_kernel(const T* __restrict__ query, CloudRows queries, CloudRows clouds, int64_t K,
                    const GridParams* __restrict__ params, const int* __restrict__ cell_start,
                    const float4* __restrict__ sorted, T* __restrict__ dist2_out, int64_t* __restrict__ idx,
                    float* __restrict__ work_d) {
  const int64_t total = queries.total_rows();
  for (int64_t q = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; q < total;
       q += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = query_cloud(queries, q);
    if (b < 0) {
      for (int64_t k = 0; k < K; ++k) {
        dist2_out[q * K + k] = from_acc<T>(acc_inf<float>());
        idx[q * K + k] = -1;
      }
      continue;
    }
    const float qx = to_acc(query[q * 3]), qy = to_acc(query[q * 3 + 1]), qz = to_acc(query[q * 3 + 2]);
    const GridParams g = params[b];
    const int* starts = cell_start + grid_cell_base(clouds, b);
    const int cx = cell_coord(g, 0, qx), cy = cell_coord(g, 1, qy), cz = cell_coord(g, 2, qz);
    TopK top;
    top.init(static_cast<int>(K), q, work_d, idx);
    const int max_ring = max(max(g.dims[0], g.dims[1]), g.dims[2]);
    for (int R = 0; R <= max_ring; ++R) {
      for (int z = cz - R; z <= cz + R; ++z) {
        for (int y = cy - R; y <= cy + R; ++y) {
          if (R == 0 || z == cz - R || z == cz + R || y == cy - R || y == cy + R) {
            visit_run(g, starts, sorted, cx - R, cx + R, y, z, qx, qy, qz, top);
          } else {
            visit_run(g, starts, sorted, cx - R, cx - R, y, z, qx, qy, qz, top);
            visit_run(g, starts, sorted, cx + R, cx + R, y, z, qx, qy, qz, top);
          }
        }
      }
      // Unvisited points lie beyond a face of the visited box that is not a grid border.
      const int c[3] = {cx, cy, cz};
      const float qc[3] = {qx, qy, qz};
      double bound = INFINITY;
      bool everything = true;
#pragma unroll
      for (int a = 0; a < 3; ++a) {
        if (c[a] - R > 0) {
          everything = false;
          const double face = g.lo[a] + static_cast<double>(c[a] - R) * g.cell;
          bound = fmin(bound, static_cast<double>(qc[a]) - face);
        }
        if (c[a] + R < g.dims[a] - 1) {
          everything = false;
          const double face = g.lo[a] + static_cast<double>(c[a] + R + 1) * g.cell;
          bound = fmin(bound, face - static_cast<double>(qc[a]));
        }
      }
      if (everything) break;
      // A small margin covers the rounding of float distances against the exact bound.
      if (bound > 0.0 && static_cast<double>(top.kth()) < bound * bound * (1.0 - 1e-5)) break;
    }
    top.write(dist2_out + q * K, idx + q * K);
  }
}

// Packed clouds without the grid (float64, or 2^31 rows and more): a thread per query row scans
// its cloud's rows in global memory.
template <class T, class TopK>
__global__ void __launch_bounds__(kThreads)
    knn_packed_scan_kernel(const T* __restrict__ xyz, const T* __restrict__ query, CloudRows queries,
                           CloudRows clouds, int64_t K, T* __restrict__ dist2_out, int64_t* __restrict__ idx,
                           acc_t<T>* __restrict__ work_d) {
  using A = acc_t<T>;
  const int64_t total = queries.total_rows();
  for (int64_t q = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; q < total;
       q += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = query_cloud(queries, q);
    TopK top;
    top.init(static_cast<int>(K), q, work_d, idx);
    if (b >= 0) {
      const A qx = to_acc(query[q * 3]), qy = to_acc(query[q * 3 + 1]), qz = to_acc(query[q * 3 + 2]);
      const int64_t first = clouds.begin(b), end = first + clouds.count(b);
      for (int64_t r = first; r < end; ++r) {
        const A d = dist2(to_acc(xyz[r * 3]), to_acc(xyz[r * 3 + 1]), to_acc(xyz[r * 3 + 2]), qx, qy, qz);
        if (top.accepts(d, r)) top.insert(d, r);
      }
    }
    top.write(dist2_out + q * K, idx + q * K);
  }
}

template <class T, class TopK>
Status launch_knn(bool grid, const SpatialGrid& g, const T* xyz, const T* query, const int64_t* lengths,
                  const int64_t* query_lengths, int64_t B, int64_t N, int64_t M, int64_t K, T* dist2,
                  int64_t* idx, acc_t<T>* work_d, cudaStream_t s) {
  if constexpr (!std::is_same<T, double>::value) {
    if (grid) {
      const CloudRows clouds = CloudRows::padded(lengths, B, N);
      if (Status st = build_grid<T>(g, xyz, clouds, 0.f, 2.f, s)) return st;
      knn_grid_kernel<T, TopK><<<grid_for(B * M, kThreads), kThreads, 0, s>>>(
          query, CloudRows::padded(query_lengths, B, M), clouds, K, g.params, g.cell_start, g.sorted, dist2,
          idx, work_d);
      return launch_status();
    }
  }
  knn_tiled_kernel<T, TopK><<<tiled_scan_blocks(B, M), kThreads, 0, s>>>(xyz, query, lengths, query_lengths,
                                                                         B, N, M, K, dist2, idx, work_d);
  return launch_status();
}

}  // namespace

// The register TopK's capacity for K (4, 8, 16 or 32), or 0 for the workspace TopK: K > 32, or
// indices of 2^31 and more, which need 64 bits.
int64_t topk_capacity(int64_t K, int64_t largest_index) {
  if (largest_index >= INT32_MAX) return 0;
  for (int64_t c : {4, 8, 16, 32}) {
    if (K <= c) return c;
  }
  return 0;
}

// Runs f(TopK{}) with the TopK of a plan's capacity.
template <class A, class F>
Status with_topk(int64_t capacity, F&& f) {
  switch (capacity) {
    case 4: return f(RegisterTopK<A, 4>{});
    case 8: return f(RegisterTopK<A, 8>{});
    case 16: return f(RegisterTopK<A, 16>{});
    case 32: return f(RegisterTopK<A, 32>{});
    default: return f(MemoryTopK<A>{});
  }
}

// plan.path: a NeighbourPath; plan.shape[0]: the register TopK capacity (4, 8, 16 or 32), or 0
// for the workspace TopK (K > 32, or clouds of 2^31 points and more, whose indices need 64 bits).
// Workspace: the workspace TopK's distances, then the grid's arrays.
CudaPlan knn_cuda_plan(Dtype dt, int64_t B, int64_t N, int64_t M, int64_t K) {
  CudaPlan plan;
  plan.path = neighbour_path(dt, B, N, M, kGridMinPoints);
  const int64_t capacity = topk_capacity(K, N);
  plan.shape[0] = capacity;
  WorkspaceCarver carve(nullptr);
  if (capacity == 0) carve.take<char>(static_cast<size_t>(B * M * K) * dtype_acc_bytes(dt));
  plan.workspace_bytes = carve.used();
  if (plan.path == kUniformGrid) plan.workspace_bytes += carve_grid(nullptr, B, B * N).bytes;
  return plan;
}

Status knn_cuda(const CudaPlan& plan, Dtype dt, const void* xyz, const void* query, const int64_t* lengths,
                const int64_t* query_lengths, int64_t B, int64_t N, int64_t M, int64_t K, void* dist2,
                int64_t* idx, void* workspace, void* stream) {
  if (B == 0 || M == 0 || K == 0) return nullptr;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const bool grid = plan.path == kUniformGrid;
  const int64_t capacity = plan.shape[0];
  WorkspaceCarver carve(workspace);
  char* work_d =
      capacity == 0 ? carve.take<char>(static_cast<size_t>(B * M * K) * dtype_acc_bytes(dt)) : nullptr;
  char* grid_base = workspace == nullptr ? nullptr : static_cast<char*>(workspace) + carve.used();
  const SpatialGrid g = grid ? carve_grid(grid_base, B, B * N) : SpatialGrid{};
  return dispatch_dtype(dt, [&](auto tag) -> Status {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* x = static_cast<const T*>(xyz);
    const T* qy = static_cast<const T*>(query);
    T* d = static_cast<T*>(dist2);
    A* wd = reinterpret_cast<A*>(work_d);
    return with_topk<A>(capacity, [&](auto top_tag) -> Status {
      using TopK = decltype(top_tag);
      return launch_knn<T, TopK>(grid, g, x, qy, lengths, query_lengths, B, N, M, K, d, idx, wd, s);
    });
  });
}

// Packed: plan.path a PackedPath, plan.shape[0] the TopK capacity; workspace as above.
CudaPlan knn_packed_cuda_plan(Dtype dt, int64_t B, int64_t P, int64_t Q, int64_t K) {
  CudaPlan plan;
  plan.path = packed_path(dt, P);
  plan.shape[0] = topk_capacity(K, P);
  WorkspaceCarver carve(nullptr);
  if (plan.shape[0] == 0) carve.take<char>(static_cast<size_t>(Q * K) * dtype_acc_bytes(dt));
  plan.workspace_bytes = carve.used();
  if (plan.path == kPackedGrid) plan.workspace_bytes += carve_grid(nullptr, B, P).bytes;
  return plan;
}

Status knn_packed_cuda(const CudaPlan& plan, Dtype dt, const void* xyz, const int64_t* ptr, int64_t P,
                       const void* query, const int64_t* query_ptr, int64_t Q, int64_t B, int64_t K,
                       void* dist2, int64_t* idx, void* workspace, void* stream) {
  if (Q == 0 || K == 0) return nullptr;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const int64_t capacity = plan.shape[0];
  WorkspaceCarver carve(workspace);
  char* work_d = capacity == 0 ? carve.take<char>(static_cast<size_t>(Q * K) * dtype_acc_bytes(dt)) : nullptr;
  char* grid_base = workspace == nullptr ? nullptr : static_cast<char*>(workspace) + carve.used();
  const CloudRows clouds = CloudRows::packed(ptr, B, P), queries = CloudRows::packed(query_ptr, B, Q);
  return dispatch_dtype(dt, [&](auto tag) -> Status {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* x = static_cast<const T*>(xyz);
    const T* qy = static_cast<const T*>(query);
    T* d = static_cast<T*>(dist2);
    A* wd = reinterpret_cast<A*>(work_d);
    return with_topk<A>(capacity, [&](auto top_tag) -> Status {
      using TopK = decltype(top_tag);
      if constexpr (!std::is_same<T, double>::value) {
        if (plan.path == kPackedGrid) {
          const SpatialGrid g = carve_grid(grid_base, B, P);
          if (Status st = build_grid<T>(g, x, clouds, 0.f, 2.f, s)) return st;
          knn_grid_kernel<T, TopK><<<grid_for(Q, kThreads), kThreads, 0, s>>>(
              qy, queries, clouds, K, g.params, g.cell_start, g.sorted, d, idx, reinterpret_cast<float*>(wd));
          return launch_status();
        }
      }
      knn_packed_scan_kernel<T, TopK>
          <<<grid_for(Q, kThreads), kThreads, 0, s>>>(x, qy, queries, clouds, K, d, idx, wd);
      return launch_status();
    });
  });
}

}  // namespace pointops
