#include "parallel.h"

namespace pointops {
namespace cpu {

namespace {
ParallelBackend g_backend = nullptr;
ThreadCountFn g_thread_count = nullptr;
}  // namespace

void set_parallel_backend(ParallelBackend backend, ThreadCountFn count) {
  g_backend = backend;
  g_thread_count = count;
}

void parallel_for_raw(int64_t begin, int64_t end, int64_t grain, RangeBody body, void* ctx) {
  if (end <= begin) return;
  if (grain < 1) grain = 1;
  if (g_backend == nullptr || end - begin <= grain) {
    body(begin, end, ctx);
    return;
  }
  g_backend(begin, end, grain, body, ctx);
}

int64_t thread_count() {
  if (g_thread_count == nullptr) return 1;
  int64_t n = g_thread_count();
  return n < 1 ? 1 : n;
}

}  // namespace cpu
}  // namespace pointops
