// Backward of the weighted gather on CUDA, deterministic (no float atomics).
//
// grad_feat: a counting sort groups the (p,t) entries by target point (count, scan, fill),
// each target's row is sorted into ascending (p,t) order, then each row is summed in that
// order (gather_backward_rows.cuh). Dense rows (more entries than targets), or grad_out larger
// than half the L2: from grad_out transposed into the workspace one 64-channel slab at a time,
// lanes over channels. Sparse rows: a lane per target. Where a cloud's entries and a few
// grad_out rows fit in shared memory (gather_points), one fused kernel builds the rows of a
// span of targets in shared memory and sums them there; else from the global rows above, with
// grad_out rows staged in shared memory where several fit, or from grad_out directly
// (gather_backward_sums.cuh). Dense rows of few targets: the dense sums, from rows built once
// per chunk of sources (gather_backward_dense.cuh), or the chunked sums from the global rows
// (gather_backward_chunked.cuh). gather_backward_plan.cuh decides which, once per call.
#include <type_traits>

#include "common.cuh"
#include "gather_backward_chunked.cuh"
#include "gather_backward_dense.cuh"
#include "gather_backward_plan.cuh"
#include "gather_backward_rows.cuh"
#include "gather_backward_sums.cuh"
#include "stream_fork.cuh"

namespace pointops {
namespace {

using namespace cuda_detail;

template <class T>
Status launch_fused(const T* grad_out, const int64_t* idx, const T* weight, int64_t B, int64_t C, int64_t N,
                    int64_t P, int64_t T_, const CudaPlan& plan, T* grad_feat, KernelChecks checks,
                    cudaStream_t s) {
  auto kernel = T_ == 1 ? fused_sparse_sum_kernel<T, 1>
                        : (T_ == 3 ? fused_sparse_sum_kernel<T, 3> : fused_sparse_sum_kernel<T, 0>);
  // Every plan fits in fused_smem_budget(): one limit for all of them.
  if (cudaError_t err = allow_dynamic_smem(kernel, static_cast<size_t>(fused_smem_budget())))
    return cudaGetErrorString(err);
  constexpr int VEC = 16 / sizeof(T);
  const bool vector_stores = N % VEC == 0 && reinterpret_cast<uintptr_t>(grad_feat) % 16 == 0;
  const int64_t stage_rows = plan.shape[1], channels_per_block = plan.shape[2], blocks = plan.shape[3];
  kernel<<<static_cast<unsigned int>(blocks), kFusedThreads, fused_smem(P, T_, sizeof(T), stage_rows), s>>>(
      grad_out, idx, weight, B, C, N, P, T_, channels_per_block, static_cast<int>(stage_rows), vector_stores,
      grad_feat, checks);
  return launch_status();
}

// A launch shape of the chunked and dense sums: K targets per thread, CS channels per block.
template <int K, int CS>
struct SumShape {
  static constexpr int k = K, cs = CS;
};

// launch(Shape{}) for the one of `Shapes` that the plan chose (k, cs): the kernels are
// instantiated for these shapes only, so any other is a planner bug, reported as `unplanned`.
template <class... Shapes, class Launch>
Status launch_planned_shape(int64_t k, int64_t cs, const char* unplanned, Launch&& launch) {
  Status status = unplanned;
  (void)((k == Shapes::k && cs == Shapes::cs && (status = launch(Shapes{}), true)) || ...);
  return status;
}

// The chunked sums' kernel for K targets per thread and CS channels per block.
template <class T, int K, int CS>
Status launch_chunked_sums(const T* grad_out, const RadixRows& rows, int64_t B, int64_t C, int64_t N,
                           int64_t P, int64_t T_, int64_t p_chunk, T* grad_feat, cudaStream_t s) {
  static_assert(K * CS == kChunkedAccumulators, "the chunked sums' shapes fill the accumulators");
  auto kernel = chunked_sum_kernel<T, K, CS>;
  const size_t smem = static_cast<size_t>(CS * p_chunk) * sizeof(T);
  if (cudaError_t err = allow_dynamic_smem(kernel, smem)) return cudaGetErrorString(err);
  const int64_t blocks = B * ceil_div(C, CS);
  const uint32_t no_target = static_cast<uint32_t>(B * P * T_ + B * N);  // the final sentinel
  kernel<<<static_cast<unsigned int>(blocks), kChunkedThreads, smem, s>>>(
      grad_out, rows.row_start, static_cast<const ChunkEntry<float>*>(rows.extra), C, N, P, p_chunk,
      no_target, grad_feat);
  return launch_status();
}

template <class T>
Status backward_chunked(const T* grad_out, const int64_t* idx, const T* weight, int64_t B, int64_t C,
                        int64_t N, int64_t P, int64_t T_, T* grad_feat, const CudaPlan& plan, void* workspace,
                        KernelChecks checks, cudaStream_t s) {
  RadixRows rows;
  if (Status st = carve_radix_rows(workspace, B, N, P, T_, chunked_packed_bytes(B, N, P, T_), &rows))
    return st;
  if (Status st = build_radix_rows(idx, B, N, P, T_, false, &rows, checks, s)) return st;
  const uint32_t entries = static_cast<uint32_t>(B * P * T_), targets = static_cast<uint32_t>(B * N);
  const int64_t pack_threads = int64_t{targets} + 1 > entries ? int64_t{targets} + 1 : entries;
  chunked_pack_kernel<T, float><<<grid_for(pack_threads, 256), 256, 0, s>>>(
      rows.keys.Current(), rows.vals.Current(), weight, targets, entries, static_cast<uint32_t>(P * T_),
      static_cast<uint32_t>(T_), rows.row_start, static_cast<ChunkEntry<float>*>(rows.extra));
  if (Status st = launch_status()) return st;
  const int64_t p_chunk = plan.shape[3];
  return launch_planned_shape<SumShape<1, 16>, SumShape<2, 8>, SumShape<4, 4>, SumShape<8, 2>>(
      plan.shape[1], plan.shape[2], "gather_backward_feat: no chunked sums for this plan", [&](auto shape) {
        using S = decltype(shape);
        return launch_chunked_sums<T, S::k, S::cs>(grad_out, rows, B, C, N, P, T_, p_chunk, grad_feat, s);
      });
}

// The dense sums' kernel for K targets per thread and CS channels (K * CS = 32: two blocks per
// SM; 64: one), after the chunk rows.
template <class T, int K, int CS>
Status launch_dense_sums(const T* grad_out, const uint16_t* bounds, const uint16_t* points,
                         const float* weights, int64_t B, int64_t C, int64_t N, int64_t P, int64_t T_,
                         int64_t p_chunk, int64_t chunks, bool weighted, T* grad_feat, cudaStream_t s) {
  constexpr int kMinBlocks = K * CS > 32 ? 1 : 2;
  auto kernel = dense_sum_kernel<T, K, CS, kMinBlocks>;
  const int64_t smem = dense_sum_smem_bytes(N, T_, CS, sizeof(T), p_chunk);
  if (cudaError_t err = allow_dynamic_smem(kernel, static_cast<size_t>(smem))) return cudaGetErrorString(err);
  const bool async_rows = P * sizeof(T) % 16 == 0 && reinterpret_cast<uintptr_t>(grad_out) % 16 == 0;
  const int64_t blocks = B * ceil_div(C, CS);
  kernel<<<static_cast<unsigned int>(blocks), kDenseThreads, static_cast<size_t>(smem), s>>>(
      grad_out, bounds, points, weights, C, N, P, T_, p_chunk, chunks, weighted, async_rows, grad_feat);
  return launch_status();
}

template <class T>
Status backward_dense(const T* grad_out, const int64_t* idx, const T* weight, int64_t B, int64_t C, int64_t N,
                      int64_t P, int64_t T_, const CudaPlan& plan, T* grad_feat, void* workspace,
                      KernelChecks checks, cudaStream_t s) {
  const int64_t k = plan.shape[1], cs = plan.shape[2], p_chunk = plan.shape[3];
  const int64_t chunks = ceil_div(P, p_chunk);
  const DenseChunkLayout layout(N, T_, p_chunk);
  WorkspaceCarver carve(workspace);
  uint16_t* bounds = carve.take<uint16_t>(B * chunks * layout.bounds);
  uint16_t* points = carve.take<uint16_t>(B * chunks * layout.entries);
  float* weights = carve.take<float>(B * chunks * layout.entries);
  auto rows_kernel = dense_chunk_rows_kernel<T>;
  const int64_t rows_smem = dense_rows_smem_bytes(N, T_, p_chunk);
  if (cudaError_t err = allow_dynamic_smem(rows_kernel, static_cast<size_t>(rows_smem)))
    return cudaGetErrorString(err);
  rows_kernel<<<static_cast<unsigned int>(B * chunks), kDenseThreads, static_cast<size_t>(rows_smem), s>>>(
      idx, weight, N, P, T_, p_chunk, chunks, bounds, points, weights, checks);
  if (Status st = launch_status()) return st;
  const bool weighted = weight != nullptr;
  return launch_planned_shape<SumShape<4, 8>, SumShape<8, 4>, SumShape<4, 16>, SumShape<8, 8>>(
      k, cs, "gather_backward_feat: no dense sums for this plan", [&](auto shape) {
        using S = decltype(shape);
        return launch_dense_sums<T, S::k, S::cs>(grad_out, bounds, points, weights, B, C, N, P, T_, p_chunk,
                                                 chunks, weighted, grad_feat, s);
      });
}

// The transposed sums: one slab of kChannelTile channels at a time, transposed and summed. The
// workspace holds one or two slabs (slab_buffers). The slabs it holds are transposed first,
// since they do not need the rows, and the rows are built on a second stream meanwhile where
// there are many entries. build_rows(stream, &row_start, &entries) queues the row building on
// `stream` and names the arrays that will hold the rows.
template <class T, class I, class BuildRows>
Status transposed_sums(const T* grad_out, const T* weight, int64_t B, int64_t C, int64_t N, int64_t P,
                       int64_t T_, void* slab_bytes, BuildRows&& build_rows, T* grad_feat, cudaStream_t s) {
  // The transpose is bandwidth-bound, the row building bound by atomics, latency and its launches,
  // so they can share the GPU (measured 20-35 us saved on group_points' 1M entries). Worth a fork
  // and a join only for many entries; the GatherOverlap knob at 0 builds them in line
  // (benchmarks compare the two). The fork comes first: the side stream waits only for the work
  // queued before it, not for the transposes.
  StreamFork fork(s);
  if (P > 0 && B * P * T_ >= kOverlapMinEntries && tuning_or(Knob::GatherOverlap, 1) != 0) {
    if (Status st = fork.begin()) return st;
  }
  // Each slab holds min(C, kChannelTile) channels per point.
  const int stride = static_cast<int>(C < kChannelTile ? C : kChannelTile);
  const int64_t slabs = ceil_div(C, kChannelTile);
  const int64_t buffers = slab_buffers(B, C, P, sizeof(T));
  const unsigned int batches = static_cast<unsigned int>(B < 65535 ? B : 65535);
  auto buffer = [&](int64_t i) { return static_cast<T*>(slab_bytes) + (i % buffers) * B * P * stride; };
  auto channels = [&](int64_t i) {
    return static_cast<int>(C - i * kChannelTile < kChannelTile ? C - i * kChannelTile : kChannelTile);
  };
  auto transpose = [&](int64_t i) {
    if (P == 0) return;  // the rows are empty and the sums below write zeros
    const dim3 t_grid(static_cast<unsigned int>(ceil_div(P, kTransposeSpan)), 1, batches);
    transpose_slab_kernel<T><<<t_grid, dim3(32, kTransposeRows), 0, s>>>(grad_out, B, C, P, i * kChannelTile,
                                                                         channels(i), stride, buffer(i));
  };
  const int64_t ahead = slabs < buffers ? slabs : buffers;
  for (int64_t i = 0; i < ahead; ++i) transpose(i);
  const I* row_start = nullptr;
  const I* entries = nullptr;
  if (Status st = build_rows(fork.side(), &row_start, &entries)) return st;  // side() is s when not forked
  if (Status st = fork.join()) return st;                                    // the sums need the rows
  auto row_sum = T_ == 1
                     ? row_sum_transposed_kernel<T, I, 1>
                     : (T_ == 3 ? row_sum_transposed_kernel<T, I, 3> : row_sum_transposed_kernel<T, I, 0>);
  const dim3 r_grid(static_cast<unsigned int>(ceil_div(N, 32)), batches);
  for (int64_t i = 0; i < slabs; ++i) {
    // Into the buffer that the sums of slab i - buffers, queued before on s, have read.
    if (i >= ahead) transpose(i);
    row_sum<<<r_grid, 256, 0, s>>>(buffer(i), weight, row_start, entries, B, C, N, P, T_, i * kChannelTile,
                                   channels(i), stride, grad_feat);
  }
  return launch_status();
}

template <class T, class I>
Status backward_feat(const T* grad_out, const int64_t* idx, const T* weight, int64_t B, int64_t C, int64_t N,
                     int64_t P, int64_t T_, T* grad_feat, const CudaPlan& sums, void* workspace,
                     KernelChecks checks, cudaStream_t s) {
  const SumPath path = static_cast<SumPath>(sums.path);
  if (path == SumPath::SparseFused)
    return launch_fused(grad_out, idx, weight, B, C, N, P, T_, sums, grad_feat, checks, s);
  if constexpr (!std::is_same<T, double>::value) {  // the planner never picks them for float64
    if (path == SumPath::Chunked)
      return backward_chunked(grad_out, idx, weight, B, C, N, P, T_, grad_feat, sums, workspace, checks, s);
    if (path == SumPath::Dense)
      return backward_dense(grad_out, idx, weight, B, C, N, P, T_, sums, grad_feat, workspace, checks, s);
  }
  if (path == SumPath::Transposed && sums.shape[1] == 1) {  // rows by radix sort
    if constexpr (std::is_same<I, uint32_t>::value) {
      RadixRows rows;
      if (Status st = carve_radix_rows(workspace, B, N, P, T_, slab_bytes(B, C, P, sizeof(T), path), &rows))
        return st;
      auto build = [&](cudaStream_t rs, const uint32_t** row_start, const uint32_t** entries) -> Status {
        if (Status st = build_radix_rows(idx, B, N, P, T_, true, &rows, checks, rs)) return st;
        *row_start = rows.row_start;
        *entries = rows.vals.Current();  // the sort's last pass chose the buffer (known on the host)
        return nullptr;
      };
      return transposed_sums<T, uint32_t>(grad_out, weight, B, C, N, P, T_, rows.extra, build, grad_feat, s);
    }
  }
  RowArrays<I> plan;
  if (Status st = carve_rows<I>(workspace, B, N, P, T_, slab_bytes(B, C, P, sizeof(T), path), &plan)) {
    return st;
  }
  const int64_t entries = B * P * T_;
  const int64_t rows = B * N + 1;
  auto build_counted = [&](cudaStream_t rows_stream, const I** row_start, const I** entry_list) -> Status {
    *row_start = plan.row_start;
    *entry_list = plan.entries;
    cudaError_t err = cudaMemsetAsync(plan.counts, 0, static_cast<size_t>(rows) * sizeof(I), rows_stream);
    if (err != cudaSuccess) return cudaGetErrorString(err);
    if (entries > 0) {
      count_kernel<I><<<grid_for(entries, kGatherBackwardThreads), kGatherBackwardThreads, 0, rows_stream>>>(
          idx, B, N, P * T_, plan.counts, checks);
      if (Status st = launch_status()) return st;
    }
    size_t bytes = plan.temp_bytes;
    err = cub::DeviceScan::ExclusiveSum(plan.temp, bytes, plan.counts, plan.row_start, rows, rows_stream);
    if (err != cudaSuccess) return cudaGetErrorString(err);
    if (entries > 0) {
      fill_kernel<I><<<grid_for(entries, kGatherBackwardThreads), kGatherBackwardThreads, 0, rows_stream>>>(
          idx, B, N, P * T_, plan.row_start, plan.counts, plan.entries);
      sort_rows_kernel<I>
          <<<grid_for(B * N, kGatherBackwardThreads), kGatherBackwardThreads, 0, rows_stream>>>(
              plan.row_start, B * N, plan.entries);
    }
    return launch_status();
  };
  if (path == SumPath::Transposed) {
    return transposed_sums<T, I>(grad_out, weight, B, C, N, P, T_, plan.slab, build_counted, grad_feat, s);
  }
  const I* unused_start;
  const I* unused_entries;
  if (Status st = build_counted(s, &unused_start, &unused_entries)) return st;
  if (path == SumPath::SparseStaged) {
    auto row_sum =
        T_ == 1 ? row_sum_sparse_staged_kernel<T, I, 1>
                : (T_ == 3 ? row_sum_sparse_staged_kernel<T, I, 3> : row_sum_sparse_staged_kernel<T, I, 0>);
    const int64_t CS = sums.shape[1], span = sums.shape[2];
    const size_t smem = staged_sum_smem<I>(CS, P, sizeof(T), span);
    if (cudaError_t err = allow_dynamic_smem(row_sum, smem)) return cudaGetErrorString(err);
    const int64_t blocks = B * ceil_div(C, CS) * ceil_div(N, span);
    row_sum<<<static_cast<unsigned int>(blocks), kStagedSumThreads, smem, s>>>(
        grad_out, weight, plan.row_start, plan.entries, B, C, N, P, T_, CS, span, grad_feat);
    return launch_status();
  }
  if (path == SumPath::SparseDirect) {
    auto row_sum = T_ == 1 ? row_sum_sparse_kernel<T, I, 1>
                           : (T_ == 3 ? row_sum_sparse_kernel<T, I, 3> : row_sum_sparse_kernel<T, I, 0>);
    const unsigned int blocks =
        grid_for(B * ceil_div(C, kSparseChannels) * ceil_div(N, 32) * 32, kGatherBackwardThreads);
    row_sum<<<blocks, kGatherBackwardThreads, 0, s>>>(grad_out, weight, plan.row_start, plan.entries, B, C, N,
                                                      P, T_, grad_feat);
    return launch_status();
  }
  // Enough (channel chunk, b, n) threads to fill the GPU, channels in multiples of kUnroll.
  int64_t chunks = ceil_div(int64_t{1} << 20, B * N);
  const int64_t max_chunks = ceil_div(C, kUnroll);
  if (chunks > max_chunks) chunks = max_chunks;
  if (chunks < 1) chunks = 1;
  const int64_t c_chunk = ceil_div(ceil_div(C, chunks), kUnroll) * kUnroll;
  const int64_t threads = ceil_div(C, c_chunk) * B * N;
  row_sum_kernel<T, I><<<grid_for(threads, kGatherBackwardThreads), kGatherBackwardThreads, 0, s>>>(
      grad_out, weight, plan.row_start, plan.entries, B, C, N, P, T_, c_chunk, grad_feat);
  return launch_status();
}

}  // namespace

CudaPlan gather_backward_feat_cuda_plan(Dtype dt, int64_t B, int64_t C, int64_t N, int64_t P, int64_t T) {
  return plan_gather_backward(dt, B, C, N, P, T);
}

Status gather_backward_feat_cuda(const CudaPlan& plan, Dtype dt, const void* grad_out, const int64_t* idx,
                                 const void* weight, int64_t B, int64_t C, int64_t N, int64_t P, int64_t T,
                                 void* grad_feat, void* workspace, const InKernelChecks* in_kernel_checks,
                                 void* stream) {
  if (B == 0 || C == 0 || N == 0) return nullptr;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const KernelChecks checks = KernelChecks::from(in_kernel_checks);
  const bool narrow = plan.shape[0] == 1;
  return dispatch_dtype(dt, [&](auto tag) -> Status {
    using E = decltype(tag);
    const E* g = static_cast<const E*>(grad_out);
    const E* w = static_cast<const E*>(weight);
    E* out = static_cast<E*>(grad_feat);
    if (narrow) return backward_feat<E, uint32_t>(g, idx, w, B, C, N, P, T, out, plan, workspace, checks, s);
    return backward_feat<E, unsigned long long>(g, idx, w, B, C, N, P, T, out, plan, workspace, checks, s);
  });
}

}  // namespace pointops
