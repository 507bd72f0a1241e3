// Backward of the weighted gather on CUDA, deterministic (no float atomics).
//
// grad_feat[b,c,n] sums w*grad_out[b,c,p] over the entries (p,t) with idx[b,p,t] == n, in
// ascending (p,t) order, with the CPU kernel's roundings.
//
// 1. Rows: every entry gets the key (b, p-chunk, n) and a stable radix sort groups the entries
//    by key, each group keeping ascending (p,t) order. A second pass finds where each keyed row
//    starts (lower bound in the sorted keys) and turns each sorted entry into its p (relative to
//    its batch) and its weight in the accumulation type, so that the sums read both in row order
//    and never divide. A point's full row is its p-chunk rows in chunk order.
// 2. Sums: a block stages grad_out[b, a few channels, one p-chunk] in shared memory with 16-byte
//    copies, its threads walk their rows' entries in that chunk and carry the running sums in
//    registers to the next chunk. Short grad_out rows are one chunk (staged once); long rows are
//    cut into chunks only when entries are dense enough to pay for the extra keyed rows. Sparse
//    long rows use the direct kernel: one thread per output, grad_out read from global memory.
// grad_weight: one thread per (b,p,t) sums over c in ascending order.
//
// Tuning knobs read from the environment (for A/B benchmarks and for covering every path):
//   POINTOPS_GATHER_STAGED=0     direct kernel only
//   POINTOPS_GATHER_STAGE_KB=n   shared memory per staged block (default 96: two blocks per SM)
//   POINTOPS_GATHER_CC=1|2|4     channels per staged block (default: chosen from the shape)
//   POINTOPS_GATHER_CHUNK_P=n    points per p-chunk (default 16384)        } also change the
//   POINTOPS_GATHER_CHUNKED=0|1  never / always cut long rows into chunks  } workspace size, so
//   POINTOPS_GATHER_WIDE=1       64-bit rows and entries even when 32 fit  } set them before it
#include <cub/device/device_radix_sort.cuh>

#include "common.cuh"

namespace pointops {
namespace {

using namespace cuda_detail;

constexpr int kThreads = 256;

// How the entries are keyed; a function of (B, N, P, T) and the layout knobs only, so that the
// workspace size and the call agree.
struct Layout {
  int64_t chunk_p;  // points per p-chunk
  int64_t chunks;   // p-chunks per grad_out row (1 unless rows are long and entries dense)
  int64_t rows;     // keyed rows B*chunks*N; the key `rows` marks an index outside [0, N)
  int64_t entries;  // B*P*T
  int end_bit;      // radix bits that cover the keys 0..rows
  bool narrow;      // 32-bit keys, entries and offsets (half the traffic of 64-bit)
};

Layout layout_for(int64_t B, int64_t N, int64_t P, int64_t T) {
  Layout L;
  L.chunk_p = env_int("POINTOPS_GATHER_CHUNK_P", 16384);
  if (L.chunk_p < 1) L.chunk_p = 16384;
  L.entries = B * P * T;
  const int64_t cut = ceil_div(P, L.chunk_p);
  // Chunking adds N keyed rows per chunk (a 4-byte start each, read once per channel group);
  // reading an entry's grad_out from global memory instead costs a 32-byte sector per channel.
  const int mode = env_int("POINTOPS_GATHER_CHUNKED", -1);
  const bool dense = N * cut <= 8 * P * T;
  L.chunks = cut > 1 && (mode == 1 || (mode != 0 && dense)) ? cut : 1;
  L.rows = B * L.chunks * N;
  L.end_bit = 1;
  while (L.end_bit < 64 && (L.rows >> L.end_bit) != 0) ++L.end_bit;
  const int64_t limit = static_cast<int64_t>(UINT32_MAX) - 1;
  L.narrow = L.rows + 1 <= limit && L.entries <= limit && env_int("POINTOPS_GATHER_WIDE", 0) != 1;
  return L;
}

// keys[e] = (b*chunks + p/chunk_p)*N + idx[e] (or `rows` when idx is outside [0, N)), vals[e] = e.
template <class I>
__global__ void make_keys_kernel(const int64_t* __restrict__ idx, I entries, I per_batch, I T_,
                                 I N, I chunks, I chunk_p, I rows, I* __restrict__ keys,
                                 I* __restrict__ vals) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < entries;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const I e = static_cast<I>(i);
    const int64_t j = idx[i];
    I key = rows;
    if (j >= 0 && j < static_cast<int64_t>(N)) {
      const I b = e / per_batch;
      const I chunk = chunks == 1 ? I(0) : (e - b * per_batch) / T_ / chunk_p;
      key = (b * chunks + chunk) * N + static_cast<I>(j);
    }
    keys[e] = key;
    vals[e] = e;
  }
}

template <class I>
__device__ __forceinline__ I lower_bound(const I* __restrict__ a, I n, I key) {
  I lo = 0, hi = n;
  while (lo < hi) {
    const I mid = lo + (hi - lo) / 2;
    if (a[mid] < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// row_start[r] for r in 0..rows, and each sorted entry e becomes its p within the batch (in
// place) and its weight (into sorted_w, when weighted).
template <class E, class I>
__global__ void finish_rows_kernel(const I* __restrict__ sorted_keys, I* vals,
                                   const E* __restrict__ weight, I entries, I per_batch, I T_,
                                   I rows, I* __restrict__ row_start,
                                   acc_t<E>* __restrict__ sorted_w) {
  const int64_t total = static_cast<int64_t>(entries > rows ? entries : rows + 1);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (i <= static_cast<int64_t>(rows)) {
      row_start[i] = lower_bound(sorted_keys, entries, static_cast<I>(i));
    }
    if (i < static_cast<int64_t>(entries)) {
      const I e = vals[i];
      vals[i] = (e % per_batch) / T_;
      if (weight != nullptr) sorted_w[i] = to_acc(weight[e]);
    }
  }
}

// Copies count elements from global src to shared dst, 16 bytes at a time between an unaligned
// head and tail. dst must sit at the same address mod 16 as src (the caller offsets it).
template <class T>
__device__ __forceinline__ void stage_copy(T* dst, const T* __restrict__ src, int64_t count) {
  const int64_t step = blockDim.x;
  const uintptr_t mis = reinterpret_cast<uintptr_t>(src) & 15;
  int64_t head = static_cast<int64_t>(((16 - mis) & 15) / sizeof(T));
  if (head > count) head = count;
  const int64_t vecs = (count - head) * static_cast<int64_t>(sizeof(T)) / 16;
  const int64_t tail = head + vecs * (16 / static_cast<int64_t>(sizeof(T)));
  for (int64_t i = threadIdx.x; i < head; i += step) dst[i] = src[i];
  const uint4* vs = reinterpret_cast<const uint4*>(src + head);
  uint4* vd = reinterpret_cast<uint4*>(dst + head);
  int64_t i = threadIdx.x;
  for (; i + 3 * step < vecs; i += 4 * step) {  // four loads in flight per thread
    const uint4 a = vs[i], b = vs[i + step], c = vs[i + 2 * step], d = vs[i + 3 * step];
    vd[i] = a;
    vd[i + step] = b;
    vd[i + 2 * step] = c;
    vd[i + 3 * step] = d;
  }
  for (; i < vecs; i += step) vd[i] = vs[i];
  for (int64_t k = tail + threadIdx.x; k < count; k += step) dst[k] = src[k];
}

// Staged sums. A block owns (b, CC channels, a range of n). For each pass of up to
// KN*kRowThreads points, it walks the p-chunks in order: stage grad_out[b, c0..c0+CC, chunk],
// then each thread adds its KN points' entries of that chunk, carrying the sums in registers.
// With one chunk the rows are staged once for all passes.
constexpr int kRowThreads = 512;

// Points per thread and pass: the running sums (KN*CC of them) stay in registers, without
// spills at two 512-thread blocks per SM. 8-byte sums take at most 2 channels.
template <class A, int CC>
struct PointsPerThread {
  static constexpr int value = sizeof(A) == 8 ? (CC == 1 ? 12 : 8) : (CC == 4 ? 6 : 16);
};
template <class A>
constexpr int kMaxChannels = sizeof(A) == 8 ? 2 : 4;

template <class T, class I, int CC>
__global__ void __launch_bounds__(kRowThreads, 2)
    staged_row_sum_kernel(const T* __restrict__ grad_out, const I* __restrict__ row_start,
                          const I* __restrict__ entry_p, const acc_t<T>* __restrict__ entry_w,
                          int64_t C, int64_t N, int64_t P, int64_t chunks, int64_t chunk_p,
                          int64_t n_per_block, int64_t row_stride, T* __restrict__ grad_feat) {
  using A = acc_t<T>;
  constexpr int KN = PointsPerThread<A, CC>::value;
  extern __shared__ __align__(16) unsigned char stage_raw[];
  const T* stage = reinterpret_cast<const T*>(stage_raw);
  const int64_t n_blocks = (N + n_per_block - 1) / n_per_block;
  const int64_t c_groups = (C + CC - 1) / CC;
  const int64_t tile = blockIdx.x;
  const int64_t n_begin = (tile % n_blocks) * n_per_block;
  const int64_t c0 = (tile / n_blocks) % c_groups * CC;
  const int64_t b = tile / (n_blocks * c_groups);
  const int cn = static_cast<int>(C - c0 < CC ? C - c0 : CC);
  const int64_t n_end = n_begin + n_per_block < N ? n_begin + n_per_block : N;
  const T* src = grad_out + (b * C + c0) * P;

  int off[CC];  // where channel c0+c of the staged chunk starts in shared memory, in elements
  for (int64_t pass = n_begin; pass < n_end; pass += static_cast<int64_t>(KN) * kRowThreads) {
    // Points of this pass handled by this thread: k*kRowThreads < live.
    const int64_t left = n_end - pass - threadIdx.x;
    const int live = static_cast<int>(left < KN * kRowThreads ? left : KN * kRowThreads);
    A acc[KN][CC];
#pragma unroll
    for (int k = 0; k < KN; ++k) {
#pragma unroll
      for (int c = 0; c < CC; ++c) acc[k][c] = A(0);
    }
    for (int64_t ch = 0; ch < chunks; ++ch) {
      const int64_t p0 = ch * chunk_p;
      if (chunks > 1 || pass == n_begin) {
        if (pass != n_begin || ch > 0) __syncthreads();  // everyone is done with the last chunk
        const int64_t len = chunks == 1 ? P : (P - p0 < chunk_p ? P - p0 : chunk_p);
#pragma unroll
        for (int c = 0; c < CC; ++c) {
          if (c < cn) {
            const T* row = src + c * P + p0;
            const int64_t mis = static_cast<int64_t>(reinterpret_cast<uintptr_t>(row) & 15);
            const int64_t at = c * row_stride + mis;
            off[c] = static_cast<int>(at / static_cast<int64_t>(sizeof(T)));
            stage_copy(reinterpret_cast<T*>(stage_raw + at), row, len);
          }
        }
        __syncthreads();
      }
      const I first_p = static_cast<I>(p0);
      // This thread's rows of this chunk: points pass + tid + k*kRowThreads, k < live.
      const I* starts = row_start + (b * chunks + ch) * N + pass + threadIdx.x;
#pragma unroll
      for (int k = 0; k < KN; ++k) {
        if (k * kRowThreads < live) {
          const I end = starts[k * kRowThreads + 1];
          for (I r = starts[k * kRowThreads]; r < end; ++r) {
            const int p = static_cast<int>(entry_p[r] - first_p);
            const A w = entry_w == nullptr ? A(1) : entry_w[r];
#pragma unroll
            for (int c = 0; c < CC; ++c) {
              if (c < cn) {
                const A v = to_acc(stage[off[c] + p]);
                acc[k][c] = add_rn(acc[k][c], entry_w == nullptr ? v : mul_rn(w, v));
              }
            }
          }
        }
      }
    }
    T* out = grad_feat + (b * C + c0) * N + pass + threadIdx.x;
#pragma unroll
    for (int k = 0; k < KN; ++k) {
      if (k * kRowThreads < live) {
#pragma unroll
        for (int c = 0; c < CC; ++c) {
          if (c < cn) out[c * N + k * kRowThreads] = from_acc<T>(acc[k][c]);
        }
      }
    }
  }
}

// Direct sums: one thread per output (b, c, n); z walks b, y walks c and x the points, so writes
// are coalesced and the threads running together read the same grad_out row (which stays in
// L2). No 64-bit division: it is a subroutine call that spills.
template <class T, class I>
__global__ void __launch_bounds__(kThreads)
    direct_row_sum_kernel(const T* __restrict__ grad_out, const I* __restrict__ row_start,
                          const I* __restrict__ entry_p, const acc_t<T>* __restrict__ entry_w,
                          int64_t B, int64_t C, int64_t N, int64_t P, int64_t chunks,
                          T* __restrict__ grad_feat) {
  using A = acc_t<T>;
  for (int64_t b = blockIdx.z; b < B; b += gridDim.z) {
    const I* starts = row_start + b * chunks * N;
    for (int64_t c = blockIdx.y; c < C; c += gridDim.y) {
      const T* g = grad_out + (b * C + c) * P;
      T* out = grad_feat + (b * C + c) * N;
      for (int64_t n = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; n < N;
           n += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        A acc = A(0);
        for (int64_t ch = 0; ch < chunks; ++ch) {
          const I end = starts[ch * N + n + 1];
          for (I r = starts[ch * N + n]; r < end; ++r) {
            const A v = to_acc(g[entry_p[r]]);
            acc = add_rn(acc, entry_w == nullptr ? v : mul_rn(entry_w[r], v));
          }
        }
        out[n] = from_acc<T>(acc);
      }
    }
  }
}

template <class I>
struct RowsPlan {
  I* keys[2];     // entries each (radix sort double buffer)
  I* vals[2];     // entries each; the sorted half ends up holding p
  void* weights;  // entries * 8 bytes: sorted weights in the accumulation type
  I* row_start;   // rows + 1
  void* temp;
  size_t temp_bytes;
  size_t total_bytes;
};

template <class I>
Status plan_rows(void* workspace, const Layout& L, RowsPlan<I>* plan) {
  WorkspaceCarver carve(workspace);
  for (int i = 0; i < 2; ++i) plan->keys[i] = carve.take<I>(L.entries);
  for (int i = 0; i < 2; ++i) plan->vals[i] = carve.take<I>(L.entries);
  plan->weights = carve.take<double>(L.entries);
  plan->row_start = carve.take<I>(L.rows + 1);
  size_t sort_bytes = 0;
  if (L.entries > 0) {
    cub::DoubleBuffer<I> keys(plan->keys[0], plan->keys[1]), vals(plan->vals[0], plan->vals[1]);
    const cudaError_t err = cub::DeviceRadixSort::SortPairs(
        nullptr, sort_bytes, keys, vals, static_cast<I>(L.entries), 0, L.end_bit);
    if (err != cudaSuccess) return cudaGetErrorString(err);
  }
  plan->temp_bytes = sort_bytes;
  plan->temp = carve.take<char>(sort_bytes);
  plan->total_bytes = carve.used();
  return nullptr;
}

size_t workspace_bytes(const Layout& L) {
  if (L.narrow) {
    RowsPlan<uint32_t> plan;
    return plan_rows<uint32_t>(nullptr, L, &plan) == nullptr ? plan.total_bytes : 0;
  }
  RowsPlan<unsigned long long> plan;
  return plan_rows<unsigned long long>(nullptr, L, &plan) == nullptr ? plan.total_bytes : 0;
}

int stage_limit_bytes() {
  int dev = 0, optin = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 48 * 1024;
  if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
    return 48 * 1024;
  }
  return optin;
}

template <class T, class I, int CC>
Status launch_staged(const T* grad_out, const I* row_start, const I* entry_p,
                     const acc_t<T>* entry_w, int64_t B, int64_t C, int64_t N, int64_t P,
                     const Layout& L, int64_t row_stride, int64_t n_per_block, T* grad_feat,
                     cudaStream_t s) {
  const int64_t blocks = B * ceil_div(C, CC) * ceil_div(N, n_per_block);
  const size_t smem = static_cast<size_t>(CC * row_stride);
  auto kernel = staged_row_sum_kernel<T, I, CC>;
  const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem));
  if (err != cudaSuccess) return cudaGetErrorString(err);
  kernel<<<static_cast<unsigned int>(blocks), kRowThreads, smem, s>>>(
      grad_out, row_start, entry_p, entry_w, C, N, P, L.chunks, L.chunk_p, n_per_block, row_stride,
      grad_feat);
  return launch_status();
}

// Runs the staged kernel when its chunk fits in shared memory; returns false to ask for the
// direct kernel instead.
template <class T, class I>
bool try_staged(const T* grad_out, const I* row_start, const I* entry_p, const acc_t<T>* entry_w,
                int64_t B, int64_t C, int64_t N, int64_t P, const Layout& L, T* grad_feat,
                cudaStream_t s, Status* status) {
  if (env_int("POINTOPS_GATHER_STAGED", -1) == 0) return false;
  const int64_t es = static_cast<int64_t>(sizeof(T));
  const int64_t len = L.chunks == 1 ? P : L.chunk_p;
  // Room for the misaligned start of each staged channel row.
  const int64_t row_stride = (len * es + 15) / 16 * 16 + 16;
  const int64_t limit = stage_limit_bytes();
  int64_t budget = static_cast<int64_t>(env_int("POINTOPS_GATHER_STAGE_KB", 96)) * 1024;
  if (budget > limit) budget = limit;
  // A single long row is staged only when it is cut into chunks; a whole row or one chunk of
  // an 8-byte type may pass the budget (one block per SM) but not the device's limit.
  if (row_stride > limit || (L.chunks == 1 && P > L.chunk_p && row_stride > budget)) return false;

  using A = acc_t<T>;
  const int64_t target = 4 * static_cast<int64_t>(current_device_sm_count());
  int64_t cc = budget / row_stride;
  if (cc > C) cc = C;
  if (cc > kMaxChannels<A>) cc = kMaxChannels<A>;
  cc = cc >= 4 ? 4 : (cc >= 2 ? 2 : 1);
  while (cc > 1 && B * ceil_div(C, cc) < target) cc /= 2;  // more blocks before wider ones
  const int forced = env_int("POINTOPS_GATHER_CC", 0);
  if ((forced == 1 || forced == 2 || forced == 4) && forced <= kMaxChannels<A> &&
      forced * row_stride <= limit) {
    cc = forced;
  }

  const int64_t base = B * ceil_div(C, cc);
  const int per_thread = cc == 4   ? PointsPerThread<A, 4>::value
                         : cc == 2 ? PointsPerThread<A, 2>::value
                                   : PointsPerThread<A, 1>::value;
  const int64_t pass = static_cast<int64_t>(per_thread) * kRowThreads;
  const int64_t most_splits = ceil_div(N, kRowThreads);
  int64_t splits;
  if (L.chunks == 1) {
    splits = ceil_div(target, base);  // staged once per block: split n only to fill the GPU
  } else {
    splits = ceil_div(N, pass);  // one pass per block, since every pass restages
    const int64_t fill = ceil_div(2 * static_cast<int64_t>(current_device_sm_count()), base);
    if (splits < fill) splits = fill;
  }
  if (splits > most_splits) splits = most_splits;
  if (splits < 1) splits = 1;
  const int64_t n_per_block = ceil_div(N, splits);
  if (base * ceil_div(N, n_per_block) > INT32_MAX) return false;

  switch (cc) {
    case 4:
      *status = launch_staged<T, I, kMaxChannels<A>>(grad_out, row_start, entry_p, entry_w, B,
                                                     C, N, P, L, row_stride, n_per_block,
                                                     grad_feat, s);
      break;
    case 2:
      *status = launch_staged<T, I, 2>(grad_out, row_start, entry_p, entry_w, B, C, N, P, L,
                                       row_stride, n_per_block, grad_feat, s);
      break;
    default:
      *status = launch_staged<T, I, 1>(grad_out, row_start, entry_p, entry_w, B, C, N, P, L,
                                       row_stride, n_per_block, grad_feat, s);
  }
  return true;
}

template <class T, class I>
Status backward_feat(const T* grad_out, const int64_t* idx, const T* weight, int64_t B, int64_t C,
                     int64_t N, int64_t P, int64_t T_, T* grad_feat, void* workspace,
                     cudaStream_t s) {
  using A = acc_t<T>;
  const Layout L = layout_for(B, N, P, T_);
  if (L.entries == 0) {  // nothing maps anywhere
    return status_of(cudaMemsetAsync(grad_feat, 0, static_cast<size_t>(B * C * N) * sizeof(T), s));
  }
  RowsPlan<I> plan;
  if (Status st = plan_rows<I>(workspace, L, &plan)) return st;
  const I entries = static_cast<I>(L.entries), per_batch = static_cast<I>(P * T_);
  const I rows = static_cast<I>(L.rows);
  make_keys_kernel<I><<<grid_for(L.entries, kThreads), kThreads, 0, s>>>(
      idx, entries, per_batch, static_cast<I>(T_), static_cast<I>(N), static_cast<I>(L.chunks),
      static_cast<I>(L.chunk_p), rows, plan.keys[0], plan.vals[0]);
  if (Status st = launch_status()) return st;
  cub::DoubleBuffer<I> keys(plan.keys[0], plan.keys[1]), vals(plan.vals[0], plan.vals[1]);
  size_t bytes = plan.temp_bytes;
  cudaError_t err = cub::DeviceRadixSort::SortPairs(plan.temp, bytes, keys, vals, entries, 0,
                                                    L.end_bit, s);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  A* sorted_w = weight == nullptr ? nullptr : static_cast<A*>(plan.weights);
  finish_rows_kernel<T, I><<<grid_for((L.entries > L.rows ? L.entries : L.rows + 1), kThreads),
                             kThreads, 0, s>>>(keys.Current(), vals.Current(), weight, entries,
                                               per_batch, static_cast<I>(T_), rows,
                                               plan.row_start, sorted_w);
  if (Status st = launch_status()) return st;

  const I* entry_p = vals.Current();
  Status status = nullptr;
  if (try_staged<T, I>(grad_out, plan.row_start, entry_p, sorted_w, B, C, N, P, L, grad_feat, s,
                       &status)) {
    return status;
  }
  const dim3 grid(grid_for(N, kThreads), static_cast<unsigned int>(C < 65535 ? C : 65535),
                  static_cast<unsigned int>(B < 65535 ? B : 65535));
  direct_row_sum_kernel<T, I><<<grid, kThreads, 0, s>>>(grad_out, plan.row_start, entry_p,
                                                        sorted_w, B, C, N, P, L.chunks, grad_feat);
  return launch_status();
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    backward_weight_kernel(const T* __restrict__ grad_out, const T* __restrict__ feat,
                           const int64_t* __restrict__ idx, int64_t B, int64_t C, int64_t N,
                           int64_t P, int64_t T_, T* __restrict__ grad_w) {
  using A = acc_t<T>;
  const int64_t total = B * P * T_;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t bp = e / T_;
    const int64_t b = bp / P, p = bp - b * P;
    const int64_t j = idx[e];
    A acc = A(0);
    if (j >= 0 && j < N) {
      const T* g = grad_out + b * C * P + p;
      const T* f = feat + b * C * N + j;
      for (int64_t c = 0; c < C; ++c) acc = add_rn(acc, mul_rn(to_acc(g[c * P]), to_acc(f[c * N])));
    }
    grad_w[e] = from_acc<T>(acc);
  }
}

}  // namespace

size_t gather_backward_feat_cuda_workspace_bytes(int64_t B, int64_t N, int64_t P, int64_t T) {
  if (B <= 0 || N <= 0) return 0;
  return workspace_bytes(layout_for(B, N, P, T));
}

Status gather_backward_feat_cuda(Dtype dt, const void* grad_out, const int64_t* idx,
                                 const void* weight, int64_t B, int64_t C, int64_t N, int64_t P,
                                 int64_t T, void* grad_feat, void* workspace, void* stream) {
  if (B == 0 || C == 0 || N == 0) return nullptr;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const bool narrow = layout_for(B, N, P, T).narrow;
  return dispatch_dtype(dt, [&](auto tag) -> Status {
    using E = decltype(tag);
    const E* g = static_cast<const E*>(grad_out);
    const E* w = static_cast<const E*>(weight);
    E* out = static_cast<E*>(grad_feat);
    if (narrow) return backward_feat<E, uint32_t>(g, idx, w, B, C, N, P, T, out, workspace, s);
    return backward_feat<E, unsigned long long>(g, idx, w, B, C, N, P, T, out, workspace, s);
  });
}

Status gather_backward_weight_cuda(Dtype dt, const void* grad_out, const void* feat,
                                   const int64_t* idx, int64_t B, int64_t C, int64_t N,
                                   int64_t P, int64_t T, void* grad_weight, void* stream) {
  if (B == 0 || P == 0 || T == 0) return nullptr;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  return dispatch_dtype(dt, [&](auto tag) -> Status {
    using E = decltype(tag);
    backward_weight_kernel<E><<<grid_for(B * P * T, kThreads), kThreads, 0, s>>>(
        static_cast<const E*>(grad_out), static_cast<const E*>(feat), idx, B, C, N, P, T,
        static_cast<E*>(grad_weight));
    return launch_status();
  });
}

}  // namespace pointops
