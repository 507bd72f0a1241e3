// Asynchronous value checks on CUDA (see kernels.h): a check kernel queued before an op's own
// kernels records the first problem it finds, and a poison kernel queued after them
// overwrites the op's outputs while a problem is recorded.
//
// Per device, the recorded code lives twice: in device memory, which the poison kernels read
// in stream order, and in pinned host memory mapped into the device, which the host reads
// without waiting for the device. The check kernel writes both; taking the code clears both.
#include <atomic>
#include <mutex>

#include "common.cuh"

namespace pointops {
namespace {

using namespace cuda_detail;

constexpr int kThreads = 256;
constexpr int kMaxDevices = 64;

struct DeviceState {
  int* device_code = nullptr;            // device memory
  std::atomic<int*> host_code{nullptr};  // pinned, mapped; set once, read without the lock
  int* host_code_on_device = nullptr;    // the device's address of host_code
};

std::mutex state_mutex;
DeviceState states[kMaxDevices];

// The device's state, allocated on first use. Allocation is not allowed while a stream is
// captured into a CUDA graph: then *available is false (the caller skips its checks).
Status device_state(int device, cudaStream_t stream, DeviceState** out, bool* available) {
  *available = false;
  if (device < 0 || device >= kMaxDevices) return "pointops: device index beyond the value-check table";
  std::lock_guard<std::mutex> lock(state_mutex);
  DeviceState& st = states[device];
  if (st.device_code == nullptr) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    cudaError_t err = cudaStreamIsCapturing(stream, &capture);
    if (err != cudaSuccess) return cudaGetErrorString(err);
    if (capture != cudaStreamCaptureStatusNone) return nullptr;
    int* device_code = nullptr;
    void* host = nullptr;
    void* host_on_device = nullptr;
    err = cudaMalloc(&device_code, sizeof(int));
    if (err == cudaSuccess) err = cudaMemset(device_code, 0, sizeof(int));
    if (err == cudaSuccess)
      err = cudaHostAlloc(&host, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable);
    if (err == cudaSuccess) err = cudaHostGetDevicePointer(&host_on_device, host, 0);
    if (err != cudaSuccess) return cudaGetErrorString(err);  // what was allocated stays with the process
    *static_cast<volatile int*>(host) = 0;
    st.host_code_on_device = static_cast<int*>(host_on_device);
    st.device_code = device_code;
    st.host_code.store(static_cast<int*>(host), std::memory_order_release);
  }
  *out = &st;
  *available = true;
  return nullptr;
}

struct CheckList {
  ValueCheck check[kMaxValueChecks];
  int count;
  int64_t total;  // elements over all checks
};

__device__ __forceinline__ double coordinate(const void* data, Dtype dt, int64_t i) {
  switch (dt) {
    case Dtype::Float32: return static_cast<const float*>(data)[i];
    case Dtype::Float64: return static_cast<const double*>(data)[i];
    case Dtype::Float16: return __half2float(static_cast<const __half*>(data)[i]);
    case Dtype::BFloat16: return __bfloat162float(static_cast<const __nv_bfloat16*>(data)[i]);
  }
  return 0.0;
}

__device__ __forceinline__ bool passes(const ValueCheck& c, int64_t i) {
  switch (c.kind) {
    case CheckKind::Coordinates: {
      const double v = coordinate(c.data, c.dt, i);
      return fabs(v) <= c.limit;  // false for nan too
    }
    case CheckKind::Range: {
      const int64_t v = static_cast<const int64_t*>(c.data)[i];
      return v >= c.low && v <= c.high;
    }
    case CheckKind::RowPointer: {
      const int64_t* p = static_cast<const int64_t*>(c.data);
      if (i == 0 && p[0] != 0) return false;
      if (i == c.count - 1 && p[i] != c.high) return false;
      if (i > 0 && c.low > 0 && p[i] - p[i - 1] > c.low) return false;
      return i == 0 || p[i - 1] <= p[i];
    }
  }
  return true;
}

__global__ void __launch_bounds__(kThreads)
    value_check_kernel(CheckList list, int* __restrict__ device_code, int* __restrict__ host_code) {
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < list.total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t i = e;
    int k = 0;
    while (k + 1 < list.count && i >= list.check[k].count) i -= list.check[k++].count;
    const ValueCheck& c = list.check[k];
    if (!passes(c, i) && atomicCAS(device_code, 0, c.code) == 0) {
      *reinterpret_cast<volatile int*>(host_code) = c.code;
      __threadfence_system();
    }
  }
}

struct PoisonList {
  PoisonTarget target[kMaxPoisonTargets];
  int count;
  int64_t total;
};

__device__ __forceinline__ void poison_element(const PoisonTarget& t, int64_t i) {
  if (t.is_index) {
    static_cast<int64_t*>(t.data)[i] = kPoisonIndex;
    return;
  }
  switch (t.dt) {
    case Dtype::Float32: static_cast<float*>(t.data)[i] = __int_as_float(0x7fc00000); break;
    case Dtype::Float64: static_cast<double*>(t.data)[i] = __longlong_as_double(0x7ff8000000000000LL); break;
    case Dtype::Float16: static_cast<__half*>(t.data)[i] = __ushort_as_half(0x7e00); break;
    case Dtype::BFloat16: static_cast<__nv_bfloat16*>(t.data)[i] = __ushort_as_bfloat16(0x7fc0); break;
  }
}

__global__ void __launch_bounds__(kThreads)
    poison_kernel(PoisonList list, const int* __restrict__ device_code) {
  if (*reinterpret_cast<const volatile int*>(device_code) == 0) return;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < list.total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t i = e;
    int k = 0;
    while (k + 1 < list.count && i >= list.target[k].count) i -= list.target[k++].count;
    poison_element(list.target[k], i);
  }
}

int current_device() {
  int device = -1;
  return cudaGetDevice(&device) == cudaSuccess ? device : -1;
}

}  // namespace

Status value_checks_cuda(const ValueCheck* checks, int count, void* stream, bool* skipped) {
  *skipped = false;
  if (count <= 0) return nullptr;
  if (count > kMaxValueChecks) return "pointops: too many value checks for one call";
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  DeviceState* st = nullptr;
  bool available = false;
  if (Status err = device_state(current_device(), s, &st, &available)) return err;
  if (!available) {
    *skipped = true;
    return nullptr;
  }
  CheckList list{};
  for (int k = 0; k < count; ++k) {
    if (checks[k].count <= 0) continue;
    list.check[list.count++] = checks[k];
    list.total += checks[k].count;
  }
  if (list.total == 0) return nullptr;
  value_check_kernel<<<grid_for(list.total, kThreads, 4 * int64_t{current_device_sm_count()}), kThreads, 0,
                       s>>>(list, st->device_code, st->host_code_on_device);
  return launch_status();
}

Status in_kernel_checks_cuda(int32_t code, void* stream, InKernelChecks* out, bool* available) {
  DeviceState* st = nullptr;
  if (Status err = device_state(current_device(), static_cast<cudaStream_t>(stream), &st, available))
    return err;
  if (*available) *out = InKernelChecks{st->device_code, st->host_code_on_device, code};
  return nullptr;
}

Status poison_outputs_cuda(const PoisonTarget* targets, int count, void* stream) {
  if (count <= 0) return nullptr;
  if (count > kMaxPoisonTargets) return "pointops: too many outputs to poison for one call";
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  DeviceState* st = nullptr;
  bool available = false;
  if (Status err = device_state(current_device(), s, &st, &available)) return err;
  if (!available) return nullptr;
  PoisonList list{};
  for (int k = 0; k < count; ++k) {
    if (targets[k].count <= 0 || targets[k].data == nullptr) continue;
    list.target[list.count++] = targets[k];
    list.total += targets[k].count;
  }
  if (list.total == 0) return nullptr;
  // Few blocks: with no code recorded each one reads a word and returns.
  poison_kernel<<<grid_for(list.total, kThreads, 2 * int64_t{current_device_sm_count()}), kThreads, 0, s>>>(
      list, st->device_code);
  return launch_status();
}

int32_t value_check_error(int32_t device, bool take, void* stream) {
  if (device < 0 || device >= kMaxDevices) return 0;
  DeviceState& st = states[device];
  volatile int* host = st.host_code.load(std::memory_order_acquire);
  if (host == nullptr) return 0;  // no check has run on this device
  const int32_t code = *host;
  if (code != 0 && take) {
    std::lock_guard<std::mutex> lock(state_mutex);
    *host = 0;
    cudaMemsetAsync(st.device_code, 0, sizeof(int), static_cast<cudaStream_t>(stream));
  }
  return code;
}

Status synchronize_stream(void* stream) {
  return status_of(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
}

}  // namespace pointops
