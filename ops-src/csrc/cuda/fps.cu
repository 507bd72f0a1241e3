// Farthest point sampling on CUDA.
//
// FPS is K sequential steps, each a pass over the cloud and an argmax, so the cost is the
// per-step latency, not bandwidth. The strategies, chosen at run time from (B, N, device):
//  - register path (float32/float16/bfloat16): a group of G blocks owns one cloud, each thread
//    keeps up to kMaxSlots points and their min-distances in registers, and per step the group
//    agrees on the farthest point:
//      * G = 1: one block per cloud (small clouds, or no cluster support);
//      * cluster: G <= 16 blocks of a Hopper+ thread-block cluster exchange their winners through
//        distributed shared memory and a hardware cluster barrier;
//      * grid: G co-resident blocks (cooperative launch) exchange winners through global memory
//        and a per-cloud counter barrier (large clouds).
//  - stream path: like the grid path, but points and min-distances stay in global memory
//    (clouds too large for the registers of the whole GPU).
//  - general path (float64, or anything the others cannot take): one block per cloud, points
//    and min-distances in global memory.
// Every path picks the largest min-distance, lowest index on ties, with the same rounding.
#include <cooperative_groups.h>

#include <cstdlib>
#include <cuda/atomic>
#include <type_traits>

#include "common.cuh"

namespace pointops {
namespace {

using namespace cuda_detail;
namespace cg = cooperative_groups;

// ---------------------------------------------------------------------------------------------
// General path.

constexpr int kGenericThreads = 512;

template <class A>
struct Candidate {
  A d;
  int64_t i;
};

template <class A>
__device__ __forceinline__ bool better(A d, int64_t i, A od, int64_t oi) {
  return d > od || (d == od && i < oi);
}

template <class A>
__device__ __forceinline__ Candidate<A> warp_best(Candidate<A> c) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const A od = __shfl_xor_sync(0xffffffffu, c.d, offset);
    const int64_t oi = __shfl_xor_sync(0xffffffffu, c.i, offset);
    if (better(od, oi, c.d, c.i)) {
      c.d = od;
      c.i = oi;
    }
  }
  return c;
}

template <class T>
__global__ void __launch_bounds__(kGenericThreads)
    fps_generic_kernel(const T* __restrict__ xyz, const int64_t* __restrict__ lengths, int64_t N,
                       int64_t K, int64_t start, int64_t* __restrict__ idx, acc_t<T>* min_d) {
  using A = acc_t<T>;
  __shared__ A warp_d[2][32];
  __shared__ int64_t warp_i[2][32];
  const int64_t b = blockIdx.x;
  const int64_t n = clamped_length(lengths, b, N);
  const T* pts = xyz + b * N * 3;
  A* md = min_d + b * N;
  int64_t* out = idx + b * K;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nwarps = blockDim.x >> 5;

  for (int64_t i = n + tid; i < K; i += blockDim.x) out[i] = -1;
  if (n == 0) return;
  for (int64_t i = tid; i < n; i += blockDim.x) md[i] = acc_inf<A>();

  int64_t cur = start < 0 ? 0 : (start > n - 1 ? n - 1 : start);
  const int64_t picks = K < n ? K : n;
  for (int64_t k = 0;; ++k) {
    if (tid == 0) out[k] = cur;
    if (k + 1 >= picks) break;
    const A cx = to_acc(pts[cur * 3]), cy = to_acc(pts[cur * 3 + 1]), cz = to_acc(pts[cur * 3 + 2]);
    Candidate<A> best{A(-1), INT64_MAX};
    for (int64_t i = tid; i < n; i += blockDim.x) {
      const A d = dist2(to_acc(pts[i * 3]), to_acc(pts[i * 3 + 1]), to_acc(pts[i * 3 + 2]), cx, cy, cz);
      A m = md[i];
      if (d < m) {
        m = d;
        md[i] = d;
      }
      if (m > best.d) {  // ascending i: strict ">" keeps the lowest index on ties
        best.d = m;
        best.i = i;
      }
    }
    best = warp_best(best);
    const int buf = static_cast<int>(k & 1);  // double buffer: one barrier per step
    if (lane == 0) {
      warp_d[buf][warp] = best.d;
      warp_i[buf][warp] = best.i;
    }
    __syncthreads();
    Candidate<A> c{A(-1), INT64_MAX};
    if (lane < nwarps) c = Candidate<A>{warp_d[buf][lane], warp_i[buf][lane]};
    c = warp_best(c);
    cur = c.i;
  }
}

// ---------------------------------------------------------------------------------------------
// Register, stream, cluster and grid paths (float accumulation, cloud index < 2^32 - 1).

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxSlots = 32;  // points per thread in registers
constexpr int kMaxCluster = 16;

enum GroupMode : int { kBlockGroup = 0, kClusterGroup = 1, kGridGroup = 2 };

// A cloud point that could be the next pick: its min-distance bits (non-negative floats order
// like their bit patterns), its index in the cloud, and its coordinates (so that no group
// member has to load the winner from memory).
struct Pick {
  uint32_t d;
  uint32_t i;
  float x, y, z;
};

struct alignas(16) PickSlot {  // a Pick as written to shared or global memory
  uint32_t d, i;
  float x, y, z;
  uint32_t pad[3];
};

__device__ __forceinline__ bool pick_better(uint32_t d, uint32_t i, uint32_t od, uint32_t oi) {
  return d > od || (d == od && i < oi);
}

// Every lane ends with the best Pick of the warp.
__device__ __forceinline__ Pick warp_pick(Pick p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const uint32_t dmax = __reduce_max_sync(0xffffffffu, p.d);
  const uint32_t imin = __reduce_min_sync(0xffffffffu, p.d == dmax ? p.i : 0xffffffffu);
#else
  uint32_t dmax = p.d, imin = p.i;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const uint32_t od = __shfl_xor_sync(0xffffffffu, dmax, offset);
    const uint32_t oi = __shfl_xor_sync(0xffffffffu, imin, offset);
    if (pick_better(od, oi, dmax, imin)) {
      dmax = od;
      imin = oi;
    }
  }
#endif
  const uint32_t owners = __ballot_sync(0xffffffffu, p.d == dmax && p.i == imin);
  const int src = __ffs(owners) - 1;
  Pick w;
  w.d = dmax;
  w.i = imin;
  w.x = __shfl_sync(0xffffffffu, p.x, src);
  w.y = __shfl_sync(0xffffffffu, p.y, src);
  w.z = __shfl_sync(0xffffffffu, p.z, src);
  return w;
}

__device__ __forceinline__ Pick no_pick() { return Pick{0u, 0xffffffffu, 0.f, 0.f, 0.f}; }

__device__ __forceinline__ Pick load_slot(const PickSlot& s) { return Pick{s.d, s.i, s.x, s.y, s.z}; }

__device__ __forceinline__ void store_slot(PickSlot& s, const Pick& p) {
  s.d = p.d;
  s.i = p.i;
  s.x = p.x;
  s.y = p.y;
  s.z = p.z;
}

// Points of one block held in registers: slot s of thread t is point base + s*kThreads + t.
template <class T, int SLOTS>
struct RegisterPoints {
  float x[SLOTS], y[SLOTS], z[SLOTS], md[SLOTS];
  int64_t base;

  __device__ __forceinline__ void load(const T* pts, int64_t first, int64_t n) {
    base = first;
#pragma unroll
    for (int s = 0; s < SLOTS; ++s) {
      const int64_t i = first + s * kThreads + threadIdx.x;
      if (i < n) {
        x[s] = to_acc(pts[i * 3]);
        y[s] = to_acc(pts[i * 3 + 1]);
        z[s] = to_acc(pts[i * 3 + 2]);
        md[s] = acc_inf<float>();
      } else {
        x[s] = y[s] = z[s] = 0.f;
        md[s] = -1.f;  // never beats a real point (best starts at -1 and needs ">")
      }
    }
  }

  // Updates min-distances with the last pick and returns this thread's farthest point.
  __device__ __forceinline__ Pick update(float cx, float cy, float cz) {
    float best = -1.f;
    int bs = 0;
#pragma unroll
    for (int s = 0; s < SLOTS; ++s) {
      const float m = fminf(md[s], dist2(x[s], y[s], z[s], cx, cy, cz));
      md[s] = m;
      if (m > best) {  // slots ascend in index: strict ">" keeps the lowest on ties
        best = m;
        bs = s;
      }
    }
    if (best < 0.f) return no_pick();
    Pick p;
    p.d = __float_as_uint(best);
    p.i = static_cast<uint32_t>(base + bs * kThreads + threadIdx.x);
    p.x = x[0];
    p.y = y[0];
    p.z = z[0];
#pragma unroll
    for (int s = 1; s < SLOTS; ++s) {
      if (s == bs) {
        p.x = x[s];
        p.y = y[s];
        p.z = z[s];
      }
    }
    return p;
  }
};

// Points of one block left in global memory (clouds too large for registers).
template <class T>
struct StreamPoints {
  const T* pts;
  float* md;
  int64_t first, last;

  __device__ __forceinline__ void load(const T* cloud, float* min_d, int64_t begin, int64_t end) {
    pts = cloud;
    md = min_d;
    first = begin;
    last = end;
    for (int64_t i = first + threadIdx.x; i < last; i += kThreads) md[i] = acc_inf<float>();
  }

  __device__ __forceinline__ Pick update(float cx, float cy, float cz) {
    float best = -1.f;
    int64_t bi = -1;
    for (int64_t i = first + threadIdx.x; i < last; i += kThreads) {
      const float m = fminf(md[i], dist2(to_acc(pts[i * 3]), to_acc(pts[i * 3 + 1]),
                                         to_acc(pts[i * 3 + 2]), cx, cy, cz));
      md[i] = m;
      if (m > best) {
        best = m;
        bi = i;
      }
    }
    if (bi < 0) return no_pick();
    return Pick{__float_as_uint(best), static_cast<uint32_t>(bi), to_acc(pts[bi * 3]),
                to_acc(pts[bi * 3 + 1]), to_acc(pts[bi * 3 + 2])};
  }
};

// The block's best Pick, known to every thread. One barrier (double-buffered slots).
__device__ __forceinline__ Pick block_pick(Pick p, PickSlot (*warp_slots)[kWarps], int buf) {
  p = warp_pick(p);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) store_slot(warp_slots[buf][warp], p);
  __syncthreads();
  Pick q = lane < kWarps ? load_slot(warp_slots[buf][lane]) : no_pick();
  return warp_pick(q);
}

// One kernel for the register and stream paths and the three group modes.
// Grid: B * G blocks, block g*... : cloud = blockIdx.x / G, rank = blockIdx.x % G.
template <class T, class Points, int MODE>
__global__ void __launch_bounds__(kThreads)
    fps_group_kernel(const T* __restrict__ xyz, const int64_t* __restrict__ lengths, int64_t N,
                     int64_t K, int64_t start, int64_t* __restrict__ idx, int G,
                     int64_t chunk, PickSlot* __restrict__ grid_slots,
                     unsigned long long* __restrict__ arrivals, float* __restrict__ min_d) {
  __shared__ PickSlot warp_slots[2][kWarps];
  __shared__ PickSlot block_slot[2];
  const int64_t b = blockIdx.x / G;
  const int rank = static_cast<int>(blockIdx.x % G);
  const int64_t n = clamped_length(lengths, b, N);
  const T* pts = xyz + b * N * 3;
  int64_t* out = idx + b * K;
  const int lane = threadIdx.x & 31;
  (void)lane, (void)grid_slots, (void)arrivals, (void)block_slot;

  if (rank == 0) {
    for (int64_t i = n + threadIdx.x; i < K; i += kThreads) out[i] = -1;
  }
  // n == 0 ends every block of the group alike, so no barrier is left waiting.
  if (n == 0) return;

  Points points;
  const int64_t begin = rank * chunk;
  const int64_t end = begin + chunk < n ? begin + chunk : n;
  if constexpr (std::is_same<Points, StreamPoints<T>>::value) {
    points.load(pts, min_d + b * N, begin, end);
  } else {
    points.load(pts, begin, n);
  }

  int64_t cur = start < 0 ? 0 : (start > n - 1 ? n - 1 : start);
  float cx = to_acc(pts[cur * 3]), cy = to_acc(pts[cur * 3 + 1]), cz = to_acc(pts[cur * 3 + 2]);
  const int64_t picks = K < n ? K : n;
  // Picks stay in registers (thread t keeps step k with k % kThreads == t) and are stored every
  // kThreads steps: a global store before a cluster or grid barrier would make its release wait
  // for the store to reach L2, on every step.
  uint32_t held_pick = static_cast<uint32_t>(cur);

  for (int64_t k = 1; k < picks; ++k) {
    const int buf = static_cast<int>(k & 1);
    Pick p;
    if constexpr (MODE == kClusterGroup) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      // Flat exchange: every warp publishes its best in its own shared memory, one cluster
      // barrier, then every warp reads the G * kWarps candidates of the cluster.
      cg::cluster_group cluster = cg::this_cluster();
      p = warp_pick(points.update(cx, cy, cz));
      if (lane == 0) store_slot(warp_slots[buf][threadIdx.x >> 5], p);
      cluster.sync();
      Pick q = no_pick();
      for (int slot = lane; slot < G * kWarps; slot += 32) {
        const Pick c = load_slot(*cluster.map_shared_rank(&warp_slots[buf][slot % kWarps], slot / kWarps));
        if (pick_better(c.d, c.i, q.d, q.i)) q = c;
      }
      p = warp_pick(q);
#else
      p = no_pick();
      __trap();  // the host launches cluster groups only on devices that have them
#endif
    } else if constexpr (MODE == kGridGroup) {
      p = block_pick(points.update(cx, cy, cz), warp_slots, buf);
      // Publish this block's winner, arrive at the cloud's counter, wait for all G blocks.
      PickSlot* slots = grid_slots + (b * 2 + buf) * static_cast<int64_t>(G);
      __shared__ PickSlot group_pick[2];
      if (threadIdx.x < 32) {
        if (threadIdx.x == 0) {
          store_slot(slots[rank], p);
          cuda::atomic_ref<unsigned long long, cuda::thread_scope_device> arrive(arrivals[b]);
          arrive.fetch_add(1ull, cuda::memory_order_release);
        }
        const unsigned long long target = static_cast<unsigned long long>(k) * G;
        cuda::atomic_ref<unsigned long long, cuda::thread_scope_device> arrived(arrivals[b]);
        while (arrived.load(cuda::memory_order_acquire) < target) {
        }
        Pick q = no_pick();
        for (int r = lane; r < G; r += 32) {
          const Pick c = load_slot(slots[r]);
          if (pick_better(c.d, c.i, q.d, q.i)) q = c;
        }
        q = warp_pick(q);
        if (lane == 0) store_slot(group_pick[buf], q);
      }
      __syncthreads();
      p = load_slot(group_pick[buf]);
    } else {
      p = block_pick(points.update(cx, cy, cz), warp_slots, buf);
    }

    cx = p.x;
    cy = p.y;
    cz = p.z;
    const int64_t slot = k % kThreads;
    if (slot == threadIdx.x) held_pick = p.i;
    if (slot == kThreads - 1 && rank == 0) out[k - slot + threadIdx.x] = held_pick;
  }
  // The last, partial round of held picks.
  const int64_t last_round = ((picks - 1) / kThreads) * kThreads;
  if (rank == 0 && picks % kThreads != 0 && last_round + threadIdx.x < picks) {
    out[last_round + threadIdx.x] = held_pick;
  }
  if constexpr (MODE == kClusterGroup) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    cg::this_cluster().sync();  // no block may leave while others still read its shared memory
#endif
  }
}

// ---------------------------------------------------------------------------------------------
// Host side: plan and launch.

int pow2_at_least(int64_t v) {
  int p = 1;
  while (p < v) p <<= 1;
  return p;
}

template <class T, class Points, int MODE>
Status launch_group(const T* xyz, const int64_t* lengths, int64_t B, int64_t N, int64_t K,
                    int64_t start, int64_t* idx, int G, int64_t chunk, PickSlot* slots,
                    unsigned long long* arrivals, float* min_d, cudaStream_t s) {
  auto kernel = fps_group_kernel<T, Points, MODE>;
  const dim3 grid(static_cast<unsigned int>(B * G)), block(kThreads);
  if (MODE == kClusterGroup) {
    if (G > 8) {
      cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
      if (err != cudaSuccess) return cudaGetErrorString(err);
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = 0;
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = static_cast<unsigned int>(G);
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return status_of(cudaLaunchKernelEx(&cfg, kernel, xyz, lengths, N, K, start, idx, G, chunk,
                                        slots, arrivals, min_d));
  }
  if (MODE == kGridGroup) {
    cudaError_t err = cudaMemsetAsync(arrivals, 0, static_cast<size_t>(B) * sizeof(unsigned long long), s);
    if (err != cudaSuccess) return cudaGetErrorString(err);
    void* args[] = {&xyz, &lengths, &N, &K, &start, &idx, &G, &chunk, &slots, &arrivals, &min_d};
    return status_of(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel), grid, block,
                                                 args, 0, s));
  }
  kernel<<<grid, block, 0, s>>>(xyz, lengths, N, K, start, idx, G, chunk, slots, arrivals, min_d);
  return launch_status();
}

template <class T, int MODE>
Status launch_registers(int slots_per_thread, const T* xyz, const int64_t* lengths, int64_t B,
                        int64_t N, int64_t K, int64_t start, int64_t* idx, int G, PickSlot* slots,
                        unsigned long long* arrivals, cudaStream_t s) {
  const int64_t chunk = static_cast<int64_t>(slots_per_thread) * kThreads;
#define POINTOPS_FPS_SLOTS(S)                                                                   \
  case S:                                                                                       \
    return launch_group<T, RegisterPoints<T, S>, MODE>(xyz, lengths, B, N, K, start, idx, G,    \
                                                       chunk, slots, arrivals, nullptr, s);
  switch (slots_per_thread) {
    POINTOPS_FPS_SLOTS(1)
    POINTOPS_FPS_SLOTS(2)
    POINTOPS_FPS_SLOTS(4)
    POINTOPS_FPS_SLOTS(8)
    POINTOPS_FPS_SLOTS(16)
    POINTOPS_FPS_SLOTS(32)
  }
#undef POINTOPS_FPS_SLOTS
  return "pointops: internal error (FPS slots per thread)";
}

// Blocks of `kernel` that can be resident at once on the current device.
template <class Kernel>
int64_t resident_blocks(Kernel kernel) {
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return static_cast<int64_t>(per_sm) * current_device_sm_count();
}

template <class T>
int64_t resident_register_blocks(int slots_per_thread) {
  switch (slots_per_thread) {
    case 8:
      return resident_blocks(fps_group_kernel<T, RegisterPoints<T, 8>, kGridGroup>);
    case 16:
      return resident_blocks(fps_group_kernel<T, RegisterPoints<T, 16>, kGridGroup>);
    case 32:
      return resident_blocks(fps_group_kernel<T, RegisterPoints<T, 32>, kGridGroup>);
  }
  return 0;
}

template <class T>
bool cluster_fits(int G, int slots_per_thread) {
  // Ask the occupancy calculator whether at least one cluster of G such blocks fits.
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned int>(G));
  cfg.blockDim = dim3(kThreads);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned int>(G);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  int clusters = 0;
  cudaError_t err = cudaErrorInvalidValue;
#define POINTOPS_FPS_FITS(S)                                                                    \
  case S: {                                                                                     \
    auto kernel = fps_group_kernel<T, RegisterPoints<T, S>, kClusterGroup>;                     \
    if (G > 8) cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1); \
    err = cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg);                              \
    break;                                                                                      \
  }
  switch (slots_per_thread) {
    POINTOPS_FPS_FITS(1)
    POINTOPS_FPS_FITS(2)
    POINTOPS_FPS_FITS(4)
    POINTOPS_FPS_FITS(8)
    POINTOPS_FPS_FITS(16)
    POINTOPS_FPS_FITS(32)
  }
#undef POINTOPS_FPS_FITS
  if (err != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return clusters > 0;
}

struct Workspace {
  float* min_d;  // B*N (general and stream paths; the general path uses acc_t<T>)
  PickSlot* slots;
  unsigned long long* arrivals;
  size_t bytes;
};

Workspace carve_workspace(void* base, Dtype dt, int64_t B, int64_t N) {
  WorkspaceCarver carve(base);
  Workspace ws;
  ws.min_d = carve.take<float>(static_cast<size_t>(B * N) * (dtype_acc_bytes(dt) / sizeof(float)));
  // The grid and stream paths never use more than one block per kThreads points of a cloud.
  ws.slots = carve.take<PickSlot>(static_cast<size_t>(B) * 2 *
                                  static_cast<size_t>(ceil_div(N, kThreads) + 1));
  ws.arrivals = carve.take<unsigned long long>(static_cast<size_t>(B));
  ws.bytes = carve.used();
  return ws;
}

template <class T>
Status fps_fast(const T* xyz, const int64_t* lengths, int64_t B, int64_t N, int64_t K,
                int64_t start, int64_t* idx, const Workspace& ws, cudaStream_t s, bool* done) {
  *done = true;
  const int sms = current_device_sm_count();
  const bool clusters = current_device_major() >= 9 && env_int("POINTOPS_FPS_NO_CLUSTER", 0) == 0;
  const int64_t block_cap = static_cast<int64_t>(kMaxSlots) * kThreads;

  // Cluster (or single-block) path: the cloud fits the registers of at most 16 blocks. Use
  // enough blocks per cloud to spread B clouds over the GPU, but give each block >= 512 points.
  const int64_t needed = ceil_div(N, block_cap);  // blocks whose registers hold the cloud
  if (needed <= kMaxCluster) {
    int G = pow2_at_least(needed);
    int spread = 1;
    while (spread * 2 * B <= sms && spread * 2 <= kMaxCluster && spread * 2 * 512 <= N) spread *= 2;
    if (spread > G) G = spread;
    const int forced = env_int("POINTOPS_FPS_GROUP", 0);
    if (forced > 0 && forced <= kMaxCluster && forced >= needed) G = pow2_at_least(forced);
    auto slots_for = [&](int g) { return pow2_at_least(ceil_div(ceil_div(N, g), kThreads)); };
    if (G > 1 && clusters && cluster_fits<T>(G, slots_for(G))) {
      return launch_registers<T, kClusterGroup>(slots_for(G), xyz, lengths, B, N, K, start, idx, G,
                                                ws.slots, ws.arrivals, s);
    }
    if (needed == 1) {
      return launch_registers<T, kBlockGroup>(slots_for(1), xyz, lengths, B, N, K, start, idx, 1,
                                              ws.slots, ws.arrivals, s);
    }
  }

  // Grid path: all blocks of all clouds resident at once, points in registers.
  for (int slots : {32, 16, 8}) {  // fewer, fuller blocks: a cheaper barrier
    const int64_t G = ceil_div(N, static_cast<int64_t>(slots) * kThreads);
    if (G >= 2 && B * G <= resident_register_blocks<T>(slots)) {
      return launch_registers<T, kGridGroup>(slots, xyz, lengths, B, N, K, start, idx,
                                             static_cast<int>(G), ws.slots, ws.arrivals, s);
    }
  }

  // Stream path: as many resident blocks per cloud as fit.
  const int64_t resident = resident_blocks(fps_group_kernel<T, StreamPoints<T>, kGridGroup>);
  const int64_t per_cloud = resident / B;
  if (per_cloud >= 2) {
    int64_t G = per_cloud < ceil_div(N, kThreads) ? per_cloud : ceil_div(N, kThreads);
    if (G >= 2) {
      const int64_t chunk = ceil_div(N, G);
      return launch_group<T, StreamPoints<T>, kGridGroup>(xyz, lengths, B, N, K, start, idx,
                                                          static_cast<int>(G), chunk, ws.slots,
                                                          ws.arrivals, ws.min_d, s);
    }
  }
  *done = false;
  return nullptr;
}

}  // namespace

size_t furthest_point_sample_cuda_workspace_bytes(Dtype dt, int64_t B, int64_t N, int64_t K) {
  (void)K;
  return carve_workspace(nullptr, dt, B, N).bytes;
}

Status furthest_point_sample_cuda(Dtype dt, const void* xyz, const int64_t* lengths, int64_t B,
                                  int64_t N, int64_t K, int64_t start, int64_t* idx,
                                  void* workspace, void* stream) {
  if (B == 0 || K == 0) return nullptr;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const Workspace ws = carve_workspace(workspace, dt, B, N);
  const bool general_only = env_int("POINTOPS_FPS_GENERAL", 0) != 0;
  return dispatch_dtype(dt, [&](auto tag) -> Status {
    using T = decltype(tag);
    if constexpr (!std::is_same<T, double>::value) {
      // Indices travel as 32-bit (with 0xffffffff as "none"), so the fast paths need N < 2^32-1.
      if (!general_only && N > 0 && N < static_cast<int64_t>(UINT32_MAX)) {
        bool done = false;
        const Status st = fps_fast<T>(static_cast<const T*>(xyz), lengths, B, N, K, start, idx, ws,
                                      s, &done);
        if (done) return st;
      }
    }
    fps_generic_kernel<T><<<static_cast<unsigned int>(B), kGenericThreads, 0, s>>>(
        static_cast<const T*>(xyz), lengths, N, K, start, idx,
        reinterpret_cast<acc_t<T>*>(ws.min_d));
    return launch_status();
  });
}

}  // namespace pointops
