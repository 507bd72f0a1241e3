// C entry points over the CPU neighbour kernels, for tests/ops/test_cpu_neighbors_packed.py:
// built with the kernel sources into a small shared library and called through ctypes, so the
// packed layout is tested before it has Python bindings. The parallel backend here runs each
// chunk on its own std::thread, so a thread count above 1 exercises the same parallel code.
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "cpu/parallel.h"
#include "kernels.h"
#include "tuning.h"

namespace {

int64_t g_threads = 1;

void thread_backend(int64_t begin, int64_t end, int64_t grain, pointops::cpu::RangeBody body,
                    void* ctx) {
  const int64_t tasks = std::min<int64_t>(g_threads, (end - begin + grain - 1) / grain);
  const int64_t chunk = (end - begin + tasks - 1) / tasks;
  std::vector<std::thread> workers;
  for (int64_t b = begin; b < end; b += chunk) {
    workers.emplace_back(body, b, std::min(end, b + chunk), ctx);
  }
  for (std::thread& w : workers) w.join();
}

int64_t thread_count() { return g_threads; }

pointops::Dtype dtype(int32_t code) { return static_cast<pointops::Dtype>(code); }

}  // namespace

extern "C" {

// brute, kdtree or auto: the CpuNeighborsPath knob.
void shim_set_search_path(const char* path) {
  const int64_t value = std::strcmp(path, "brute") == 0 ? 0 : (std::strcmp(path, "kdtree") == 0 ? 1 : -1);
  pointops::set_tuning(pointops::Knob::CpuNeighborsPath, value);
}

void shim_set_threads(int64_t threads) {
  g_threads = threads < 1 ? 1 : threads;
  pointops::cpu::set_parallel_backend(thread_backend, thread_count);
}

const char* shim_knn_packed(int32_t dt, const void* xyz, const int64_t* ptr, int64_t P,
                            const void* query, const int64_t* qptr, int64_t Q, int64_t B,
                            int64_t K, void* dist2, int64_t* idx) {
  return pointops::knn_packed_cpu(dtype(dt), xyz, ptr, P, query, qptr, Q, B, K, dist2, idx);
}

const char* shim_ball_query_packed(int32_t dt, const void* xyz, const int64_t* ptr, int64_t P,
                                   const void* query, const int64_t* qptr, int64_t Q, int64_t B,
                                   double radius, int32_t inclusive, int64_t K, int64_t* idx,
                                   int64_t* count, void* dist2) {
  return pointops::ball_query_packed_cpu(dtype(dt), xyz, ptr, P, query, qptr, Q, B, radius,
                                         inclusive != 0, K, idx, count, dist2);
}

const char* shim_knn_padded(int32_t dt, const void* xyz, const void* query, const int64_t* lengths,
                            const int64_t* query_lengths, int64_t B, int64_t N, int64_t M,
                            int64_t K, void* dist2, int64_t* idx) {
  return pointops::knn_cpu(dtype(dt), xyz, query, lengths, query_lengths, B, N, M, K, dist2, idx);
}

const char* shim_ball_query_padded(int32_t dt, const void* xyz, const void* query,
                                   const int64_t* lengths, const int64_t* query_lengths,
                                   int64_t B, int64_t N, int64_t M, double radius,
                                   int32_t inclusive, int64_t K, int64_t* idx, int64_t* count,
                                   void* dist2) {
  return pointops::ball_query_cpu(dtype(dt), xyz, query, lengths, query_lengths, B, N, M, radius,
                                  inclusive != 0, K, idx, count, dist2);
}

}  // extern "C"
