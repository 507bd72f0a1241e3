// Running two independent parts of one op at the same time: a second stream per device
// (highest priority, non-blocking) forked from the caller's stream and joined back to it.
//
//   StreamFork fork(s);                       // side() is s until begin()
//   if (Status st = fork.begin()) return st;  // side() waits for all work queued on s so far
//   ...launch part A on fork.side(), part B on s...
//   if (Status st = fork.join()) return st;   // s waits for all work queued on side()
//
// Memory the caller's stream owns (torch's allocator frees it in that stream's order) is safe
// to use on side() between begin and join, because s waits for side() before it goes on. The
// fork and join are event record/wait pairs, so they are legal inside CUDA graph capture (the
// side stream joins the capture and leaves it at join). One per-device lock is held from begin
// to join so that calls from several host threads do not interleave their records and waits on
// the shared events; only enqueueing happens under it, never a wait for the GPU.
#pragma once

#include <cuda_runtime.h>

#include <mutex>

#include "../kernels.h"

namespace pointops {
namespace cuda_detail {

class StreamFork {
 public:
  explicit StreamFork(cudaStream_t caller) : caller_(caller) {}
  StreamFork(const StreamFork&) = delete;
  StreamFork& operator=(const StreamFork&) = delete;
  ~StreamFork() { join(); }  // an early error return still joins and unlocks

  Status begin() {
    int dev = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err != cudaSuccess) return cudaGetErrorString(err);
    if (dev < 0 || dev >= kDevices) return "pointops: device index beyond the stream-fork table";
    Slot& slot = slots()[dev];
    std::unique_lock<std::mutex> lock(slot.mutex);
    if (slot.side == nullptr) {
      int least = 0, greatest = 0;
      err = cudaDeviceGetStreamPriorityRange(&least, &greatest);
      if (err == cudaSuccess) err = cudaStreamCreateWithPriority(&slot.side, cudaStreamNonBlocking, greatest);
      if (err == cudaSuccess) err = cudaEventCreateWithFlags(&slot.forked, cudaEventDisableTiming);
      if (err == cudaSuccess) err = cudaEventCreateWithFlags(&slot.joined, cudaEventDisableTiming);
      if (err != cudaSuccess) {
        slot.side = nullptr;  // retried on the next call; what was created is kept by the process
        return cudaGetErrorString(err);
      }
    }
    err = cudaEventRecord(slot.forked, caller_);
    if (err == cudaSuccess) err = cudaStreamWaitEvent(slot.side, slot.forked, 0);
    if (err != cudaSuccess) return cudaGetErrorString(err);
    slot_ = &slot;
    lock_ = std::move(lock);
    return nullptr;
  }

  cudaStream_t side() const { return slot_ ? slot_->side : caller_; }

  Status join() {
    if (slot_ == nullptr) return nullptr;
    cudaError_t err = cudaEventRecord(slot_->joined, slot_->side);
    if (err == cudaSuccess) err = cudaStreamWaitEvent(caller_, slot_->joined, 0);
    slot_ = nullptr;
    lock_.unlock();
    return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
  }

 private:
  static constexpr int kDevices = 64;
  struct Slot {
    std::mutex mutex;
    cudaStream_t side = nullptr;
    cudaEvent_t forked = nullptr, joined = nullptr;
  };
  static Slot* slots() {
    static Slot table[kDevices];
    return table;
  }

  cudaStream_t caller_;
  Slot* slot_ = nullptr;
  std::unique_lock<std::mutex> lock_;
};

}  // namespace cuda_detail
}  // namespace pointops
