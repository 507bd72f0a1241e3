// Gathering rows of channels-last features (packed batches) on CUDA:
//   out[q, c] = sum_t w[q, t] * feat[idx[q, t], c]      feat [P, C], idx/weight [Q, T], out [Q, C]
// Threads run over (q, c) with c fastest, so every feature row is read and written coalesced.
// A plain gather copies each row in 16-, 8- or 4-byte chunks where its size and the pointers
// allow, and the feature gradient sums 16 bytes of channels per thread: a thread per element
// left the kernels bound by their index arithmetic (H200, packed C=64 K=16, 10.5M rows: 2.9 ms
// forward, 1.7 ms backward sums). Loop indices are 32-bit where the sizes allow. idx is int64 or
// int32 (Pointcept's), read as given. The forward checks its indices itself (kernels.h).
// The feature gradient groups the entries by target row, in ascending entry order: a stable
// radix sort of (target, entry) pairs over the target's bits (count + atomic fill + per-row
// sort took 0.6 ms of the 10.5M-entry backward, H200), or, beyond 2^31 entries, the counting
// sort of the padded backward (gather_backward_rows.cuh). Each thread then sums 16 bytes of
// channels of one target row: deterministic, no float atomics.
#include "common.cuh"
#include "gather_backward_rows.cuh"

namespace pointops {
namespace {

using namespace cuda_detail;

constexpr int kThreads = 256;

// Calls f(I{}) with I the index type of idx (int32_t or int64_t).
template <class F>
Status dispatch_index(RowIndex idx, F&& f) {
  return idx.int32 ? f(int32_t{}) : f(int64_t{});
}

template <class I>
const I* index_data(RowIndex idx) {
  return static_cast<const I*>(idx.data);
}

// Weighted (or 2-byte plain) gather, an element per thread. An index outside -1..P-1 is recorded
// and makes its output NaN; while a problem is recorded every output is NaN.
template <class T, class Ix>
__global__ void __launch_bounds__(kThreads)
    gather_rows_kernel(const T* __restrict__ feat, const Ix* __restrict__ idx, const T* __restrict__ weight,
                       int64_t P, int64_t C, int64_t Q, int64_t T_, T* __restrict__ out,
                       KernelChecks checks) {
  using A = acc_t<T>;
  const bool poisoned = checks.recorded();
  const int64_t total = Q * C;
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < total;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t q = o / C, c = o - q * C;
    const Ix* ix = idx + q * T_;
    if (weight == nullptr && T_ == 1) {  // plain gather: copy the value itself (its bits)
      const int64_t j = ix[0];
      T value = j >= 0 && j < P ? feat[j * C + c] : from_acc<T>(A(0));
      if (!(j >= -1 && j < P) && checks.device_code != nullptr) {
        checks.report();
        value = from_acc<T>(quiet_nan<A>());
      }
      out[o] = poisoned ? from_acc<T>(quiet_nan<A>()) : value;
      continue;
    }
    A acc = A(0);
    bool bad = false;
    for (int64_t t = 0; t < T_; ++t) {
      const int64_t j = ix[t];
      if (j < 0 || j >= P) {
        bad |= j != -1;
        continue;
      }
      const A v = to_acc(feat[j * C + c]);
      acc = add_rn(acc, weight == nullptr ? v : mul_rn(to_acc(weight[q * T_ + t]), v));
    }
    if (bad && checks.device_code != nullptr) {
      checks.report();
      acc = quiet_nan<A>();
    }
    out[o] = from_acc<T>(poisoned ? quiet_nan<A>() : acc);
  }
}

// A row's bytes in chunks of Bytes (16, 8 or 4), copied as they are: the same bits as the
// per-element copy, zeros for -1.
template <int Bytes>
struct ChunkOf;
template <>
struct ChunkOf<16> {
  using type = uint4;
};
template <>
struct ChunkOf<8> {
  using type = uint2;
};
template <>
struct ChunkOf<4> {
  using type = unsigned int;
};

// A chunk of T's quiet NaNs (Bytes >= sizeof(T)).
template <class T, int Bytes>
__device__ __forceinline__ typename ChunkOf<Bytes>::type nan_chunk() {
  union {
    typename ChunkOf<Bytes>::type chunk;
    T lanes[Bytes / sizeof(T)];
  } u;
#pragma unroll
  for (int i = 0; i < Bytes / static_cast<int>(sizeof(T)); ++i)
    u.lanes[i] = from_acc<T>(quiet_nan<acc_t<T>>());
  return u.chunk;
}

// out[q, :] = feat[idx[q], :] (zeros for -1), CV chunks per row; Idx is the loop index type
// (uint32_t when Q * CV and the grid stride fit in 32 bits). Checked like gather_rows_kernel.
template <class T, int Bytes, class Idx, class Ix>
__global__ void __launch_bounds__(kThreads)
    gather_rows_copy_kernel(const void* __restrict__ feat, const Ix* __restrict__ idx, int64_t P, Idx CV,
                            Idx total, void* __restrict__ out, KernelChecks checks) {
  using Chunk = typename ChunkOf<Bytes>::type;
  const Chunk* src = static_cast<const Chunk*>(feat);
  Chunk* dst = static_cast<Chunk*>(out);
  const bool poisoned = checks.recorded();
  for (Idx o = blockIdx.x * static_cast<Idx>(blockDim.x) + threadIdx.x; o < total;
       o += static_cast<Idx>(gridDim.x) * blockDim.x) {
    const Idx q = o / CV, v = o - q * CV;
    const int64_t j = idx[q];
    Chunk c{};
    if (j >= 0 && j < P) {
      c = src[j * static_cast<int64_t>(CV) + v];
    } else if (j != -1 && checks.device_code != nullptr) {
      checks.report();
      c = nan_chunk<T, Bytes>();
    }
    dst[o] = poisoned ? nan_chunk<T, Bytes>() : c;
  }
}

// Loop indices of `total` items fit 32 bits (with the grid stride) below this.
constexpr int64_t kIndex32Limit = int64_t{1} << 31;

// The widest chunk (16, 8, 4 bytes, and at least one element) that divides a row of row_bytes
// and aligns both pointers; 0 when none does.
inline int row_chunk_bytes(int64_t row_bytes, int64_t elem_bytes, const void* a, const void* b) {
  const uintptr_t addresses = reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b);
  for (int bytes : {16, 8, 4}) {
    if (bytes >= elem_bytes && row_bytes % bytes == 0 && addresses % bytes == 0) return bytes;
  }
  return 0;
}

// Launches kernel<Idx> over `total` items with Idx = uint32_t when the loop fits 32 bits, else
// int64_t; launch(kernel_tag, total_as_Idx) does the <<<>>> call.
template <class Launch>
Status launch_indexed(int64_t total, Launch&& launch) {
  if (total < kIndex32Limit)
    launch(uint32_t{});
  else
    launch(int64_t{});
  return launch_status();
}

template <class T, int Bytes, class Ix>
Status launch_row_copy(const void* feat, const Ix* idx, int64_t P, int64_t row_bytes, int64_t Q, void* out,
                       KernelChecks checks, cudaStream_t s) {
  const int64_t CV = row_bytes / Bytes, total = Q * CV;
  return launch_indexed(total, [&](auto tag) {
    using Idx = decltype(tag);
    gather_rows_copy_kernel<T, Bytes, Idx, Ix><<<grid_for(total, kThreads), kThreads, 0, s>>>(
        feat, idx, P, static_cast<Idx>(CV), static_cast<Idx>(total), out, checks);
  });
}

// Feature gradient, V channels per thread (16 bytes of T, or 1): grad_feat[r, c..c+V) sums
// grad_out rows of r's entries in ascending entry order, each channel exactly as the one-channel
// loop does. Idx: the loop index type; I: the entries' type.
template <class T, int V, class Idx, class I>
__global__ void __launch_bounds__(kThreads)
    gather_rows_backward_vec_kernel(const T* __restrict__ grad_out, const T* __restrict__ weight,
                                    const I* __restrict__ row_start, const I* __restrict__ entries, Idx CV,
                                    Idx total, I T_, T* __restrict__ grad_feat) {
  using A = acc_t<T>;
  struct alignas(sizeof(T) * V) Lanes {
    T v[V];
  };
  const int64_t C = static_cast<int64_t>(CV) * V;
  for (Idx o = blockIdx.x * static_cast<Idx>(blockDim.x) + threadIdx.x; o < total;
       o += static_cast<Idx>(gridDim.x) * blockDim.x) {
    const Idx r = o / CV, v = o - r * CV;
    A acc[V];
#pragma unroll
    for (int i = 0; i < V; ++i) acc[i] = A(0);
    const I end = row_start[r + 1];
    for (I k = row_start[r]; k < end; ++k) {
      const I e = entries[k];
      const Lanes g = *reinterpret_cast<const Lanes*>(grad_out + static_cast<int64_t>(e / T_) * C + v * V);
      if (weight == nullptr) {
#pragma unroll
        for (int i = 0; i < V; ++i) acc[i] = add_rn(acc[i], to_acc(g.v[i]));
      } else {
        const A w = to_acc(weight[e]);
#pragma unroll
        for (int i = 0; i < V; ++i) acc[i] = add_rn(acc[i], mul_rn(w, to_acc(g.v[i])));
      }
    }
    Lanes out;
#pragma unroll
    for (int i = 0; i < V; ++i) out.v[i] = from_acc<T>(acc[i]);
    *reinterpret_cast<Lanes*>(grad_feat + static_cast<int64_t>(r) * C + v * V) = out;
  }
}

// grad_w[q, t] = sum_c grad_out[q, c] * feat[idx[q, t], c], c ascending; a thread per entry.
template <class T, class Ix>
__global__ void __launch_bounds__(kThreads)
    gather_rows_weight_kernel(const T* __restrict__ grad_out, const T* __restrict__ feat,
                              const Ix* __restrict__ idx, int64_t P, int64_t C, int64_t Q, int64_t T_,
                              T* __restrict__ grad_w, KernelChecks checks) {
  using A = acc_t<T>;
  const int64_t total = Q * T_;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t q = e / T_, j = idx[e];
    if (j < -1 || j >= P) checks.report();
    A acc = A(0);
    if (j >= 0 && j < P) {
      for (int64_t c = 0; c < C; ++c)
        acc = add_rn(acc, mul_rn(to_acc(grad_out[q * C + c]), to_acc(feat[j * C + c])));
    }
    grad_w[e] = from_acc<T>(acc);
  }
}

template <class T, class I>
Status launch_backward_sums(const T* grad_out, const T* weight, const I* row_start, const I* entries,
                            int64_t P, int64_t C, int64_t T_, T* grad_feat, cudaStream_t s) {
  auto launch = [&](auto lanes) {
    constexpr int V = decltype(lanes)::value;
    const int64_t CV = C / V, total = P * CV;
    return launch_indexed(total, [&](auto tag) {
      using Idx = decltype(tag);
      gather_rows_backward_vec_kernel<T, V, Idx, I><<<grid_for(total, kThreads), kThreads, 0, s>>>(
          grad_out, weight, row_start, entries, static_cast<Idx>(CV), static_cast<Idx>(total),
          static_cast<I>(T_), grad_feat);
    });
  };
  constexpr int V = 16 / sizeof(T);
  if (C % V == 0 && row_chunk_bytes(C * static_cast<int64_t>(sizeof(T)), 16, grad_out, grad_feat) == 16)
    return launch(std::integral_constant<int, V>{});
  return launch(std::integral_constant<int, 1>{});
}

// ---- rows by radix sort (entries < 2^31): gather_backward_rows.cuh's, for one cloud of P rows ----

template <class T, class Ix>
Status backward_sorted(const T* grad_out, const Ix* idx, const T* weight, int64_t P, int64_t C, int64_t Q,
                       int64_t T_, T* grad_feat, void* workspace, KernelChecks checks, cudaStream_t s) {
  RadixRows rows;
  if (Status st = carve_radix_rows(workspace, 1, P, Q, T_, 0, &rows)) return st;
  if (Status st = build_radix_rows<Ix>(idx, 1, P, Q, T_, true, &rows, checks, s)) return st;
  return launch_backward_sums<T, uint32_t>(grad_out, weight, rows.row_start, rows.vals.Current(), P, C, T_,
                                           grad_feat, s);
}

// ---- rows by counting sort (the padded backward's, any size) ----

template <class T, class I, class Ix>
Status backward_counted(const T* grad_out, const Ix* idx, const T* weight, int64_t P, int64_t C, int64_t Q,
                        int64_t T_, T* grad_feat, void* workspace, KernelChecks checks, cudaStream_t s) {
  RowArrays<I> rows;
  if (Status st = carve_rows<I>(workspace, 1, P, Q, T_, 0, &rows)) return st;
  const int64_t entries = Q * T_;
  cudaError_t err = cudaMemsetAsync(rows.counts, 0, static_cast<size_t>(P + 1) * sizeof(I), s);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  if (entries > 0) {
    count_kernel<I><<<grid_for(entries, kThreads), kThreads, 0, s>>>(idx, 1, P, entries, rows.counts, checks);
  }
  size_t bytes = rows.temp_bytes;
  err = cub::DeviceScan::ExclusiveSum(rows.temp, bytes, rows.counts, rows.row_start, P + 1, s);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  if (entries > 0) {
    fill_kernel<I><<<grid_for(entries, kThreads), kThreads, 0, s>>>(idx, 1, P, entries, rows.row_start,
                                                                    rows.counts, rows.entries);
    sort_rows_kernel<I><<<grid_for(P, kThreads), kThreads, 0, s>>>(rows.row_start, P, rows.entries);
  }
  return launch_backward_sums<T, I>(grad_out, weight, rows.row_start, rows.entries, P, C, T_, grad_feat, s);
}

// Which row building the feature gradient uses (CudaPlan::path).
enum RowsPath : int32_t { kRowsSorted = 0, kRowsCounted32 = 1, kRowsCounted64 = 2 };

}  // namespace

Status gather_rows_cuda(Dtype dt, const void* feat, RowIndex idx, const void* weight, int64_t P, int64_t C,
                        int64_t Q, int64_t T, void* out, const InKernelChecks* in_kernel_checks,
                        void* stream) {
  if (Q == 0 || C == 0) return nullptr;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const KernelChecks checks = KernelChecks::from(in_kernel_checks);
  return dispatch_dtype(dt, [&](auto tag) -> Status {
    using E = decltype(tag);
    return dispatch_index(idx, [&](auto itag) -> Status {
      using Ix = decltype(itag);
      const Ix* ix = index_data<Ix>(idx);
      if (weight == nullptr && T == 1) {
        const int64_t row_bytes = C * static_cast<int64_t>(sizeof(E));
        switch (row_chunk_bytes(row_bytes, sizeof(E), feat, out)) {
          case 16: return launch_row_copy<E, 16>(feat, ix, P, row_bytes, Q, out, checks, s);
          case 8: return launch_row_copy<E, 8>(feat, ix, P, row_bytes, Q, out, checks, s);
          case 4: return launch_row_copy<E, 4>(feat, ix, P, row_bytes, Q, out, checks, s);
          default: break;  // 2-byte rows: one element per thread below
        }
      }
      gather_rows_kernel<E, Ix><<<grid_for(Q * C, kThreads), kThreads, 0, s>>>(
          static_cast<const E*>(feat), ix, static_cast<const E*>(weight), P, C, Q, T, static_cast<E*>(out),
          checks);
      return launch_status();
    });
  });
}

// plan.path: the row building (RowsPath). Workspace: the rows.
CudaPlan gather_rows_backward_feat_cuda_plan(Dtype dt, int64_t P, int64_t C, int64_t Q, int64_t T) {
  (void)dt, (void)C;
  CudaPlan plan;
  const int64_t entries = Q * T;
  if (entries < kIndex32Limit && P < kIndex32Limit && tuning_or(Knob::GatherRowsCounted, 0) != 1) {
    plan.path = kRowsSorted;
    RadixRows rows;
    if (carve_radix_rows(nullptr, 1, P, Q, T, 0, &rows) == nullptr) plan.workspace_bytes = rows.total_bytes;
  } else if (fits_u32(1, P, Q, T)) {
    plan.path = kRowsCounted32;
    RowArrays<uint32_t> rows;
    if (carve_rows<uint32_t>(nullptr, 1, P, Q, T, 0, &rows) == nullptr)
      plan.workspace_bytes = rows.total_bytes;
  } else {
    plan.path = kRowsCounted64;
    RowArrays<unsigned long long> rows;
    if (carve_rows<unsigned long long>(nullptr, 1, P, Q, T, 0, &rows) == nullptr)
      plan.workspace_bytes = rows.total_bytes;
  }
  return plan;
}

Status gather_rows_backward_feat_cuda(const CudaPlan& plan, Dtype dt, const void* grad_out, RowIndex idx,
                                      const void* weight, int64_t P, int64_t C, int64_t Q, int64_t T,
                                      void* grad_feat, void* workspace,
                                      const InKernelChecks* in_kernel_checks, void* stream) {
  if (P == 0 || C == 0) return nullptr;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const KernelChecks checks = KernelChecks::from(in_kernel_checks);
  return dispatch_dtype(dt, [&](auto tag) -> Status {
    using E = decltype(tag);
    const E* g = static_cast<const E*>(grad_out);
    const E* w = static_cast<const E*>(weight);
    E* out = static_cast<E*>(grad_feat);
    return dispatch_index(idx, [&](auto itag) -> Status {
      using Ix = decltype(itag);
      const Ix* ix = index_data<Ix>(idx);
      switch (plan.path) {
        case kRowsSorted: return backward_sorted<E, Ix>(g, ix, w, P, C, Q, T, out, workspace, checks, s);
        case kRowsCounted32:
          return backward_counted<E, uint32_t, Ix>(g, ix, w, P, C, Q, T, out, workspace, checks, s);
        default:
          return backward_counted<E, unsigned long long, Ix>(g, ix, w, P, C, Q, T, out, workspace, checks, s);
      }
    });
  });
}

Status gather_rows_backward_weight_cuda(Dtype dt, const void* grad_out, const void* feat, RowIndex idx,
                                        int64_t P, int64_t C, int64_t Q, int64_t T, void* grad_weight,
                                        const InKernelChecks* checks, void* stream) {
  if (Q == 0 || T == 0) return nullptr;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  return dispatch_dtype(dt, [&](auto tag) -> Status {
    using E = decltype(tag);
    return dispatch_index(idx, [&](auto itag) -> Status {
      using Ix = decltype(itag);
      gather_rows_weight_kernel<E, Ix><<<grid_for(Q * T, kThreads), kThreads, 0, s>>>(
          static_cast<const E*>(grad_out), static_cast<const E*>(feat), index_data<Ix>(idx), P, C, Q, T,
          static_cast<E*>(grad_weight), KernelChecks::from(checks));
      return launch_status();
    });
  });
}

}  // namespace pointops
