// A parallel-for for the CPU kernels that keeps them free of torch types. The binding layer
// installs torch's own thread pool as the backend at load time (so torch.set_num_threads is
// honoured and threads are shared with torch); without a backend the loop runs serially.
#pragma once

#include <cstdint>

namespace pointops {
namespace cpu {

using RangeBody = void (*)(int64_t begin, int64_t end, void* ctx);
using ParallelBackend = void (*)(int64_t begin, int64_t end, int64_t grain, RangeBody body,
                                 void* ctx);
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

}  // namespace cpu
}  // namespace pointops
