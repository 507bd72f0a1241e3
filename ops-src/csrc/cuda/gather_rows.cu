// Gathering rows of channels-last features (packed batches) on CUDA:
//   out[q, c] = sum_t w[q, t] * feat[idx[q, t], c]      feat [P, C], idx/weight [Q, T], out [Q, C]
// Threads run over (q, c) with c fastest, so every feature row is read and written coalesced.
// The feature gradient groups the entries by target row with the row building of the padded
// backward (gather_backward_rows.cuh: one cloud of P targets) and sums each row in ascending
// entry order, a thread per (target, channel): deterministic, no float atomics.
#include "common.cuh"
#include "gather_backward_rows.cuh"

namespace pointops {
namespace {

using namespace cuda_detail;

constexpr int kThreads = 256;

template <class T>
__global__ void __launch_bounds__(kThreads)
    gather_rows_kernel(const T* __restrict__ feat, const int64_t* __restrict__ idx,
                       const T* __restrict__ weight, int64_t P, int64_t C, int64_t Q, int64_t T_,
                       T* __restrict__ out) {
  using A = acc_t<T>;
  const int64_t total = Q * C;
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < total;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t q = o / C, c = o - q * C;
    const int64_t* ix = idx + q * T_;
    if (weight == nullptr && T_ == 1) {  // plain gather: copy the value itself
      const int64_t j = ix[0];
      out[o] = j >= 0 && j < P ? feat[j * C + c] : from_acc<T>(A(0));
      continue;
    }
    A acc = A(0);
    for (int64_t t = 0; t < T_; ++t) {
      const int64_t j = ix[t];
      if (j < 0 || j >= P) continue;
      const A v = to_acc(feat[j * C + c]);
      acc = add_rn(acc, weight == nullptr ? v : mul_rn(to_acc(weight[q * T_ + t]), v));
    }
    out[o] = from_acc<T>(acc);
  }
}

template <class T, class I>
__global__ void __launch_bounds__(kThreads)
    gather_rows_backward_kernel(const T* __restrict__ grad_out, const T* __restrict__ weight,
                                const I* __restrict__ row_start, const I* __restrict__ entries, int64_t P,
                                int64_t C, int64_t T_, T* __restrict__ grad_feat) {
  using A = acc_t<T>;
  const int64_t total = P * C;
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < total;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = o / C, c = o - r * C;
    A acc = A(0);
    const int64_t end = static_cast<int64_t>(row_start[r + 1]);
    for (int64_t k = static_cast<int64_t>(row_start[r]); k < end; ++k) {
      const int64_t e = static_cast<int64_t>(entries[k]);
      const A v = to_acc(grad_out[(e / T_) * C + c]);
      acc = add_rn(acc, weight == nullptr ? v : mul_rn(to_acc(weight[e]), v));
    }
    grad_feat[o] = from_acc<T>(acc);
  }
}

// grad_w[q, t] = sum_c grad_out[q, c] * feat[idx[q, t], c], c ascending; a thread per entry.
template <class T>
__global__ void __launch_bounds__(kThreads)
    gather_rows_weight_kernel(const T* __restrict__ grad_out, const T* __restrict__ feat,
                              const int64_t* __restrict__ idx, int64_t P, int64_t C, int64_t Q, int64_t T_,
                              T* __restrict__ grad_w) {
  using A = acc_t<T>;
  const int64_t total = Q * T_;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t q = e / T_, j = idx[e];
    A acc = A(0);
    if (j >= 0 && j < P) {
      for (int64_t c = 0; c < C; ++c)
        acc = add_rn(acc, mul_rn(to_acc(grad_out[q * C + c]), to_acc(feat[j * C + c])));
    }
    grad_w[e] = from_acc<T>(acc);
  }
}

template <class T, class I>
Status backward_rows(const CudaPlan& plan, const T* grad_out, const int64_t* idx, const T* weight, int64_t P,
                     int64_t C, int64_t Q, int64_t T_, T* grad_feat, void* workspace, cudaStream_t s) {
  (void)plan;
  RowArrays<I> rows;
  if (Status st = carve_rows<I>(workspace, 1, P, Q, T_, 0, &rows)) return st;
  const int64_t entries = Q * T_;
  cudaError_t err = cudaMemsetAsync(rows.counts, 0, static_cast<size_t>(P + 1) * sizeof(I), s);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  if (entries > 0) {
    count_kernel<I><<<grid_for(entries, kThreads), kThreads, 0, s>>>(idx, 1, P, entries, rows.counts);
  }
  size_t bytes = rows.temp_bytes;
  err = cub::DeviceScan::ExclusiveSum(rows.temp, bytes, rows.counts, rows.row_start, P + 1, s);
  if (err != cudaSuccess) return cudaGetErrorString(err);
  if (entries > 0) {
    fill_kernel<I><<<grid_for(entries, kThreads), kThreads, 0, s>>>(idx, 1, P, entries, rows.row_start,
                                                                    rows.counts, rows.entries);
    sort_rows_kernel<I><<<grid_for(P, kThreads), kThreads, 0, s>>>(rows.row_start, P, rows.entries);
  }
  gather_rows_backward_kernel<T, I><<<grid_for(P * C, kThreads), kThreads, 0, s>>>(
      grad_out, weight, rows.row_start, rows.entries, P, C, T_, grad_feat);
  return launch_status();
}

}  // namespace

Status gather_rows_cuda(Dtype dt, const void* feat, const int64_t* idx, const void* weight, int64_t P,
                        int64_t C, int64_t Q, int64_t T, void* out, void* stream) {
  if (Q == 0 || C == 0) return nullptr;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  return dispatch_dtype(dt, [&](auto tag) -> Status {
    using E = decltype(tag);
    gather_rows_kernel<E><<<grid_for(Q * C, kThreads), kThreads, 0, s>>>(
        static_cast<const E*>(feat), idx, static_cast<const E*>(weight), P, C, Q, T, static_cast<E*>(out));
    return launch_status();
  });
}

// plan.shape[0]: 1 when entry numbers and row positions fit 32 bits. Workspace: the rows.
CudaPlan gather_rows_backward_feat_cuda_plan(Dtype dt, int64_t P, int64_t C, int64_t Q, int64_t T) {
  (void)dt, (void)C;
  CudaPlan plan;
  plan.shape[0] = fits_u32(1, P, Q, T) ? 1 : 0;
  if (plan.shape[0] == 1) {
    RowArrays<uint32_t> rows;
    if (carve_rows<uint32_t>(nullptr, 1, P, Q, T, 0, &rows) == nullptr)
      plan.workspace_bytes = rows.total_bytes;
  } else {
    RowArrays<unsigned long long> rows;
    if (carve_rows<unsigned long long>(nullptr, 1, P, Q, T, 0, &rows) == nullptr)
      plan.workspace_bytes = rows.total_bytes;
  }
  return plan;
}

Status gather_rows_backward_feat_cuda(const CudaPlan& plan, Dtype dt, const void* grad_out,
                                      const int64_t* idx, const void* weight, int64_t P, int64_t C, int64_t Q,
                                      int64_t T, void* grad_feat, void* workspace, void* stream) {
  if (P == 0 || C == 0) return nullptr;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  return dispatch_dtype(dt, [&](auto tag) -> Status {
    using E = decltype(tag);
    const E* g = static_cast<const E*>(grad_out);
    const E* w = static_cast<const E*>(weight);
    E* out = static_cast<E*>(grad_feat);
    if (plan.shape[0] == 1) return backward_rows<E, uint32_t>(plan, g, idx, w, P, C, Q, T, out, workspace, s);
    return backward_rows<E, unsigned long long>(plan, g, idx, w, P, C, Q, T, out, workspace, s);
  });
}

Status gather_rows_backward_weight_cuda(Dtype dt, const void* grad_out, const void* feat, const int64_t* idx,
                                        int64_t P, int64_t C, int64_t Q, int64_t T, void* grad_weight,
                                        void* stream) {
  if (Q == 0 || T == 0) return nullptr;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  return dispatch_dtype(dt, [&](auto tag) -> Status {
    using E = decltype(tag);
    gather_rows_weight_kernel<E><<<grid_for(Q * T, kThreads), kThreads, 0, s>>>(
        static_cast<const E*>(grad_out), static_cast<const E*>(feat), idx, P, C, Q, T,
        static_cast<E*>(grad_weight));
    return launch_status();
  });
}

}  // namespace pointops
