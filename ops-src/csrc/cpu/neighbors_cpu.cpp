// Ball query and k nearest neighbours on CPU: brute force over the cloud, one query per
// iteration, queries spread over threads.
#include <algorithm>
#include <utility>
#include <vector>

#include "common.h"
#include "parallel.h"

namespace pointops {

namespace {

// Grain that keeps roughly 64k distance evaluations per task.
int64_t query_grain(int64_t N) { return std::max<int64_t>(1, 65536 / std::max<int64_t>(1, N)); }

template <typename T>
void ball_query_one(const T* cloud, int64_t n, const T* q, T r2, bool inclusive, int64_t K,
                    int64_t* idx, int64_t* count, T* dist2) {
  int64_t hits = 0;
  for (int64_t j = 0; j < n && hits < K; ++j) {
    T d = cpu::squared_distance(cloud + 3 * j, q);
    bool hit = inclusive ? (d <= r2) : (d < r2);
    if (hit) {
      idx[hits] = j;
      if (dist2 != nullptr) dist2[hits] = d;
      ++hits;
    }
  }
  *count = hits;
  const int64_t pad_index = hits > 0 ? idx[0] : -1;
  const T pad_dist = hits > 0 && dist2 != nullptr ? dist2[0] : cpu::infinity<T>();
  for (int64_t s = hits; s < K; ++s) {
    idx[s] = pad_index;
    if (dist2 != nullptr) dist2[s] = pad_dist;
  }
}

// The K smallest (d2, index) pairs: a max-heap of the best K so far, so a point that cannot
// enter costs one comparison (pairs compare by distance, then index: equal distances keep the
// lower index).
template <typename T>
void knn_one(const T* cloud, int64_t n, const T* q, int64_t K, T* dist2, int64_t* idx,
             std::vector<std::pair<T, int64_t>>& heap) {
  const int64_t found = std::min(K, n);
  heap.clear();
  for (int64_t j = 0; j < n; ++j) {
    std::pair<T, int64_t> candidate{cpu::squared_distance(cloud + 3 * j, q), j};
    if (static_cast<int64_t>(heap.size()) < found) {
      heap.push_back(candidate);
      std::push_heap(heap.begin(), heap.end());
    } else if (candidate < heap.front()) {
      std::pop_heap(heap.begin(), heap.end());
      heap.back() = candidate;
      std::push_heap(heap.begin(), heap.end());
    }
  }
  std::sort_heap(heap.begin(), heap.end());
  for (int64_t s = 0; s < found; ++s) {
    dist2[s] = heap[s].first;
    idx[s] = heap[s].second;
  }
  for (int64_t s = found; s < K; ++s) {
    dist2[s] = cpu::infinity<T>();
    idx[s] = -1;
  }
}

// Points that query row r = b*M + m searches: its cloud's valid points, or none when m is past
// the cloud's query length.
int64_t searched_points(int64_t r, int64_t N, int64_t M, const int64_t* lengths,
                        const int64_t* query_lengths) {
  const int64_t b = r / M, m = r % M;
  return m < cpu::valid_count(query_lengths, b, M) ? cpu::valid_count(lengths, b, N) : 0;
}

}  // namespace

Status ball_query_cpu(Dtype dt, const void* xyz, const void* query, const int64_t* lengths,
                      const int64_t* query_lengths, int64_t B, int64_t N, int64_t M,
                      double radius, bool inclusive, int64_t K, int64_t* idx, int64_t* count,
                      void* dist2) {
  if (B <= 0 || M <= 0 || K <= 0) return nullptr;
  return cpu::dispatch_float(dt, [&](auto zero) {
    using T = decltype(zero);
    const T* points = static_cast<const T*>(xyz);
    const T* queries = static_cast<const T*>(query);
    T* d2 = static_cast<T*>(dist2);
    const T r2 = static_cast<T>(radius * radius);
    cpu::parallel_for(0, B * M, query_grain(N), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        ball_query_one(points + 3 * N * (r / M), searched_points(r, N, M, lengths, query_lengths),
                       queries + 3 * r, r2, inclusive, K, idx + K * r, count + r,
                       d2 == nullptr ? nullptr : d2 + K * r);
      }
    });
  });
}

Status knn_cpu(Dtype dt, const void* xyz, const void* query, const int64_t* lengths,
               const int64_t* query_lengths, int64_t B, int64_t N, int64_t M, int64_t K,
               void* dist2, int64_t* idx) {
  if (B <= 0 || M <= 0 || K <= 0) return nullptr;
  return cpu::dispatch_float(dt, [&](auto zero) {
    using T = decltype(zero);
    const T* points = static_cast<const T*>(xyz);
    const T* queries = static_cast<const T*>(query);
    T* d2 = static_cast<T*>(dist2);
    cpu::parallel_for(0, B * M, query_grain(N), [&](int64_t r0, int64_t r1) {
      std::vector<std::pair<T, int64_t>> heap;
      for (int64_t r = r0; r < r1; ++r) {
        knn_one(points + 3 * N * (r / M), searched_points(r, N, M, lengths, query_lengths),
                queries + 3 * r, K, d2 + K * r, idx + K * r, heap);
      }
    });
  });
}

}  // namespace pointops
