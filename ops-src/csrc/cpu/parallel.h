// A parallel-for for the CPU kernels that keeps them free of torch types. The binding layer
// installs torch's own thread pool as the backend at load time (so torch.set_num_threads is
// honoured and threads are shared with torch); without a backend the loop runs serially.
#pragma once

#include <atomic>
#include <cstdint>

namespace pointops {
namespace cpu {

using RangeBody = void (*)(int64_t begin, int64_t end, void* ctx);
using ParallelBackend = void (*)(int64_t begin, int64_t end, int64_t grain, RangeBody body, void* ctx);
using ThreadCountFn = int64_t (*)();

void set_parallel_backend(ParallelBackend backend, ThreadCountFn thread_count);
void parallel_for_raw(int64_t begin, int64_t end, int64_t grain, RangeBody body, void* ctx);
int64_t thread_count();

// Calls f(begin, end) on disjoint chunks covering [begin, end), each at least `grain` long
// (except possibly the last). f must not throw.
template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  if (end <= begin) return;
  RangeBody body = [](int64_t b, int64_t e, void* ctx) { (*static_cast<const F*>(ctx))(b, e); };
  parallel_for_raw(begin, end, grain, body, const_cast<void*>(static_cast<const void*>(&f)));
}

// Calls f(i) for every i in [0, count), handing items out one at a time to the pool's threads
// as they become free: for items of uneven cost (clouds of different sizes, query blocks of
// different difficulty), where fixed chunks would leave threads idle. f must not throw.
template <class F>
void parallel_for_each_dynamic(int64_t count, const F& f) {
  if (count <= 0) return;
  std::atomic<int64_t> next{0};
  const int64_t workers = count < thread_count() ? count : thread_count();
  parallel_for(0, workers, 1, [&](int64_t, int64_t) {
    for (int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < count;
         i = next.fetch_add(1, std::memory_order_relaxed)) {
      f(i);
    }
  });
}

}  // namespace cpu
}  // namespace pointops
