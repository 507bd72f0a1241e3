// Shared helpers for the CUDA kernels: dtype dispatch, conversion to the accumulation type,
// distance arithmetic that rounds exactly like the CPU kernels, and launch-status reporting.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <mutex>

#include "../kernels.h"
#include "../tuning.h"

namespace pointops {
namespace cuda_detail {

// float32/float16/bfloat16 accumulate in float32; float64 in float64.
template <class T>
struct AccOf {
  using type = float;
};
template <>
struct AccOf<double> {
  using type = double;
};
template <class T>
using acc_t = typename AccOf<T>::type;

__device__ __forceinline__ float to_acc(float v) { return v; }
__device__ __forceinline__ double to_acc(double v) { return v; }
__device__ __forceinline__ float to_acc(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_acc(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T>
__device__ __forceinline__ T from_acc(acc_t<T> v);
template <>
__device__ __forceinline__ float from_acc<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ double from_acc<double>(double v) {
  return v;
}
template <>
__device__ __forceinline__ __half from_acc<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Explicitly rounded multiply and add: nvcc would otherwise fuse a*b+c into one FMA, whose
// single rounding differs from the CPU kernels and could flip a nearest/farthest choice.
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }

// Squared distance as the CPU kernels compute it: (dx*dx + dy*dy) + dz*dz, dx = a.x - b.x.
template <class A>
__device__ __forceinline__ A dist2(A ax, A ay, A az, A bx, A by, A bz) {
  const A dx = ax - bx, dy = ay - by, dz = az - bz;
  return add_rn(add_rn(mul_rn(dx, dx), mul_rn(dy, dy)), mul_rn(dz, dz));
}

template <class A>
__device__ __forceinline__ A acc_inf();
template <>
__device__ __forceinline__ float acc_inf<float>() {
  return __int_as_float(0x7f800000);
}
template <>
__device__ __forceinline__ double acc_inf<double>() {
  return __longlong_as_double(0x7ff0000000000000LL);
}

// Number of valid points of cloud b, clamped to 0..N so that a bad value never reads out of
// bounds.
__device__ __forceinline__ int64_t clamped_length(const int64_t* lengths, int64_t b, int64_t N) {
  if (lengths == nullptr) return N;
  const int64_t v = lengths[b];
  return v < 0 ? 0 : (v > N ? N : v);
}

// Where each cloud's rows lie in a flat array, for kernels that serve both batch layouts:
//   padded: cloud b is rows b*N .. b*N + count(b) - 1, count = lengths[b] (or N), and indices
//           written for it are local (0 .. count - 1);
//   packed: cloud b is rows ptr[b] .. ptr[b+1] - 1 of N rows in all, and indices written for
//           it are global rows.
// Row pointers and lengths are clamped here so that bad values (which the value checks report)
// never address rows outside the array.
struct CloudRows {
  const int64_t* ptr = nullptr;      // packed: B + 1 row pointer
  const int64_t* lengths = nullptr;  // padded: B valid counts, or null for full clouds
  int64_t B = 0;
  int64_t N = 0;  // padded: rows per cloud; packed: rows in all

  static CloudRows padded(const int64_t* lengths, int64_t B, int64_t N) {
    return CloudRows{nullptr, lengths, B, N};
  }
  static CloudRows packed(const int64_t* ptr, int64_t B, int64_t rows) {
    return CloudRows{ptr, nullptr, B, rows};
  }

  __host__ __device__ bool is_packed() const { return ptr != nullptr; }
  __host__ __device__ int64_t total_rows() const { return ptr != nullptr ? N : B * N; }
  __device__ __forceinline__ int64_t clamp_row(int64_t r) const { return r < 0 ? 0 : (r > N ? N : r); }
  __device__ __forceinline__ int64_t begin(int64_t b) const {
    return ptr != nullptr ? clamp_row(ptr[b]) : b * N;
  }
  __device__ __forceinline__ int64_t count(int64_t b) const {
    if (ptr == nullptr) return clamped_length(lengths, b, N);
    const int64_t first = clamp_row(ptr[b]), end = clamp_row(ptr[b + 1]);
    return end > first ? end - first : 0;
  }
  // The value added to a cloud-local index to give the index written out.
  __device__ __forceinline__ int64_t index_base(int64_t b) const { return ptr != nullptr ? begin(b) : 0; }
  // The cloud holding row r (padded: r / N), or -1 when no cloud holds it.
  __device__ __forceinline__ int64_t cloud_of(int64_t r) const {
    if (ptr == nullptr) return N > 0 ? r / N : -1;
    int64_t lo = 0, hi = B - 1;  // the last cloud whose first row is <= r
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (clamp_row(ptr[mid]) <= r)
        lo = mid;
      else
        hi = mid - 1;
    }
    return B > 0 && r >= begin(lo) && r < begin(lo) + count(lo) ? lo : -1;
  }
};

// A kernel's own input check (kernels.h's InKernelChecks, passed by value; device_code null:
// checks off): records the first problem like the check kernel does.
struct KernelChecks {
  int* device_code = nullptr;
  int* host_code = nullptr;
  int32_t code = 0;

  static KernelChecks from(const InKernelChecks* c) {
    return c == nullptr ? KernelChecks{} : KernelChecks{c->device_code, c->host_code, c->code};
  }
  // Whether a problem was recorded before this kernel started (every output is poisoned then).
  // A plain load, cached in L1: a volatile one per thread sends every thread of a gather to the
  // same L2 address. A report made by this kernel may or may not be seen: the contract is
  // about problems recorded by earlier calls.
  __device__ __forceinline__ bool recorded() const { return device_code != nullptr && *device_code != 0; }
  __device__ __forceinline__ void report() const {
    if (device_code != nullptr && atomicCAS(device_code, 0, code) == 0) {
      *reinterpret_cast<volatile int*>(host_code) = code;
      __threadfence_system();
    }
  }
};

template <class A>
__device__ __forceinline__ A quiet_nan();
template <>
__device__ __forceinline__ float quiet_nan<float>() {
  return __int_as_float(0x7fc00000);
}
template <>
__device__ __forceinline__ double quiet_nan<double>() {
  return __longlong_as_double(0x7ff8000000000000LL);
}

// Calls f(T{}) with T the element type of dt.
template <class F>
Status dispatch_dtype(Dtype dt, F&& f) {
  switch (dt) {
    case Dtype::Float32: return f(float{});
    case Dtype::Float64: return f(double{});
    case Dtype::Float16: return f(__half{});
    case Dtype::BFloat16: return f(__nv_bfloat16{});
  }
  return "pointops: unsupported dtype for a CUDA kernel";
}

inline size_t dtype_acc_bytes(Dtype dt) { return dt == Dtype::Float64 ? 8 : 4; }

// The launch error of the kernels just queued, as a static string (nullptr when none).
inline Status launch_status() {
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

inline Status status_of(cudaError_t err) { return err == cudaSuccess ? nullptr : cudaGetErrorString(err); }

// Workspaces hold several arrays; each starts on a 256-byte boundary.
__host__ __device__ inline size_t align_up(size_t bytes) { return (bytes + 255) & ~static_cast<size_t>(255); }

// Hands out consecutive aligned pieces of one workspace (the same walk sizes and carves it).
class WorkspaceCarver {
 public:
  explicit WorkspaceCarver(void* base) : base_(static_cast<char*>(base)) {}
  template <class U>
  U* take(size_t count) {
    char* p = base_ == nullptr ? nullptr : base_ + used_;
    used_ += align_up(count * sizeof(U));
    return reinterpret_cast<U*>(p);
  }
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

__host__ __device__ inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks for a grid-stride loop over `total` items (gridDim.x is capped; loops cover the rest).
inline unsigned int grid_for(int64_t total, int threads, int64_t cap = 1 << 20) {
  int64_t blocks = ceil_div(total, threads);
  if (blocks < 1) blocks = 1;
  if (blocks > cap) blocks = cap;
  return static_cast<unsigned int>(blocks);
}

// An attribute of the current device (0 where it cannot be read), cached per device: the
// launch plans read attributes on every op call, and each query costs host time.
template <cudaDeviceAttr Attr>
inline int current_device_attribute() {
  constexpr int kCachedDevices = 64;
  static std::atomic<int> cache[kCachedDevices];  // 0: not read yet
  int dev = 0, value = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 0;
  const bool cached = dev >= 0 && dev < kCachedDevices;
  if (cached && (value = cache[dev].load(std::memory_order_relaxed)) != 0) return value;
  if (cudaDeviceGetAttribute(&value, Attr, dev) != cudaSuccess) return 0;
  if (cached) cache[dev].store(value, std::memory_order_relaxed);
  return value;
}

// Shared memory a block may take on the current device, static and dynamic together: the opt-in
// limit (227 KB on Hopper, 163 KB on the A100, 99 KB on most consumer cards, 64 KB on Turing;
// 48 KB where it cannot be read, or lower with the SmemLimitKb knob).
inline int64_t smem_optin_bytes() {
  const int device = current_device_attribute<cudaDevAttrMaxSharedMemoryPerBlockOptin>();
  int64_t bytes = device > 0 ? device : 48 * 1024;
  const int64_t kb = tuning(Knob::SmemLimitKb);
  if (kb != kUnset) {
    const int64_t limit = (kb > 48 ? kb : 48) * 1024;
    if (limit < bytes) bytes = limit;
  }
  return bytes;
}
// The dynamic part: the opt-in limit less 4 KB for the kernels' static shared memory (cub's scan
// storage takes 2.2 KB). Every planner that asks for more than 48 KB keeps within it, or picks a
// path that needs less.
inline int64_t dynamic_smem_limit() { return smem_optin_bytes() - 4 * 1024; }

// `wanted` bytes of dynamic shared memory, or as much as the device allows.
inline int64_t smem_budget(int64_t wanted) {
  const int64_t limit = dynamic_smem_limit();
  return wanted < limit ? wanted : limit;
}

inline int current_device_sm_count() {
  const int sms = current_device_attribute<cudaDevAttrMultiProcessorCount>();
  return sms > 0 ? sms : 1;
}

// Copies n items, each thread keeping U loads in flight before it stores them.
template <int THREADS, int U, class V>
__device__ __forceinline__ void copy_in_flight(const V* __restrict__ src, int64_t n, V* dst) {
  for (int64_t base = threadIdx.x; base < n; base += static_cast<int64_t>(THREADS) * U) {
    V v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (base + u * THREADS < n) v[u] = src[base + u * THREADS];
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (base + u * THREADS < n) dst[base + u * THREADS] = v[u];
    }
  }
}

// Copies count elements into shared memory (16-byte loads and stores when both ends are
// 16-byte aligned and the size a multiple of 16 bytes), each thread keeping U loads in flight:
// a block stages tens of KB from L2 or DRAM, and with one load at a time it would wait out the
// full latency of each.
template <int THREADS, int U, class T>
__device__ __forceinline__ void stage_to_shared(const T* __restrict__ src, int64_t count, T* dst) {
  if (reinterpret_cast<uintptr_t>(src) % 16 == 0 && reinterpret_cast<uintptr_t>(dst) % 16 == 0 &&
      (count * sizeof(T)) % 16 == 0) {
    copy_in_flight<THREADS, U>(reinterpret_cast<const uint4*>(src),
                               count * static_cast<int64_t>(sizeof(T)) / 16, reinterpret_cast<uint4*>(dst));
  } else {
    copy_in_flight<THREADS, U>(src, count, dst);
  }
}

// Warp reductions in one instruction (__reduce_*_sync, sm_80 and newer) only from nvcc 13 on:
// sm_90 code that ptxas 12.4 built from them picked wrong FPS points and read out of bounds,
// while the same PTX through the 13.0 driver's JIT, and the shuffle form built by 12.4, were
// right (kernel oracle on the H200). CUDA 12 builds take the shuffle form.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && defined(__CUDACC_VER_MAJOR__) && \
    __CUDACC_VER_MAJOR__ >= 13
#define POINTOPS_WARP_REDUX 1
#endif

// A 16-byte copy from global to shared memory that the thread does not wait for (cp.async,
// sm_80 and newer; a plain copy before), its commit, and the wait until at most `pending`
// committed groups are still in flight. Lets a block load its next rows while it works.
__device__ __forceinline__ void copy16_async(void* shared_dst, const void* global_src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned int dst = static_cast<unsigned int>(__cvta_generic_to_shared(shared_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(global_src) : "memory");
#else
  *static_cast<uint4*>(shared_dst) = *static_cast<const uint4*>(global_src);
#endif
}

__device__ __forceinline__ void async_copies_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

template <int pending>
__device__ __forceinline__ void async_copies_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending) : "memory");
#endif
}

// Recent launch plans, keyed by device, tuning generation and up to four sizes: planners that
// query occupancy make driver calls costing microseconds of host time, on every op call
// otherwise. A small table replaced round robin; lookups take a mutex (enqueueing only).
template <class Value, int kEntries = 32>
class PlanCache {
 public:
  struct Key {
    int device = -1;
    int64_t generation = 0;
    int64_t size[4] = {0, 0, 0, 0};
    bool operator==(const Key& o) const {
      return device == o.device && generation == o.generation && size[0] == o.size[0] &&
             size[1] == o.size[1] && size[2] == o.size[2] && size[3] == o.size[3];
    }
  };

  static Key key(int64_t a, int64_t b = 0, int64_t c = 0, int64_t d = 0) {
    Key k;
    if (cudaGetDevice(&k.device) != cudaSuccess) k.device = -1;
    k.generation = tuning_generation();
    k.size[0] = a, k.size[1] = b, k.size[2] = c, k.size[3] = d;
    return k;
  }

  bool find(const Key& k, Value* v) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int e = 0; e < kEntries; ++e) {
      if (used_[e] && keys_[e] == k) {
        *v = values_[e];
        return true;
      }
    }
    return false;
  }

  void store(const Key& k, const Value& v) {
    if (k.device < 0) return;
    std::lock_guard<std::mutex> lock(mutex_);
    keys_[next_] = k;
    values_[next_] = v;
    used_[next_] = true;
    next_ = (next_ + 1) % kEntries;
  }

 private:
  std::mutex mutex_;
  Key keys_[kEntries];
  Value values_[kEntries];
  bool used_[kEntries] = {};
  int next_ = 0;
};

// Sets an attribute of `kernel` on the current device to at least `value`; the driver is
// called only when no earlier call on that device set as much (setting it costs host time, on
// every op call otherwise).
template <class Kernel>
cudaError_t kernel_attribute_at_least(Kernel kernel, cudaFuncAttribute attribute, int value) {
  constexpr int kEntries = 128;
  struct Entry {
    const void* kernel;
    int device;
    cudaFuncAttribute attribute;
    int value;
  };
  static std::mutex mutex;
  static Entry table[kEntries];
  static int used = 0;
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  const void* key = reinterpret_cast<const void*>(kernel);
  std::lock_guard<std::mutex> lock(mutex);
  Entry* entry = nullptr;
  for (int e = 0; e < used; ++e) {
    if (table[e].kernel == key && table[e].device == device && table[e].attribute == attribute)
      entry = &table[e];
  }
  if (entry != nullptr && entry->value >= value) return cudaSuccess;
  err = cudaFuncSetAttribute(kernel, attribute, value);
  if (err != cudaSuccess) return err;
  if (entry == nullptr && used < kEntries) entry = &table[used++];
  if (entry != nullptr) *entry = Entry{key, device, attribute, value};
  return cudaSuccess;
}

// Lets `kernel` take `bytes` of dynamic shared memory. Without the attribute a block may hold
// 48 KB of static and dynamic shared memory together; kernels' static shared memory (cub's
// scan storage, tiles) stays under 16 KB, so the attribute is set from 32 KB of dynamic on.
// More than dynamic_smem_limit() allows (the SmemLimitKb knob emulating a smaller device) is
// refused as that device would refuse it.
template <class Kernel>
cudaError_t allow_dynamic_smem(Kernel kernel, size_t bytes) {
  if (bytes <= 32 * 1024) return cudaSuccess;
  if (static_cast<int64_t>(bytes) > smem_optin_bytes()) return cudaErrorInvalidValue;
  return kernel_attribute_at_least(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(bytes));
}

// Blocks of `kernel` resident per SM of the current device (at least 1), cached per device
// and launch shape: the occupancy query costs host time on every op call otherwise.
template <class Kernel>
int blocks_per_sm(Kernel kernel, int threads, size_t smem) {
  static PlanCache<int> cache;
  const auto key = PlanCache<int>::key(reinterpret_cast<intptr_t>(reinterpret_cast<const void*>(kernel)),
                                       threads, static_cast<int64_t>(smem));
  int per_sm = 0;
  if (cache.find(key, &per_sm)) return per_sm;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem) != cudaSuccess ||
      per_sm < 1) {
    cudaGetLastError();
    return 1;
  }
  cache.store(key, per_sm);
  return per_sm;
}

inline int64_t current_device_l2_bytes() { return current_device_attribute<cudaDevAttrL2CacheSize>(); }

inline int current_device_major() { return current_device_attribute<cudaDevAttrComputeCapabilityMajor>(); }

}  // namespace cuda_detail
}  // namespace pointops
