// Weighted gather on CUDA (gather_points, group_points, three_interpolate forward):
//   out[b,c,p] = sum_t w[b,p,t] * feat[b,c,idx[b,p,t]]   (sum in ascending t, idx -1 adds 0)
#include <cstdlib>

#include "common.cuh"

namespace pointops {
namespace {

using namespace cuda_detail;

constexpr int kThreads = 256;

__device__ __forceinline__ int64_t ceil_div_dev(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One thread per output element, p fastest so that idx/weight/out accesses are coalesced.
template <class T>
__global__ void __launch_bounds__(kThreads)
    gather_forward_kernel(const T* __restrict__ feat, const int64_t* __restrict__ idx,
                          const T* __restrict__ weight, int64_t B, int64_t C, int64_t N,
                          int64_t P, int64_t T_, T* __restrict__ out) {
  using A = acc_t<T>;
  const int64_t total = B * C * P;
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < total;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t p = o % P;
    const int64_t bc = o / P;
    const int64_t b = bc / C;
    const T* f = feat + bc * N;
    const int64_t* ix = idx + (b * P + p) * T_;
    if (weight == nullptr && T_ == 1) {  // plain gather: copy the value itself
      const int64_t j = ix[0];
      out[o] = (j >= 0 && j < N) ? f[j] : from_acc<T>(A(0));
      continue;
    }
    const T* w = weight == nullptr ? nullptr : weight + (b * P + p) * T_;
    A acc = A(0);
    for (int64_t t = 0; t < T_; ++t) {
      const int64_t j = ix[t];
      if (j < 0 || j >= N) continue;
      const A v = to_acc(f[j]);
      acc = add_rn(acc, w == nullptr ? v : mul_rn(to_acc(w[t]), v));
    }
    out[o] = from_acc<T>(acc);
  }
}

// Staged path: a block copies CC whole feature rows feat[b, c0..c0+CC, :] into shared memory
// with coalesced loads, then gathers from there for a range of p. A direct gather pulls a
// 32-byte sector from L2 for every 4-byte element; staging reads each row once.
constexpr int kStagedThreads = 1024;  // one block per SM: many warps to hide the gather latency

template <class T>
__global__ void __launch_bounds__(kStagedThreads)
    gather_staged_kernel(const T* __restrict__ feat, const int64_t* __restrict__ idx,
                         const T* __restrict__ weight, int64_t B, int64_t C, int64_t N, int64_t P,
                         int64_t T_, T* __restrict__ out, int64_t CC, int64_t p_chunk) {
  using A = acc_t<T>;
  extern __shared__ __align__(16) unsigned char stage_raw[];
  T* rows = reinterpret_cast<T*>(stage_raw);
  const int64_t c_groups = ceil_div_dev(C, CC);
  const int64_t p_chunks = ceil_div_dev(P, p_chunk);
  const int64_t tile = blockIdx.x;
  const int64_t pc = tile % p_chunks;
  const int64_t cg = (tile / p_chunks) % c_groups;
  const int64_t b = tile / (p_chunks * c_groups);
  const int64_t c0 = cg * CC;
  const int64_t cn = C - c0 < CC ? C - c0 : CC;

  // Rows c0..c0+cn of cloud b are one contiguous range of feat.
  const T* src = feat + (b * C + c0) * N;
  const int64_t count = cn * N;
  const bool vec = (reinterpret_cast<uintptr_t>(src) % 16 == 0) && ((count * sizeof(T)) % 16 == 0);
  if (vec) {
    const uint4* s4 = reinterpret_cast<const uint4*>(src);
    uint4* d4 = reinterpret_cast<uint4*>(rows);
    const int64_t n4 = count * static_cast<int64_t>(sizeof(T)) / 16;
    for (int64_t i = threadIdx.x; i < n4; i += kStagedThreads) d4[i] = s4[i];
  } else {
    for (int64_t i = threadIdx.x; i < count; i += kStagedThreads) rows[i] = src[i];
  }
  __syncthreads();

  const int64_t p_end = (pc + 1) * p_chunk < P ? (pc + 1) * p_chunk : P;
  for (int64_t p = pc * p_chunk + threadIdx.x; p < p_end; p += kStagedThreads) {
    const int64_t* ix = idx + (b * P + p) * T_;
    T* o = out + (b * C + c0) * P + p;
    if (weight == nullptr && T_ == 1) {
      const int64_t j = ix[0];
      const bool valid = j >= 0 && j < N;
      for (int64_t cc = 0; cc < cn; ++cc) o[cc * P] = valid ? rows[cc * N + j] : from_acc<T>(A(0));
      continue;
    }
    const T* w = weight == nullptr ? nullptr : weight + (b * P + p) * T_;
    for (int64_t cc = 0; cc < cn; ++cc) {
      A acc = A(0);
      for (int64_t t = 0; t < T_; ++t) {
        const int64_t j = ix[t];
        if (j < 0 || j >= N) continue;
        const A v = to_acc(rows[cc * N + j]);
        acc = add_rn(acc, w == nullptr ? v : mul_rn(to_acc(w[t]), v));
      }
      o[cc * P] = from_acc<T>(acc);
    }
  }
}

constexpr int64_t kStageBytes = 192 * 1024;  // one block per SM, rows of up to 48K floats

}  // namespace

Status gather_forward_cuda(Dtype dt, const void* feat, const int64_t* idx, const void* weight,
                           int64_t B, int64_t C, int64_t N, int64_t P, int64_t T, void* out,
                           void* stream) {
  if (B == 0 || C == 0 || P == 0) return nullptr;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  return dispatch_dtype(dt, [&](auto tag) -> Status {
    using E = decltype(tag);
    // Staged when a feature row fits in shared memory and is used about once or more per
    // element (P*T >= N/2); otherwise gather directly.
    const int64_t row_bytes = N * static_cast<int64_t>(sizeof(E));
    const int forced = env_int("POINTOPS_GATHER_STAGED", -1);
    const bool staged = forced >= 0 ? (forced == 1 && row_bytes <= kStageBytes)
                                    : (row_bytes <= kStageBytes && 2 * P * T >= N);
    if (staged && N > 0) {
      int64_t CC = kStageBytes / row_bytes;
      if (CC > C) CC = C;
      const int64_t base_blocks = B * ceil_div(C, CC);
      int64_t p_chunks = ceil_div(4 * current_device_sm_count(), base_blocks);  // about 4 waves
      const int64_t max_chunks = ceil_div(P, 1024);
      if (p_chunks > max_chunks) p_chunks = max_chunks;
      if (p_chunks < 1) p_chunks = 1;
      const int64_t p_chunk = ceil_div(P, p_chunks);
      const size_t smem = static_cast<size_t>(CC * row_bytes);
      const int64_t blocks = base_blocks * ceil_div(P, p_chunk);
      if (blocks <= INT32_MAX) {  // else the direct path below (a grid-stride loop)
        auto kernel = gather_staged_kernel<E>;
        cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem));
        if (err != cudaSuccess) return cudaGetErrorString(err);
        kernel<<<static_cast<unsigned int>(blocks), kStagedThreads, smem, s>>>(
            static_cast<const E*>(feat), idx, static_cast<const E*>(weight), B, C, N, P, T,
            static_cast<E*>(out), CC, p_chunk);
        return launch_status();
      }
    }
    gather_forward_kernel<E><<<grid_for(B * C * P, kThreads), kThreads, 0, s>>>(
        static_cast<const E*>(feat), idx, static_cast<const E*>(weight), B, C, N, P, T,
        static_cast<E*>(out));
    return launch_status();
  });
}

}  // namespace pointops
