// The contract between the binding layer (csrc/binding.cpp) and the kernels (csrc/cpu/*.cpp,
// csrc/cuda/*.cu). Kernels are plain C++/CUDA on raw pointers, sizes and a stream: no torch types,
// so they can be tested and benchmarked on their own and built by any toolchain.
//
// Conventions for every function below:
// - Tensors are dense and row-major (contiguous); the binding layer has already checked shapes,
//   dtypes, devices, k > 0, radius >= 0, and made inputs contiguous.
// - Sizes and indices are int64_t (never `long`: it is 32-bit on MSVC). Index inputs are int64;
//   an index of -1 means "no point" wherever indices are read or written.
// - `lengths` (per-batch number of valid points, int64 [B]) and `query_lengths` may be null,
//   meaning every cloud is full. Valid values are 0..N (the binding layer checks this on CPU;
//   CUDA kernels clamp to 0..N so that a bad value can never read out of bounds).
// - Reduced precision (float16/bfloat16) is read and written in its own type but accumulated
//   in float32; float32 accumulates in float32; float64 in float64.
// - Every function returns nullptr on success, or a static message naming what failed (for
//   CUDA: the launch error string). The binding layer turns it into a Python RuntimeError.
// - CUDA functions take the stream as `void*` (a cudaStream_t) and never synchronize it;
//   they run on the current device, which the binding layer sets to the input's device.
// - CUDA ops that choose among strategies are planned once per call: `<name>_cuda_plan(...)`
//   returns a CudaPlan (the path, its launch shape and the workspace it needs), the binding
//   layer allocates `plan.workspace_bytes` of scratch device memory (so the caching allocator
//   and CUDA graphs see it; 0 bytes means the pointer may be null) and hands plan and workspace
//   to `<name>_cuda(...)`, which launches exactly that plan.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>

namespace pointops {

enum class Dtype : int32_t { Float32 = 0, Float64 = 1, Float16 = 2, BFloat16 = 3 };

using Status = const char*;  // nullptr = success

// What a CUDA op's planner decided. `path` and `shape` mean what the op's .cu file says; the
// binding layer reads only workspace_bytes and passes the plan back unchanged.
struct CudaPlan {
  int32_t path = 0;
  int64_t shape[4] = {0, 0, 0, 0};
  size_t workspace_bytes = 0;
};

// ---------------------------------------------------------------------------------------------
// Farthest point sampling.
// xyz [B,N,3] -> idx [B,K]. Cloud b has n = lengths ? lengths[b] : N points.
// idx[b,0] = min(start, n-1); each next pick is the point with the largest squared distance to
// the picked set (float accumulation as above); ties go to the lowest index. Positions i >= n
// (cloud too small, including n == 0) are -1.
Status furthest_point_sample_cpu(Dtype dt, const void* xyz, const int64_t* lengths, int64_t B, int64_t N,
                                 int64_t K, int64_t start, int64_t* idx);
CudaPlan furthest_point_sample_cuda_plan(Dtype dt, int64_t B, int64_t N, int64_t K);
Status furthest_point_sample_cuda(const CudaPlan& plan, Dtype dt, const void* xyz, const int64_t* lengths,
                                  int64_t B, int64_t N, int64_t K, int64_t start, int64_t* idx,
                                  void* workspace, void* stream);

// Packed clouds: cloud b is rows ptr[b] .. ptr[b+1]-1 of xyz [P,3] and gets the rows
// sample_ptr[b] .. sample_ptr[b+1]-1 of idx [S] (as many picks as that range holds). Picks are
// global rows of xyz; the first is the cloud's first row; slots past the cloud's size are -1.
// The CUDA plan sizes its strategy for clouds of at most max_points points (every cloud must
// fit: the binding checks it with the value checks).
Status furthest_point_sample_packed_cpu(Dtype dt, const void* xyz, const int64_t* ptr, int64_t P,
                                        const int64_t* sample_ptr, int64_t S, int64_t B, int64_t* idx);
CudaPlan furthest_point_sample_packed_cuda_plan(Dtype dt, int64_t B, int64_t P, int64_t max_points);
Status furthest_point_sample_packed_cuda(const CudaPlan& plan, Dtype dt, const void* xyz, const int64_t* ptr,
                                         int64_t P, const int64_t* sample_ptr, int64_t S, int64_t B,
                                         int64_t* idx, void* workspace, void* stream);

// ---------------------------------------------------------------------------------------------
// Ball query.
// xyz [B,N,3], query [B,M,3] -> idx [B,M,K], count [B,M], optional dist2 [B,M,K] (same dtype
// as xyz; pass null to skip). A point j < n is a hit for query m when
//   d2 <= radius*radius  (inclusive = true)   or   d2 < radius*radius  (inclusive = false),
// d2 computed in the accumulation type, radius*radius rounded to that type once.
// idx holds the first K hits in ascending index order; count = number of hits, capped at K.
// A ball with 0 < count < K is padded by repeating its first hit (and its dist2). An empty ball,
// and every query m >= query_lengths[b], gives idx -1, count 0, dist2 +inf.
Status ball_query_cpu(Dtype dt, const void* xyz, const void* query, const int64_t* lengths,
                      const int64_t* query_lengths, int64_t B, int64_t N, int64_t M, double radius,
                      bool inclusive, int64_t K, int64_t* idx, int64_t* count, void* dist2);
CudaPlan ball_query_cuda_plan(Dtype dt, int64_t B, int64_t N, int64_t M, int64_t K);
Status ball_query_cuda(const CudaPlan& plan, Dtype dt, const void* xyz, const void* query,
                       const int64_t* lengths, const int64_t* query_lengths, int64_t B, int64_t N, int64_t M,
                       double radius, bool inclusive, int64_t K, int64_t* idx, int64_t* count, void* dist2,
                       void* workspace, void* stream);
// Packed layout: every cloud's points are rows of one xyz [P,3], cloud b being rows
// ptr[b]..ptr[b+1]-1 (int64 row pointer ptr [B+1]); queries likewise, query [Q,3] with qptr
// [B+1]. Outputs follow the query rows: idx [Q,K], count [Q], optional dist2 [Q,K]; indices are
// global rows of xyz. Same hits, order, padding and counts as above. ptr and qptr are clamped to
// 0..P and 0..Q and made non-decreasing, so a bad row pointer never reads out of bounds; query
// rows outside every cloud give idx -1, count 0, dist2 +inf.
Status ball_query_packed_cpu(Dtype dt, const void* xyz, const int64_t* ptr, int64_t P, const void* query,
                             const int64_t* qptr, int64_t Q, int64_t B, double radius, bool inclusive,
                             int64_t K, int64_t* idx, int64_t* count, void* dist2);
CudaPlan ball_query_packed_cuda_plan(Dtype dt, int64_t B, int64_t P, int64_t Q, int64_t K);
Status ball_query_packed_cuda(const CudaPlan& plan, Dtype dt, const void* xyz, const int64_t* ptr, int64_t P,
                              const void* query, const int64_t* query_ptr, int64_t Q, int64_t B,
                              double radius, bool inclusive, int64_t K, int64_t* idx, int64_t* count,
                              void* dist2, void* workspace, void* stream);

// ---------------------------------------------------------------------------------------------
// k nearest neighbours (three_nn is knn with K = 3, query = unknown, xyz = known).
// xyz [B,N,3], query [B,M,3] -> dist2 [B,M,K] (same dtype as xyz), idx [B,M,K].
// Sorted by ascending d2; equal d2 ordered by ascending index. Slots beyond the cloud's n points
// (and every slot of a query m >= query_lengths[b]) hold idx -1 and dist2 +inf.
Status knn_cpu(Dtype dt, const void* xyz, const void* query, const int64_t* lengths,
               const int64_t* query_lengths, int64_t B, int64_t N, int64_t M, int64_t K, void* dist2,
               int64_t* idx);
CudaPlan knn_cuda_plan(Dtype dt, int64_t B, int64_t N, int64_t M, int64_t K);
Status knn_cuda(const CudaPlan& plan, Dtype dt, const void* xyz, const void* query, const int64_t* lengths,
                const int64_t* query_lengths, int64_t B, int64_t N, int64_t M, int64_t K, void* dist2,
                int64_t* idx, void* workspace, void* stream);
// Packed layout (see ball_query_packed_cpu): xyz [P,3] with ptr [B+1], query [Q,3] with qptr
// [B+1] -> dist2 [Q,K], idx [Q,K] holding global rows of xyz. Same neighbours and order as
// above; ptr/qptr clamped and made non-decreasing; query rows outside every cloud get idx -1,
// dist2 +inf.
Status knn_packed_cpu(Dtype dt, const void* xyz, const int64_t* ptr, int64_t P, const void* query,
                      const int64_t* qptr, int64_t Q, int64_t B, int64_t K, void* dist2, int64_t* idx);
CudaPlan knn_packed_cuda_plan(Dtype dt, int64_t B, int64_t P, int64_t Q, int64_t K);
Status knn_packed_cuda(const CudaPlan& plan, Dtype dt, const void* xyz, const int64_t* ptr, int64_t P,
                       const void* query, const int64_t* query_ptr, int64_t Q, int64_t B, int64_t K,
                       void* dist2, int64_t* idx, void* workspace, void* stream);

// ---------------------------------------------------------------------------------------------
// Weighted gather: one kernel family serves gather_points (T = 1, no weight), group_points
// (idx [B,M,K] seen as [B,P=M*K,1]) and three_interpolate (T = 3 with weights).
//   out[b,c,p] = sum_t w[b,p,t] * feat[b,c,idx[b,p,t]]     (w = 1 when weight is null)
// feat [B,C,N], idx [B,P,T], weight [B,P,T] or null, out [B,C,P]. idx -1 contributes 0.
// Indices outside -1..N-1 are the binding layer's to reject; kernels treat them as -1.
Status gather_forward_cpu(Dtype dt, const void* feat, const int64_t* idx, const void* weight, int64_t B,
                          int64_t C, int64_t N, int64_t P, int64_t T, void* out);
// With `checks` (CUDA): an index outside -1..N-1 is recorded (checks->code) and makes its output
// NaN, and while any problem is recorded on the device every output is NaN: the kernel checks
// its own input, so the gather needs no separate check and poison kernels.
struct InKernelChecks;
Status gather_forward_cuda(Dtype dt, const void* feat, const int64_t* idx, const void* weight, int64_t B,
                           int64_t C, int64_t N, int64_t P, int64_t T, void* out,
                           const InKernelChecks* checks, void* stream);

// Gradient w.r.t. feat:  grad_feat[b,c,n] = sum over (p,t) with idx[b,p,t] == n of
//   w[b,p,t] * grad_out[b,c,p]. grad_feat [B,C,N] is fully written (zeros where nothing maps).
// Deterministic: the sum for each n is taken in ascending (p,t) order, no float atomics.
// With `checks` (CUDA), in both gradients and in the packed gradients below: an index outside
// -1..N-1 adds nothing and is recorded, so a direct call with indices the forward never saw
// is reported too (by the next call or check_errors).
Status gather_backward_feat_cpu(Dtype dt, const void* grad_out, const int64_t* idx, const void* weight,
                                int64_t B, int64_t C, int64_t N, int64_t P, int64_t T, void* grad_feat);
CudaPlan gather_backward_feat_cuda_plan(Dtype dt, int64_t B, int64_t C, int64_t N, int64_t P, int64_t T);
Status gather_backward_feat_cuda(const CudaPlan& plan, Dtype dt, const void* grad_out, const int64_t* idx,
                                 const void* weight, int64_t B, int64_t C, int64_t N, int64_t P, int64_t T,
                                 void* grad_feat, void* workspace, const InKernelChecks* checks,
                                 void* stream);

// Gradient w.r.t. weight: grad_w[b,p,t] = sum_c grad_out[b,c,p] * feat[b,c,idx[b,p,t]]
// (0 where idx is -1). grad_w [B,P,T].
Status gather_backward_weight_cpu(Dtype dt, const void* grad_out, const void* feat, const int64_t* idx,
                                  int64_t B, int64_t C, int64_t N, int64_t P, int64_t T, void* grad_weight);
Status gather_backward_weight_cuda(Dtype dt, const void* grad_out, const void* feat, const int64_t* idx,
                                   int64_t B, int64_t C, int64_t N, int64_t P, int64_t T, void* grad_weight,
                                   const InKernelChecks* checks, void* stream);

// Rows of channels-last features (packed batches): feat [P,C], idx [Q,T] (global rows, -1 adds
// nothing), weight [Q,T] or null -> out [Q,C], out[q,c] = sum_t w[q,t] * feat[idx[q,t],c] in
// ascending t. The feature gradient grad_feat [P,C] sums each row's entries in ascending (q,t)
// order (deterministic); the weight gradient grad_w [Q,T] sums over c in ascending order.
// On CUDA idx may be int32 (Pointcept's indices, read without a conversion copy), and the forward
// checks its indices itself: an index outside -1..P-1 is recorded (InKernelChecks) and its output
// row is NaN; every output is NaN while a problem is recorded and not yet raised.
struct RowIndex {
  const void* data;
  bool int32;  // int32 values, else int64
};
Status gather_rows_cpu(Dtype dt, const void* feat, const int64_t* idx, const void* weight, int64_t P,
                       int64_t C, int64_t Q, int64_t T, void* out);
Status gather_rows_cuda(Dtype dt, const void* feat, RowIndex idx, const void* weight, int64_t P, int64_t C,
                        int64_t Q, int64_t T, void* out, const InKernelChecks* checks, void* stream);
Status gather_rows_backward_feat_cpu(Dtype dt, const void* grad_out, const int64_t* idx, const void* weight,
                                     int64_t P, int64_t C, int64_t Q, int64_t T, void* grad_feat);
CudaPlan gather_rows_backward_feat_cuda_plan(Dtype dt, int64_t P, int64_t C, int64_t Q, int64_t T);
Status gather_rows_backward_feat_cuda(const CudaPlan& plan, Dtype dt, const void* grad_out, RowIndex idx,
                                      const void* weight, int64_t P, int64_t C, int64_t Q, int64_t T,
                                      void* grad_feat, void* workspace, const InKernelChecks* checks,
                                      void* stream);
Status gather_rows_backward_weight_cpu(Dtype dt, const void* grad_out, const void* feat, const int64_t* idx,
                                       int64_t P, int64_t C, int64_t Q, int64_t T, void* grad_weight);
Status gather_rows_backward_weight_cuda(Dtype dt, const void* grad_out, const void* feat, RowIndex idx,
                                        int64_t P, int64_t C, int64_t Q, int64_t T, void* grad_weight,
                                        const InKernelChecks* checks, void* stream);

// ---------------------------------------------------------------------------------------------
// Asynchronous value checks (CUDA): the default CUDA path never waits for the device, so input
// values are checked by a kernel queued before the op's own kernels, and what it finds is
// reported later (value_check_error). A problem is recorded as one code (value_check_codes.h);
// the first recorded code stays until it is taken, and while a code is recorded every output
// listed to poison_outputs_cuda is overwritten (floats NaN, indices kPoisonIndex), so no call
// after the bad one returns a plausible-looking result. The CPU binding checks values directly.
enum class CheckKind : int32_t {
  Coordinates = 1,  // floats (dtype dt) finite with |x| <= limit
  Range = 2,        // int64 in [low, high]
  RowPointer = 3,   // int64 [count]: first 0, nondecreasing, last == high, steps <= low if low > 0
};

struct ValueCheck {
  CheckKind kind;
  int32_t code;  // recorded when this check fails
  const void* data;
  int64_t count;
  Dtype dt;           // Coordinates: the element type
  double limit;       // Coordinates
  int64_t low, high;  // Range / RowPointer
};

struct PoisonTarget {
  void* data;
  int64_t count;
  bool is_index;  // int64 indices (else floats of dtype dt)
  Dtype dt;
};

// For kernels that check their own inputs: where to record a problem, and the code to record.
struct InKernelChecks {
  int* device_code;
  int* host_code;  // the device's address of the mapped host word
  int32_t code;
};

constexpr int kMaxValueChecks = 6;
constexpr int kMaxPoisonTargets = 4;
constexpr int64_t kPoisonIndex = INT64_MIN;

// Queues the checks (at most kMaxValueChecks) on `stream`. *skipped is set when they cannot run
// (the device's check state is not allocated yet and the stream is being captured).
Status value_checks_cuda(const ValueCheck* checks, int count, void* stream, bool* skipped);
// The recording words of the current device for a kernel that checks its own input; false when
// they cannot be had (not allocated yet while `stream` is being captured).
Status in_kernel_checks_cuda(int32_t code, void* stream, InKernelChecks* out, bool* available);
// Queues the overwrite of the targets with poison, which takes effect only while a code is
// recorded on the current device.
Status poison_outputs_cuda(const PoisonTarget* targets, int count, void* stream);
// The code recorded on `device` and visible to the host now, without waiting (0: none); `take`
// clears it (on the host at once, on the device in `stream`'s order).
int32_t value_check_error(int32_t device, bool take, void* stream);
// Waits for the work queued on `stream` (the explicit check, pointops.check_errors()).
Status synchronize_stream(void* stream);

// ---------------------------------------------------------------------------------------------
// Voxel grid ids (torch_cluster.grid_cluster). pos [N,D] float32/float64; size, start, end [D] of
// pos's dtype; start (end) null means the per-dimension minimum (maximum) of pos, NaN-propagating
// like torch.min / torch.max. In pos's dtype, with trunc toward zero to int64:
//   cells[d] = trunc((end[d] - start[d]) / size[d]) + 1,  stride[0] = 1,
//   stride[d] = stride[d-1] * cells[d-1],  out[i] = sum_d trunc((pos[i,d] - start[d]) / size[d]) * stride[d]
// computed exactly in int64. Bad values (size not finite and > 0, non-finite start/end/pos, end
// below start, more cells than int64 ids can number, a point whose id does not fit in int64):
// the CPU kernel returns an error; the CUDA kernels (which never synchronize) record the problem
// where `checks` says (null: nowhere) and write kPoisonIndex for every point they affect.
// On CUDA, D is at most kGridClusterMaxCudaDims (the grid's parameters live in shared memory).
constexpr int64_t kGridClusterMaxCudaDims = 1024;
Status grid_cluster_cpu(Dtype dt, const void* pos, const void* size, const void* start, const void* end,
                        int64_t N, int64_t D, int64_t* out);
CudaPlan grid_cluster_cuda_plan(Dtype dt, int64_t N, int64_t D, bool need_bounds);
Status grid_cluster_cuda(const CudaPlan& plan, Dtype dt, const void* pos, const void* size, const void* start,
                         const void* end, int64_t N, int64_t D, int64_t* out, void* workspace,
                         const InKernelChecks* checks, void* stream);

// ---------------------------------------------------------------------------------------------
// What the CUDA part of this binary was built with (filled in by csrc/cuda/build_info.cu from
// compile-time macros; the CPU-only build reports cuda_version 0).
struct CudaBuildInfo {
  int cuda_version;  // CUDART_VERSION, e.g. 12090; 0 in a CPU-only build
};
CudaBuildInfo cuda_build_info();

}  // namespace pointops
