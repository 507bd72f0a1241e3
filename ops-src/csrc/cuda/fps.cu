// Farthest point sampling on CUDA.
//
// FPS is K sequential steps, each a pass over the cloud and an argmax, so the cost is the
// per-step latency, not bandwidth. The strategies, chosen at run time from (B, N, device):
//  - register path (float32; a float16/bfloat16 cloud is widened to float32 once, into the
//    workspace, by a short kernel): a group of G blocks owns one cloud, each thread keeps up to
//    kMaxSlots points and their min-distances in registers (plus, when a block's share is
//    larger, a tail in shared memory), and per step the group agrees on the farthest point:
//      * G = 1: one block per cloud (small clouds, or no cluster support); with every point in
//        registers, the lean variant finds each thread's farthest point by a tree over its
//        slots, reduces 64-bit keys only and reads the winner's coordinates back by index, in
//        blocks of 128 threads (one warp per SM scheduler) where the registers allow;
//      * cluster: G <= 16 blocks of a Hopper+ thread-block cluster push their winners into each
//        other's shared memory and meet at a hardware cluster barrier;
//      * grid: G co-resident blocks (cooperative launch) exchange winners through global memory,
//        one self-tagged 64-bit word per block and step (large clouds).
//  - stream path: like the grid path, but points and min-distances stay in global memory
//    (clouds too large for the registers of the whole GPU; 16-bit clouds are read as they are).
//  - general path (float64, or anything the others cannot take): one block per cloud, points
//    and min-distances in global memory.
// A cost model measured on an H200 picks G (POINTOPS_FPS_GROUP overrides it for benchmarks).
// Every path picks the largest min-distance, lowest index on ties, with the same rounding.
// Widening first changes no pick (every path widens each coordinate to float32 as it loads it)
// and saves time: on an H100 the register kernel's 16-bit builds took 1.02x the float32 one's
// time per step (B1 N100000 K1024), and widening costs one 2.5 us kernel.
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
    fps_generic_kernel(const T* __restrict__ xyz, CloudRows clouds, CloudRows samples, int64_t start,
                       int64_t* __restrict__ idx, acc_t<T>* min_d) {
  using A = acc_t<T>;
  __shared__ A warp_d[2][32];
  __shared__ int64_t warp_i[2][32];
  const int64_t b = blockIdx.x;
  const int64_t n = clouds.count(b), K = samples.count(b), base = clouds.index_base(b);
  const T* pts = xyz + clouds.begin(b) * 3;
  A* md = min_d + clouds.begin(b);
  int64_t* out = idx + samples.begin(b);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nwarps = blockDim.x >> 5;

  for (int64_t i = n + tid; i < K; i += blockDim.x) out[i] = -1;
  // A cloud asking for no samples has no slot: out[0] is the next cloud's first.
  if (n == 0 || K == 0) return;
  for (int64_t i = tid; i < n; i += blockDim.x) md[i] = acc_inf<A>();

  int64_t cur = start < 0 ? 0 : (start > n - 1 ? n - 1 : start);
  const int64_t picks = K < n ? K : n;
  for (int64_t k = 0;; ++k) {
    if (tid == 0) out[k] = cur + base;
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

// A 16-bit cloud for the register paths, widened to float32 (`count` values).
template <class T>
__global__ void widen_points_kernel(const T* __restrict__ in, float* __restrict__ out, int64_t count) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count; i += stride) {
    out[i] = to_acc(in[i]);
  }
}

// ---------------------------------------------------------------------------------------------
// Register, stream, cluster and grid paths (float accumulation, cloud index < 2^32 - 1).

constexpr int kThreads = 256;
constexpr int kLeanThreads = 128;  // lean path: fewer warps to reduce over, same issue rate
constexpr int kMaxSlots = 32;      // points per thread in registers
constexpr int kMaxCluster = 16;

enum GroupMode : int { kBlockGroup = 0, kClusterGroup = 1, kGridGroup = 2, kLeanBlock = 3 };

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

// Every lane ends with the best Pick of the warp.
__device__ __forceinline__ Pick warp_pick(Pick p) {
#ifdef POINTOPS_WARP_REDUX
  const uint32_t dmax = __reduce_max_sync(0xffffffffu, p.d);
  const uint32_t imin = __reduce_min_sync(0xffffffffu, p.d == dmax ? p.i : 0xffffffffu);
#else
  uint32_t dmax = p.d, imin = p.i;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const uint32_t od = __shfl_xor_sync(0xffffffffu, dmax, offset);
    const uint32_t oi = __shfl_xor_sync(0xffffffffu, imin, offset);
    if (od > dmax || (od == dmax && oi < imin)) {
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

// Points of one block held in registers: slot s of thread t is point base + s*THREADS + t.
template <class T, int SLOTS, int THREADS = kThreads>
struct RegisterPoints {
  static constexpr int kBlock = THREADS;
  float x[SLOTS], y[SLOTS], z[SLOTS], md[SLOTS];
  int64_t base;

  __device__ __forceinline__ void load(const T* pts, float* /*min_d*/, int64_t first, int64_t /*end*/,
                                       int64_t n, float4* /*tail*/) {
    base = first;
#pragma unroll
    for (int s = 0; s < SLOTS; ++s) {
      const int64_t i = first + s * THREADS + threadIdx.x;
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

  // Updates min-distances with the last pick and returns this thread's farthest slot (its
  // min-distance in `best`; -1 when the thread holds no real point, as padding slots hold -1).
  // A pairwise tree over the slots: log2(SLOTS) compares deep where a running maximum is SLOTS
  // deep, and fewer instructions than a running maximum whose index is recovered afterwards.
  __device__ __forceinline__ int farthest_slot(float cx, float cy, float cz, float& best) {
    float v[SLOTS];
    int slot[SLOTS];
#pragma unroll
    for (int s = 0; s < SLOTS; ++s) {
      md[s] = fminf(md[s], dist2(x[s], y[s], z[s], cx, cy, cz));
      v[s] = md[s];
      slot[s] = s;
    }
#pragma unroll
    for (int width = 1; width < SLOTS; width *= 2) {
#pragma unroll
      for (int s = 0; s + width < SLOTS; s += 2 * width) {
        // The right half holds the higher slots, so it wins only when strictly farther.
        slot[s] = v[s + width] > v[s] ? slot[s + width] : slot[s];
        v[s] = fmaxf(v[s], v[s + width]);  // min-distances are never NaN
      }
    }
    best = v[0];
    return slot[0];
  }

  // The lean block path's update: this thread's farthest point without its coordinates.
  __device__ __forceinline__ Pick update_farthest(float cx, float cy, float cz) {
    float best;
    const int bs = farthest_slot(cx, cy, cz, best);
    const bool none = best < 0.f;
    Pick p;
    p.d = none ? 0u : __float_as_uint(best);
    p.i = none ? 0xffffffffu : static_cast<uint32_t>(base + bs * THREADS + threadIdx.x);
    return p;
  }

  // Updates min-distances with the last pick and returns this thread's farthest point.
  __device__ __forceinline__ Pick update(float cx, float cy, float cz) {
    float best;
    const int bs = farthest_slot(cx, cy, cz, best);
    if (best < 0.f) return no_pick();
    Pick p;
    p.d = __float_as_uint(best);
    p.i = static_cast<uint32_t>(base + bs * THREADS + threadIdx.x);
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
  static constexpr int kBlock = kThreads;
  const T* pts;
  float* md;
  int64_t first, last;

  __device__ __forceinline__ void load(const T* cloud, float* min_d, int64_t begin, int64_t end,
                                       int64_t /*n*/, float4* /*tail*/) {
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
      const float m =
          fminf(md[i], dist2(to_acc(pts[i * 3]), to_acc(pts[i * 3 + 1]), to_acc(pts[i * 3 + 2]), cx, cy, cz));
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

// The first SLOTS*kThreads points of the block in registers, the rest of its chunk in shared
// memory as (x, y, z, min-distance): lets a few blocks hold clouds too large for their registers.
template <class T, int SLOTS>
struct HybridPoints {
  static constexpr int kBlock = kThreads;
  RegisterPoints<T, SLOTS> regs;
  float4* tail;
  int64_t tail_first, tail_len;

  __device__ __forceinline__ void load(const T* cloud, float* min_d, int64_t begin, int64_t end, int64_t n,
                                       float4* shared_tail) {
    regs.load(cloud, min_d, begin, end, n, shared_tail);
    tail = shared_tail;
    tail_first = begin + static_cast<int64_t>(SLOTS) * kThreads;
    tail_len = end > tail_first ? end - tail_first : 0;
    // Each thread later reads only the entries it wrote here: no barrier needed.
    for (int64_t i = threadIdx.x; i < tail_len; i += kThreads) {
      const int64_t j = tail_first + i;
      tail[i] = make_float4(to_acc(cloud[j * 3]), to_acc(cloud[j * 3 + 1]), to_acc(cloud[j * 3 + 2]),
                            acc_inf<float>());
    }
  }

  __device__ __forceinline__ Pick update(float cx, float cy, float cz) {
    Pick p = regs.update(cx, cy, cz);
    float best = p.i == 0xffffffffu ? -1.f : __uint_as_float(p.d);
    int64_t bi = -1;
    for (int64_t i = threadIdx.x; i < tail_len; i += kThreads) {
      const float4 v = tail[i];
      const float m = fminf(v.w, dist2(v.x, v.y, v.z, cx, cy, cz));
      tail[i].w = m;
      if (m > best) {  // tail indices follow the register ones: ">" keeps the lowest on ties
        best = m;
        bi = i;
      }
    }
    if (bi >= 0) {
      const float4 v = tail[bi];
      p = Pick{__float_as_uint(best), static_cast<uint32_t>(tail_first + bi), v.x, v.y, v.z};
    }
    return p;
  }
};

// The block's best Pick, known to every thread. One barrier (double-buffered slots).
template <int WARPS>
__device__ __forceinline__ Pick block_pick(Pick p, PickSlot (*warp_slots)[WARPS], int buf) {
  p = warp_pick(p);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) store_slot(warp_slots[buf][warp], p);
  __syncthreads();
  Pick q = lane < WARPS ? load_slot(warp_slots[buf][lane]) : no_pick();
  return warp_pick(q);
}

// Lean block reduction (one block per cloud, points in registers): a Pick packed into one
// 64-bit key, larger = better (distance bits high, complemented index low, so ties go to the
// lower index). Coordinates are not carried through the reduction: the winner's are read
// back from the cloud by index, which stays in L1 after the initial load.
__device__ __forceinline__ unsigned long long pick_key(uint32_t d, uint32_t i) {
  return (static_cast<unsigned long long>(d) << 32) | static_cast<unsigned long long>(~i);
}

__device__ __forceinline__ unsigned long long warp_key(uint32_t d, uint32_t i) {
#ifdef POINTOPS_WARP_REDUX
  const uint32_t dmax = __reduce_max_sync(0xffffffffu, d);
  const uint32_t imin = __reduce_min_sync(0xffffffffu, d == dmax ? i : 0xffffffffu);
  return pick_key(dmax, imin);
#else
  unsigned long long key = pick_key(d, i);
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const unsigned long long other = __shfl_xor_sync(0xffffffffu, key, offset);
    key = other > key ? other : key;
  }
  return key;
#endif
}

// The block's best key, known to every thread: one barrier, then each thread folds the
// per-warp keys from shared memory itself (broadcast reads, no second warp reduction), as a
// pairwise tree: log2(WARPS) dependent 64-bit compares instead of WARPS - 1.
template <int WARPS>
__device__ __forceinline__ unsigned long long block_key(uint32_t d, uint32_t i,
                                                        unsigned long long (*warp_keys)[WARPS], int buf) {
  const unsigned long long key = warp_key(d, i);
  if ((threadIdx.x & 31) == 0) warp_keys[buf][threadIdx.x >> 5] = key;
  __syncthreads();
  unsigned long long k[WARPS];
#pragma unroll
  for (int w = 0; w < WARPS; ++w) k[w] = warp_keys[buf][w];
#pragma unroll
  for (int width = 1; width < WARPS; width *= 2) {
#pragma unroll
    for (int w = 0; w + width < WARPS; w += 2 * width) k[w] = k[w + width] > k[w] ? k[w + width] : k[w];
  }
  return k[0];
}

// The grid path's exchange, run by warp 0 of each block: publishes the block's best key for
// step k and returns the cloud's winner over its G blocks, coordinates read back by index. A
// key is one 64-bit word, written and read whole, and tagged in bit 63 (free: its distance bits
// are a non-negative float's) with the step, so a reader polls the words themselves: no counter
// barrier, no fence. The words are double-buffered by step parity and start zeroed; the tag
// (k + 1) / 2 % 2 tells this step's word from the one two steps back, and none from further on
// can be there yet, as no block passes step k + 1 before this block has published it.
// (On an H100 at N = 1M this took a step from 3.6 to 2.5 us against a counter barrier with
// 32-byte winners; carrying the coordinates in two more tagged words, 3.3 us, was slower than
// reading them back.)
constexpr unsigned long long kStepTag = 1ull << 63;
constexpr int kPollWidth = 4;  // words per lane read together per round

template <class T>
__device__ __forceinline__ Pick grid_exchange(unsigned long long* words, int G, int rank, int64_t k,
                                              unsigned long long key, const T* pts) {
  using Word = cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>;
  const unsigned long long tag = ((k + 1) >> 1) & 1 ? kStepTag : 0ull;
  const int lane = threadIdx.x & 31;
  if (lane == 0) Word(words[rank]).store(key | tag, cuda::memory_order_relaxed);
  unsigned long long best = 0;
  for (int r0 = 0; r0 < G; r0 += 32 * kPollWidth) {
    unsigned long long w[kPollWidth];
    bool ready;
    do {  // every word of the round at once: one memory round trip per try
      ready = true;
#pragma unroll
      for (int j = 0; j < kPollWidth; ++j) {
        const int r = r0 + j * 32 + lane;
        w[j] = r < G ? Word(words[r]).load(cuda::memory_order_relaxed) : tag;
        ready = ready && (w[j] & kStepTag) == tag;
      }
    } while (!ready);
#pragma unroll
    for (int j = 0; j < kPollWidth; ++j) {
      const unsigned long long v = w[j] & ~kStepTag;
      best = v > best ? v : best;
    }
  }
  // The lane's own candidate's coordinates load while the warp finds the winner; the lane
  // that holds the winner then hands them on. (Loading the winner's after the reduction put a
  // memory round trip on every step.) Key 0 is no candidate: padding or a block with no points.
  float x = 0.f, y = 0.f, z = 0.f;
  if (best != 0) {
    const uint64_t i = ~static_cast<uint32_t>(best);
    x = to_acc(pts[i * 3]);
    y = to_acc(pts[i * 3 + 1]);
    z = to_acc(pts[i * 3 + 2]);
  }
  const uint32_t d = static_cast<uint32_t>(best >> 32), low = static_cast<uint32_t>(best);
#ifdef POINTOPS_WARP_REDUX
  const uint32_t dmax = __reduce_max_sync(0xffffffffu, d);
  const uint32_t lowmax = __reduce_max_sync(0xffffffffu, d == dmax ? low : 0u);
#else
  unsigned long long top = best;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const unsigned long long other = __shfl_xor_sync(0xffffffffu, top, offset);
    top = other > top ? other : top;
  }
  const uint32_t dmax = static_cast<uint32_t>(top >> 32), lowmax = static_cast<uint32_t>(top);
#endif
  // Keys are distinct (one block per point), so one lane owns the winner.
  const int owner = __ffs(__ballot_sync(0xffffffffu, d == dmax && low == lowmax)) - 1;
  return Pick{dmax, ~lowmax, __shfl_sync(0xffffffffu, x, owner), __shfl_sync(0xffffffffu, y, owner),
              __shfl_sync(0xffffffffu, z, owner)};
}

// One kernel for the register and stream paths and the three group modes.
// Grid: B * G blocks; cloud = blockIdx.x / G, rank in the cloud's group = blockIdx.x % G.
template <class T, class Points, int MODE>
__global__ void __launch_bounds__(Points::kBlock)
    fps_group_kernel(const T* __restrict__ xyz, CloudRows clouds, CloudRows samples, int64_t start,
                     int64_t* __restrict__ idx, int G, int64_t chunk,
                     unsigned long long* __restrict__ grid_words, float* __restrict__ min_d) {
  constexpr int kBlock = Points::kBlock;
  __shared__ PickSlot warp_slots[2][kBlock / 32];
  __shared__ PickSlot cluster_slots[2][kMaxCluster];
  __shared__ alignas(16) unsigned long long warp_keys[2][kBlock / 32];
  const int64_t b = blockIdx.x / G;
  const int rank = static_cast<int>(blockIdx.x % G);
  const int64_t n = clouds.count(b), K = samples.count(b), base = clouds.index_base(b);
  const T* pts = xyz + clouds.begin(b) * 3;
  int64_t* out = idx + samples.begin(b);
  const int lane = threadIdx.x & 31;
  (void)grid_words, (void)cluster_slots, (void)warp_keys;  // unused by some modes

  if (rank == 0) {
    for (int64_t i = n + threadIdx.x; i < K; i += kBlock) out[i] = -1;
  }
  // n == 0 ends every block of the group alike, so no barrier is left waiting.
  if (n == 0) return;

  extern __shared__ float4 shared_tail[];  // HybridPoints only (dynamic shared memory)
  Points points;
  const int64_t begin = rank * chunk;
  const int64_t end = begin + chunk < n ? begin + chunk : n;
  points.load(pts, min_d + clouds.begin(b), begin, end, n, shared_tail);

  int64_t cur = start < 0 ? 0 : (start > n - 1 ? n - 1 : start);
  float cx = to_acc(pts[cur * 3]), cy = to_acc(pts[cur * 3 + 1]), cz = to_acc(pts[cur * 3 + 2]);
  const int64_t picks = K < n ? K : n;
  // Picks stay in registers (thread t keeps step k with k % kBlock == t) and are stored every
  // kBlock steps: a global store before a cluster or grid barrier would make its release wait
  // for the store to reach L2, on every step.
  uint32_t held_pick = static_cast<uint32_t>(cur);
  if constexpr (MODE == kClusterGroup) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    cg::this_cluster().sync();  // every block of the cluster has started before any remote store
#endif
  }

  for (int64_t k = 1; k < picks; ++k) {
    const int buf = static_cast<int>(k & 1);
    Pick p;
    if constexpr (MODE == kClusterGroup) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      // Push exchange: each block reduces to its winner, lane r of warp 0 stores it into block
      // r's shared memory, one cluster barrier, then every warp reduces the G local entries.
      cg::cluster_group cluster = cg::this_cluster();
      p = block_pick(points.update(cx, cy, cz), warp_slots, buf);
      if (threadIdx.x < G) {
        store_slot(*cluster.map_shared_rank(&cluster_slots[buf][rank], static_cast<int>(threadIdx.x)), p);
      }
      cluster.sync();
      p = warp_pick(lane < G ? load_slot(cluster_slots[buf][lane]) : no_pick());
#else
      p = no_pick();
      __trap();  // the host launches cluster groups only on devices that have them
#endif
    } else if constexpr (MODE == kGridGroup) {
      const Pick mine = points.update(cx, cy, cz);
      const unsigned long long key = block_key(mine.d, mine.i, warp_keys, buf);
      __shared__ PickSlot group_pick[2];
      if (threadIdx.x < 32) {
        p = grid_exchange(grid_words + (b * 2 + buf) * static_cast<int64_t>(G), G, rank, k, key, pts);
        if (lane == 0) store_slot(group_pick[buf], p);
      }
      __syncthreads();
      p = load_slot(group_pick[buf]);
    } else if constexpr (MODE == kLeanBlock) {
      const Pick mine = points.update_farthest(cx, cy, cz);
      p.i = ~static_cast<uint32_t>(block_key(mine.d, mine.i, warp_keys, buf));
      p.x = to_acc(pts[p.i * 3ull]);
      p.y = to_acc(pts[p.i * 3ull + 1]);
      p.z = to_acc(pts[p.i * 3ull + 2]);
    } else {
      p = block_pick(points.update(cx, cy, cz), warp_slots, buf);
    }

    cx = p.x;
    cy = p.y;
    cz = p.z;
    const int64_t slot = k % kBlock;
    if (slot == threadIdx.x) held_pick = p.i;
    if (slot == kBlock - 1 && rank == 0) out[k - slot + threadIdx.x] = held_pick + base;
  }
  // The last, partial round of held picks.
  const int64_t last_round = ((picks - 1) / kBlock) * kBlock;
  if (rank == 0 && picks % kBlock != 0 && last_round + threadIdx.x < picks) {
    out[last_round + threadIdx.x] = held_pick + base;
  }
  if constexpr (MODE == kClusterGroup) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    cg::this_cluster().sync();  // no block may leave while others still read its shared memory
#endif
  }
}

// ---------------------------------------------------------------------------------------------
// Host side: plan and launch.

constexpr int64_t kRegisterCap = static_cast<int64_t>(kMaxSlots) * kThreads;  // points per block
constexpr int64_t kMaxTail = 12288;  // points per block in shared memory (192 KB)

int pow2_at_least(int64_t v) {
  int p = 1;
  while (p < v) p <<= 1;
  return p;
}

// G blocks per cloud, each owning `chunk` points: in registers (`slots` per thread), plus a
// shared-memory tail of `chunk - kRegisterCap` points when `hybrid`.
struct GroupPlan {
  int G = 0;
  int threads = kThreads;
  int64_t chunk = 0;
  int slots = 0;
  bool hybrid = false;
  size_t smem = 0;
  bool valid() const { return G > 0; }
};

GroupPlan plan_for(int64_t N, int G) {
  GroupPlan plan;
  const int64_t chunk = ceil_div(N, G);
  if (chunk <= kRegisterCap) {
    plan.slots = pow2_at_least(ceil_div(chunk, kThreads));
    plan.chunk = static_cast<int64_t>(plan.slots) * kThreads;
  } else if (chunk - kRegisterCap <= kMaxTail &&
             (chunk - kRegisterCap) * static_cast<int64_t>(sizeof(float4)) <= dynamic_smem_limit()) {
    plan.slots = kMaxSlots;
    plan.chunk = chunk;
    plan.hybrid = true;
    plan.smem = static_cast<size_t>(chunk - kRegisterCap) * sizeof(float4);
  } else {
    return plan;
  }
  plan.G = G;
  return plan;
}

// Sets the kernel attributes a plan needs.
template <class Kernel>
cudaError_t prepare(Kernel kernel, const GroupPlan& plan, int mode) {
  cudaError_t err = allow_dynamic_smem(kernel, plan.smem);
  if (err == cudaSuccess && mode == kClusterGroup && plan.G > 8) {
    err = kernel_attribute_at_least(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  }
  return err;
}

void cluster_config(cudaLaunchConfig_t* cfg, cudaLaunchAttribute* attr, unsigned int blocks,
                    const GroupPlan& plan, cudaStream_t s) {
  *cfg = cudaLaunchConfig_t{};
  cfg->gridDim = dim3(blocks);
  cfg->blockDim = dim3(plan.threads);
  cfg->dynamicSmemBytes = plan.smem;
  cfg->stream = s;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = static_cast<unsigned int>(plan.G);
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  cfg->attrs = attr;
  cfg->numAttrs = 1;
}

// The grid exchange's words: one per block of a cloud, double-buffered.
size_t grid_word_count(int64_t B, int G) { return static_cast<size_t>(B) * 2 * static_cast<size_t>(G); }

struct LaunchArgs {
  CloudRows clouds, samples;
  int64_t B, start;
  int64_t* idx;
  unsigned long long* grid_words;
  float* min_d;
  cudaStream_t stream;
};

template <class T, class Points, int MODE>
Status launch_group(const T* xyz, const LaunchArgs& a, const GroupPlan& plan) {
  auto kernel = fps_group_kernel<T, Points, MODE>;
  if (cudaError_t err = prepare(kernel, plan, MODE)) return cudaGetErrorString(err);
  const unsigned int blocks = static_cast<unsigned int>(a.B * plan.G);
  int G = plan.G;
  int64_t chunk = plan.chunk, start = a.start;
  CloudRows clouds = a.clouds, samples = a.samples;
  int64_t* idx = a.idx;
  unsigned long long* grid_words = a.grid_words;
  float* min_d = a.min_d;
  if (MODE == kClusterGroup) {
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute attr[1];
    cluster_config(&cfg, attr, blocks, plan, a.stream);
    return status_of(
        cudaLaunchKernelEx(&cfg, kernel, xyz, clouds, samples, start, idx, G, chunk, grid_words, min_d));
  }
  if (MODE == kGridGroup) {
    cudaError_t err =
        cudaMemsetAsync(grid_words, 0, grid_word_count(a.B, G) * sizeof(unsigned long long), a.stream);
    if (err != cudaSuccess) return cudaGetErrorString(err);
    void* args[] = {&xyz, &clouds, &samples, &start, &idx, &G, &chunk, &grid_words, &min_d};
    return status_of(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel), dim3(blocks),
                                                 dim3(Points::kBlock), args, plan.smem, a.stream));
  }
  kernel<<<blocks, Points::kBlock, plan.smem, a.stream>>>(xyz, clouds, samples, start, idx, G, chunk,
                                                          grid_words, min_d);
  return launch_status();
}

// Calls f(RegisterPoints<T, slots>{}) for the plan's slot count.
template <class T, class F>
auto with_register_points(const GroupPlan& plan, F&& f) {
  switch (plan.slots) {
    case 1: return f(RegisterPoints<T, 1>{});
    case 2: return f(RegisterPoints<T, 2>{});
    case 4: return f(RegisterPoints<T, 4>{});
    case 8: return f(RegisterPoints<T, 8>{});
    case 16: return f(RegisterPoints<T, 16>{});
    default: return f(RegisterPoints<T, 32>{});
  }
}

// Calls f(Points{}) with the point-holding policy of a register plan.
template <class T, class F>
auto with_points(const GroupPlan& plan, F&& f) {
  if (plan.hybrid) return f(HybridPoints<T, kMaxSlots>{});
  return with_register_points<T>(plan, f);
}

// Calls f(Points{}) for the lean path: the plan's points (kThreads x slots) held by
// kLeanThreads threads with twice the slots, when those still fit in registers.
template <class T, class F>
auto with_lean_points(const GroupPlan& plan, F&& f) {
  switch (plan.slots) {
    case 1: return f(RegisterPoints<T, 2, kLeanThreads>{});
    case 2: return f(RegisterPoints<T, 4, kLeanThreads>{});
    case 4: return f(RegisterPoints<T, 8, kLeanThreads>{});
    case 8: return f(RegisterPoints<T, 16, kLeanThreads>{});
    case 16: return f(RegisterPoints<T, 32, kLeanThreads>{});
    default: return f(RegisterPoints<T, kMaxSlots, kThreads>{});
  }
}

// The lean one-block-per-cloud path (register plans only).
template <class T>
Status launch_lean(const T* xyz, const LaunchArgs& a, const GroupPlan& plan) {
  return with_lean_points<T>(plan, [&](auto points) -> Status {
    return launch_group<T, decltype(points), kLeanBlock>(xyz, a, plan);
  });
}

template <class T, int MODE>
Status launch_plan(const T* xyz, const LaunchArgs& a, const GroupPlan& plan) {
  return with_points<T>(
      plan, [&](auto points) -> Status { return launch_group<T, decltype(points), MODE>(xyz, a, plan); });
}

// Blocks of a kernel that can be resident at once on the current device (0 if unknown).
template <class Kernel>
int64_t resident_blocks(Kernel kernel, size_t smem, int threads = kThreads) {
  int per_sm = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return static_cast<int64_t>(per_sm) * current_device_sm_count();
}

// How many clouds of this plan run at once: clusters (G > 1) or blocks (G == 1); 0 if none fits.
template <class T>
int64_t concurrent_clouds(const GroupPlan& plan, bool clusters, bool lean) {
  if (lean) {
    return with_lean_points<T>(plan, [&](auto points) -> int64_t {
      using Points = decltype(points);
      return resident_blocks(fps_group_kernel<T, Points, kLeanBlock>, 0, Points::kBlock);
    });
  }
  return with_points<T>(plan, [&](auto points) -> int64_t {
    using Points = decltype(points);
    if (plan.G == 1) {
      auto kernel = fps_group_kernel<T, Points, kBlockGroup>;
      if (prepare(kernel, plan, kBlockGroup) != cudaSuccess) {
        cudaGetLastError();
        return 0;
      }
      return resident_blocks(kernel, plan.smem, plan.threads);
    }
    if (!clusters) return 0;
    auto kernel = fps_group_kernel<T, Points, kClusterGroup>;
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute attr[1];
    cluster_config(&cfg, attr, static_cast<unsigned int>(plan.G), plan, nullptr);
    int count = 0;
    if (prepare(kernel, plan, kClusterGroup) != cudaSuccess ||
        cudaOccupancyMaxActiveClusters(&count, kernel, &cfg) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return count;
  });
}

// Estimated microseconds per step of one wave (calibrated on an H200): block reduction,
// cluster exchange growing with G, and the per-thread update of registers and tail.
double step_cost_us(const GroupPlan& plan, bool lean) {
  if (lean) {  // measured at N = 1000..8192: 128 threads x 2*slots, or 256 threads x 32 slots
    return plan.slots < kMaxSlots ? 0.18 + 0.0085 * 2 * plan.slots : 0.23 + 0.0156 * plan.slots;
  }
  // Measured exchange cost of the cluster push and barrier, by cluster size.
  const int G = plan.G;
  const double exchange = G >= 16 ? 0.97 : G >= 8 ? 0.52 : G >= 4 ? 0.45 : G >= 2 ? 0.39 : 0.0;
  const int64_t in_registers = plan.chunk < kRegisterCap ? plan.chunk : kRegisterCap;
  const int64_t tail_rounds = plan.hybrid ? ceil_div(plan.chunk - kRegisterCap, kThreads) : 0;
  return 0.37 + exchange + 0.022 * static_cast<double>(in_registers) / kThreads +
         0.044 * static_cast<double>(tail_rounds);
}

// Grid plans: every block on an SM of its own where the clouds allow, with the fewest slots
// (a second block on an SM slowed the step more than the shorter update gained); for larger
// clouds 32, 16 or 8 slots and as many blocks per SM as are resident. An invalid plan where
// none fits (or none has the forced G).
template <class T>
GroupPlan grid_plan(int64_t B, int64_t N, int64_t forced) {
  struct Shape {
    int slots;
    bool one_per_sm;
  };
  constexpr Shape kShapes[] = {{2, true},  {4, true},   {8, true},   {16, true},
                               {32, true}, {32, false}, {16, false}, {8, false}};
  const int64_t sms = current_device_sm_count();
  for (const Shape& sh : kShapes) {
    const int64_t G = ceil_div(N, static_cast<int64_t>(sh.slots) * kThreads);
    if (G < 2 || G > INT32_MAX / 2 || (forced > 0 && G != forced) || (sh.one_per_sm && B * G > sms)) continue;
    GroupPlan plan;
    plan.G = static_cast<int>(G);
    plan.slots = sh.slots;
    plan.chunk = static_cast<int64_t>(sh.slots) * kThreads;
    const int64_t resident = with_points<T>(plan, [&](auto points) -> int64_t {
      return resident_blocks(fps_group_kernel<T, decltype(points), kGridGroup>, 0);
    });
    if (B * G <= resident) return plan;
  }
  return GroupPlan{};
}

// Estimated microseconds per step of a grid plan (every cloud at once), measured on an H100 at
// 8 to 32 slots: block reduction, exchange and the read of the winner, and the update.
double grid_step_cost_us(const GroupPlan& plan) { return 1.6 + 0.034 * plan.slots; }

// The paths (CudaPlan::path). Lean, Block, Cluster and Grid hold points in registers.
enum FpsPath : int32_t { kGeneral = 0, kLean = 1, kBlock = 2, kCluster = 3, kGrid = 4, kStream = 5 };

struct FpsChoice {
  FpsPath path = kGeneral;
  GroupPlan plan;
};

// The register and stream paths, chosen by the cost model and the device's occupancy; kGeneral
// where none applies. The register paths run the float32 kernel whatever T is (16-bit clouds
// are widened first); the stream path reads T.
template <class T>
FpsChoice choose_fast(int64_t B, int64_t N) {
  const bool clusters = current_device_major() >= 9 && tuning_or(Knob::FpsNoCluster, 0) == 0;

  // One block or one cluster per cloud: the plan with the lowest estimated time
  // (waves of concurrent clouds x steps x cost per step); the FpsGroup knob forces G.
  const int64_t forced = tuning_or(Knob::FpsGroup, 0);
  // The lean block path (FpsLean = 0 turns it off) takes every G = 1 register plan.
  const bool lean_allowed = tuning_or(Knob::FpsLean, 1) != 0;
  FpsChoice best;
  double best_cost = 0;
  for (int G = 1; G <= kMaxCluster; G *= 2) {
    if (forced > 0 && G != forced) continue;
    const GroupPlan plan = plan_for(N, G);
    if (!plan.valid() || (G > 1 && !clusters)) continue;
    const bool lean = lean_allowed && G == 1 && !plan.hybrid;
    const int64_t concurrent = concurrent_clouds<float>(plan, clusters, lean);
    if (concurrent <= 0) continue;
    const double cost = static_cast<double>(ceil_div(B, concurrent)) * step_cost_us(plan, lean);
    if (best.path == kGeneral || cost < best_cost) {
      best.path = lean ? kLean : (G == 1 ? kBlock : kCluster);
      best.plan = plan;
      best_cost = cost;
    }
  }

  const GroupPlan grid = grid_plan<float>(B, N, forced);
  // A forced G names a cluster plan where one exists.
  if (grid.valid() && (best.path == kGeneral || (forced <= 0 && grid_step_cost_us(grid) < best_cost))) {
    return FpsChoice{kGrid, grid};
  }
  if (best.path != kGeneral) return best;

  // Stream path: as many resident blocks per cloud as fit.
  const int64_t resident = resident_blocks(fps_group_kernel<T, StreamPoints<T>, kGridGroup>, 0);
  const int64_t per_cloud = resident / B;
  const int64_t G = per_cloud < ceil_div(N, kThreads) ? per_cloud : ceil_div(N, kThreads);
  if (G >= 2) {
    GroupPlan plan;
    plan.G = static_cast<int>(G);
    plan.chunk = ceil_div(N, G);
    return FpsChoice{kStream, plan};
  }
  return FpsChoice{};
}

FpsChoice choose(Dtype dt, int64_t B, int64_t N) {
  // Indices travel as 32-bit (with 0xffffffff as "none"), so the fast paths need N < 2^32-1.
  if (dt == Dtype::Float64 || tuning_or(Knob::FpsGeneral, 0) != 0 || N <= 0 ||
      N >= static_cast<int64_t>(UINT32_MAX)) {
    return FpsChoice{};
  }
  static PlanCache<FpsChoice> cache;
  const auto key = PlanCache<FpsChoice>::key(static_cast<int64_t>(dt), B, N);
  FpsChoice choice;
  if (cache.find(key, &choice)) return choice;
  dispatch_dtype(dt, [&](auto tag) -> Status {
    using T = decltype(tag);
    if constexpr (!std::is_same<T, double>::value) choice = choose_fast<T>(B, N);
    return nullptr;
  });
  cache.store(key, choice);
  return choice;
}

bool holds_registers(FpsPath path) {
  return path == kLean || path == kBlock || path == kCluster || path == kGrid;
}

// A 16-bit cloud on a register path is widened into the workspace. Those paths take at most
// what the registers of one GPU hold (a few million points), so the copy stays small; the
// stream path, for larger clouds, reads 16-bit points in place.
bool widens(Dtype dt, FpsPath path) {
  return holds_registers(path) && (dt == Dtype::Float16 || dt == Dtype::BFloat16);
}

struct Workspace {
  acc_t<float>* min_d;             // B*N accumulation-type values (general and stream paths)
  unsigned long long* grid_words;  // grid and stream paths: grid_word_count(B, G)
  float* points;                   // widens(): the cloud's rows * 3 coordinates in float32
  size_t bytes;
};

// rows: the rows of all clouds (B * N padded, P packed).
Workspace carve_workspace(void* base, Dtype dt, FpsPath path, const GroupPlan& plan, int64_t B,
                          int64_t rows) {
  WorkspaceCarver carve(base);
  Workspace ws{nullptr, nullptr, nullptr, 0};
  if (path == kGeneral || path == kStream) {
    ws.min_d = carve.take<float>(static_cast<size_t>(rows) * (dtype_acc_bytes(dt) / sizeof(float)));
  }
  if (path == kGrid || path == kStream) {
    ws.grid_words = carve.take<unsigned long long>(grid_word_count(B, plan.G));
  }
  if (widens(dt, path)) ws.points = carve.take<float>(static_cast<size_t>(rows) * 3);
  ws.bytes = carve.used();
  return ws;
}

// GroupPlan <-> CudaPlan::shape.
void pack(const GroupPlan& g, CudaPlan* plan) {
  plan->shape[0] = g.G;
  plan->shape[1] = g.chunk;
  plan->shape[2] = static_cast<int64_t>(g.slots) | (static_cast<int64_t>(g.hybrid) << 16) |
                   (static_cast<int64_t>(g.threads) << 20);
  plan->shape[3] = static_cast<int64_t>(g.smem);
}

GroupPlan unpack(const CudaPlan& plan) {
  GroupPlan g;
  g.G = static_cast<int>(plan.shape[0]);
  g.chunk = plan.shape[1];
  g.slots = static_cast<int>(plan.shape[2] & 0xffff);
  g.hybrid = ((plan.shape[2] >> 16) & 1) != 0;
  g.threads = static_cast<int>(plan.shape[2] >> 20);
  g.smem = static_cast<size_t>(plan.shape[3]);
  return g;
}

CudaPlan plan_fps(Dtype dt, int64_t B, int64_t max_points, int64_t rows) {
  const FpsChoice choice = choose(dt, B, max_points);
  CudaPlan plan;
  plan.path = choice.path;
  pack(choice.plan, &plan);
  plan.workspace_bytes = carve_workspace(nullptr, dt, choice.path, choice.plan, B, rows).bytes;
  return plan;
}

// The float32 register paths.
Status launch_registers(const float* xyz, const LaunchArgs& args, FpsPath path, const GroupPlan& group) {
  switch (path) {
    case kLean: return launch_lean<float>(xyz, args, group);
    case kBlock: return launch_plan<float, kBlockGroup>(xyz, args, group);
    case kCluster: return launch_plan<float, kClusterGroup>(xyz, args, group);
    default: return launch_plan<float, kGridGroup>(xyz, args, group);
  }
}

// Widens `count` 16-bit values to float32 on stream s.
Status widen_points(Dtype dt, const void* in, float* out, int64_t count, cudaStream_t s) {
  return dispatch_dtype(dt, [&](auto tag) -> Status {
    using T = decltype(tag);
    if constexpr (std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value) {
      constexpr int kWidenThreads = 256;
      widen_points_kernel<T>
          <<<grid_for(count, kWidenThreads), kWidenThreads, 0, s>>>(static_cast<const T*>(in), out, count);
      return launch_status();
    }
    return "pointops: internal error: FPS widens only float16 and bfloat16 clouds";
  });
}

Status launch_fps(const CudaPlan& plan, Dtype dt, const void* xyz, const CloudRows& clouds,
                  const CloudRows& samples, int64_t start, int64_t* idx, void* workspace, cudaStream_t s) {
  const int64_t B = clouds.B;
  const FpsPath path = static_cast<FpsPath>(plan.path);
  const GroupPlan group = unpack(plan);
  const int64_t rows = clouds.total_rows();
  const Workspace ws = carve_workspace(workspace, dt, path, group, B, rows);
  const LaunchArgs args{clouds, samples, B, start, idx, ws.grid_words, ws.min_d, s};
  if (holds_registers(path)) {
    const float* points = static_cast<const float*>(xyz);
    if (widens(dt, path)) {
      if (Status err = widen_points(dt, xyz, ws.points, rows * 3, s)) return err;
      points = ws.points;
    }
    return launch_registers(points, args, path, group);
  }
  return dispatch_dtype(dt, [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* points = static_cast<const T*>(xyz);
    if constexpr (!std::is_same<T, double>::value) {
      if (path == kStream) return launch_group<T, StreamPoints<T>, kGridGroup>(points, args, group);
    }
    fps_generic_kernel<T><<<static_cast<unsigned int>(B), kGenericThreads, 0, s>>>(
        points, clouds, samples, start, idx, reinterpret_cast<acc_t<T>*>(ws.min_d));
    return launch_status();
  });
}

}  // namespace

CudaPlan furthest_point_sample_cuda_plan(Dtype dt, int64_t B, int64_t N, int64_t K) {
  (void)K;
  return plan_fps(dt, B, N, B * N);
}

Status furthest_point_sample_cuda(const CudaPlan& plan, Dtype dt, const void* xyz, const int64_t* lengths,
                                  int64_t B, int64_t N, int64_t K, int64_t start, int64_t* idx,
                                  void* workspace, void* stream) {
  if (B == 0 || K == 0) return nullptr;
  return launch_fps(plan, dt, xyz, CloudRows::padded(lengths, B, N), CloudRows::padded(nullptr, B, K), start,
                    idx, workspace, static_cast<cudaStream_t>(stream));
}

CudaPlan furthest_point_sample_packed_cuda_plan(Dtype dt, int64_t B, int64_t P, int64_t max_points) {
  return plan_fps(dt, B, max_points, P);
}

Status furthest_point_sample_packed_cuda(const CudaPlan& plan, Dtype dt, const void* xyz, const int64_t* ptr,
                                         int64_t P, const int64_t* sample_ptr, int64_t S, int64_t B,
                                         int64_t* idx, void* workspace, void* stream) {
  if (B == 0 || S == 0) return nullptr;
  return launch_fps(plan, dt, xyz, CloudRows::packed(ptr, B, P), CloudRows::packed(sample_ptr, B, S), 0, idx,
                    workspace, static_cast<cudaStream_t>(stream));
}

}  // namespace pointops
