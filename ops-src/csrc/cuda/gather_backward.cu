// Backward of the weighted gather on CUDA, deterministic (no float atomics).
//
// grad_feat: the (p,t) entries are grouped by target point with a stable radix sort of
// (b*N + idx) keys, which keeps ascending (p,t) order inside each target; a histogram and a scan
// give each target's row. Then one thread per (b,c,n) sums its row in that order.
// grad_weight: one thread per (b,p,t) sums over c in ascending order.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "common.cuh"

namespace pointops {
namespace {

using namespace cuda_detail;

constexpr int kThreads = 256;

// 32-bit keys and entry numbers while they fit (half the sort traffic), 64-bit beyond.
inline bool fits_u32(int64_t B, int64_t N, int64_t P, int64_t T) {
  const int64_t limit = static_cast<int64_t>(UINT32_MAX) - 1;
  return B * N + 1 <= limit && B * P * T <= limit;
}

inline int bit_width(uint64_t v) {
  int bits = 0;
  while (v != 0) {
    ++bits;
    v >>= 1;
  }
  return bits < 1 ? 1 : bits;
}

template <class I>
__global__ void make_keys_kernel(const int64_t* __restrict__ idx, int64_t B, int64_t N,
                                 int64_t entries_per_batch, I* __restrict__ keys,
                                 I* __restrict__ entry, I* __restrict__ counts) {
  const int64_t total = B * entries_per_batch;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = e / entries_per_batch;
    const int64_t j = idx[e];
    const bool valid = j >= 0 && j < N;
    const I key = static_cast<I>(valid ? b * N + j : B * N);  // invalid entries sort last
    keys[e] = key;
    entry[e] = static_cast<I>(e);
    if (valid) atomicAdd(&counts[key], I(1));  // integer counts: order does not matter
  }
}

template <class T, class I>
__global__ void __launch_bounds__(kThreads)
    row_sum_kernel(const T* __restrict__ grad_out, const T* __restrict__ weight,
                   const I* __restrict__ row_start, const I* __restrict__ sorted_entry, int64_t B,
                   int64_t C, int64_t N, int64_t P, int64_t T_, T* __restrict__ grad_feat) {
  using A = acc_t<T>;
  const int64_t total = B * C * N;
  const int64_t per_batch = P * T_;
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < total;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = o % N;
    const int64_t bc = o / N;
    const int64_t b = bc / C;
    const int64_t row = b * N + n;
    const int64_t begin = static_cast<int64_t>(row_start[row]);
    const int64_t end = static_cast<int64_t>(row_start[row + 1]);
    const T* g = grad_out + bc * P;
    A acc = A(0);
    for (int64_t r = begin; r < end; ++r) {
      const int64_t e = static_cast<int64_t>(sorted_entry[r]);
      const int64_t p = (e - b * per_batch) / T_;
      const A v = to_acc(g[p]);
      acc = add_rn(acc, weight == nullptr ? v : mul_rn(to_acc(weight[e]), v));
    }
    grad_feat[o] = from_acc<T>(acc);
  }
}

template <class I>
struct BackwardPlan {
  I* keys_in;
  I* keys_out;
  I* entry_in;
  I* entry_out;
  I* counts;     // B*N+1
  I* row_start;  // B*N+1
  void* temp;
  size_t temp_bytes;
  size_t sort_temp_bytes;
  size_t scan_temp_bytes;
  size_t total_bytes;
};

template <class I>
Status plan_backward(void* workspace, int64_t B, int64_t N, int64_t P, int64_t T,
                     BackwardPlan<I>* plan) {
  const int64_t entries = B * P * T;
  const int64_t rows = B * N + 1;
  WorkspaceCarver carve(workspace);
  plan->keys_in = carve.take<I>(entries);
  plan->keys_out = carve.take<I>(entries);
  plan->entry_in = carve.take<I>(entries);
  plan->entry_out = carve.take<I>(entries);
  plan->counts = carve.take<I>(rows);
  plan->row_start = carve.take<I>(rows);
  size_t sort_bytes = 0, scan_bytes = 0;
  cudaError_t err = cub::DeviceRadixSort::SortPairs(
      nullptr, sort_bytes, plan->keys_in, plan->keys_out, plan->entry_in, plan->entry_out, entries,
      0, bit_width(static_cast<unsigned long long>(B * N)));
  if (err != cudaSuccess) return cudaGetErrorString(err);
  err = cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, plan->counts, plan->row_start, rows);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  plan->sort_temp_bytes = sort_bytes;
  plan->scan_temp_bytes = scan_bytes;
  plan->temp_bytes = sort_bytes > scan_bytes ? sort_bytes : scan_bytes;
  plan->temp = carve.take<char>(plan->temp_bytes);
  plan->total_bytes = carve.used();
  return nullptr;
}

template <class T, class I>
Status backward_feat(const T* grad_out, const int64_t* idx, const T* weight, int64_t B, int64_t C,
                     int64_t N, int64_t P, int64_t T_, T* grad_feat, void* workspace,
                     cudaStream_t s) {
  BackwardPlan<I> plan;
  if (Status st = plan_backward<I>(workspace, B, N, P, T_, &plan)) return st;
  const int64_t entries = B * P * T_;
  const int64_t rows = B * N + 1;
  cudaError_t err = cudaMemsetAsync(plan.counts, 0, static_cast<size_t>(rows) * sizeof(I), s);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  if (entries > 0) {
    make_keys_kernel<I><<<grid_for(entries, kThreads), kThreads, 0, s>>>(
        idx, B, N, P * T_, plan.keys_in, plan.entry_in, plan.counts);
    if (Status st = launch_status()) return st;
    size_t bytes = plan.sort_temp_bytes;
    err = cub::DeviceRadixSort::SortPairs(plan.temp, bytes, plan.keys_in, plan.keys_out,
                                          plan.entry_in, plan.entry_out, entries, 0,
                                          bit_width(static_cast<unsigned long long>(B * N)), s);
    if (err != cudaSuccess) return cudaGetErrorString(err);
  }
  size_t bytes = plan.scan_temp_bytes;
  err = cub::DeviceScan::ExclusiveSum(plan.temp, bytes, plan.counts, plan.row_start, rows, s);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  row_sum_kernel<T, I><<<grid_for(B * C * N, kThreads), kThreads, 0, s>>>(
      grad_out, weight, plan.row_start, plan.entry_out, B, C, N, P, T_, grad_feat);
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
  if (fits_u32(B, N, P, T)) {
    BackwardPlan<uint32_t> plan;
    if (plan_backward<uint32_t>(nullptr, B, N, P, T, &plan) != nullptr) return 0;
    return plan.total_bytes;
  }
  BackwardPlan<unsigned long long> plan;
  if (plan_backward<unsigned long long>(nullptr, B, N, P, T, &plan) != nullptr) return 0;
  return plan.total_bytes;
}

Status gather_backward_feat_cuda(Dtype dt, const void* grad_out, const int64_t* idx,
                                 const void* weight, int64_t B, int64_t C, int64_t N, int64_t P,
                                 int64_t T, void* grad_feat, void* workspace, void* stream) {
  if (B == 0 || C == 0 || N == 0) return nullptr;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const bool narrow = fits_u32(B, N, P, T);
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
