// k nearest neighbours on CPU (three_nn is knn with K = 3), padded and packed layouts. Each cloud
// is searched by brute force or through a kd-tree (spatial_index_cpu.cpp), whichever the cost
// model expects to be faster; both give identical results.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "common.h"
#include "neighbor_batch_cpu.h"
#include "parallel.h"
#include "spatial_index_cpu.h"

namespace pointops {

namespace {

// The K smallest (d2, index) pairs: a max-heap of the best K so far, so a point that cannot
// enter costs one comparison (pairs compare by distance, then index: equal distances keep the
// lower index). Indices are written plus `offset`.
template <typename T>
void knn_brute_force(const T* cloud, int64_t n, const T* q, int64_t K, int64_t offset, T* dist2,
                     int64_t* idx, std::vector<std::pair<T, int64_t>>& heap) {
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
    idx[s] = heap[s].second + offset;
  }
  for (int64_t s = found; s < K; ++s) {
    dist2[s] = cpu::infinity<T>();
    idx[s] = -1;
  }
}

template <typename T>
void fill_empty(int64_t r0, int64_t r1, int64_t K, T* dist2, int64_t* idx) {
  std::fill(dist2 + K * r0, dist2 + K * r1, cpu::infinity<T>());
  std::fill(idx + K * r0, idx + K * r1, int64_t{-1});
}

// Expected cost, in nanoseconds on one core, of answering m queries of one cloud of n points
// by brute force (every point, a heap check each) and through a kd-tree (build, then a
// descent and about a leaf's worth of points per neighbour).
bool knn_wants_tree(int64_t n, int64_t m, int64_t K) {
  if (K * 4 > n) return false;  // most of the cloud is returned anyway: nothing to prune
  const double levels = std::log2(static_cast<double>(n) / 16.0 + 1.0);
  const double brute = 1.0 * static_cast<double>(n) * static_cast<double>(m);
  const double tree = 12.0 * static_cast<double>(n) * (levels + 1.0) +
                      static_cast<double>(m) * (40.0 * levels + 30.0 * static_cast<double>(K) + 300.0);
  return tree < brute;
}

template <typename T>
void knn_clouds(const T* points, const T* queries, const std::vector<cpu::CloudSpan>& clouds,
                int64_t K, T* dist2, int64_t* idx, cpu::SearchPath path) {
  auto wants_tree = [&](const cpu::CloudSpan& c) {
    if (path != cpu::SearchPath::Auto) return path == cpu::SearchPath::KdTree;
    return knn_wants_tree(c.points, c.queries, K);
  };
  cpu::search_clouds(points, queries, clouds, wants_tree, [&](const cpu::CloudSpan& c,
                                                              const cpu::KdTree<T>* tree,
                                                              const int64_t* rows, int64_t row_count) {
    std::vector<std::pair<T, int64_t>> heap;
    std::vector<cpu::Neighbour<T>> found(tree != nullptr ? static_cast<size_t>(K) : 0);
    const T* cloud = points + 3 * c.point_begin;
    for (int64_t i = 0; i < row_count; ++i) {
      const int64_t r = rows[i];
      const T* q = queries + 3 * r;
      T* d2 = dist2 + K * r;
      int64_t* id = idx + K * r;
      if (tree == nullptr || !cpu::finite_point(q)) {
        knn_brute_force(cloud, c.points, q, K, c.index_offset, d2, id, heap);
        continue;
      }
      const int64_t kept = tree->knn(q, K, found.data());
      for (int64_t s = 0; s < kept; ++s) {
        d2[s] = found[s].d2;
        id[s] = found[s].index + c.index_offset;
      }
      for (int64_t s = kept; s < K; ++s) {
        d2[s] = cpu::infinity<T>();
        id[s] = -1;
      }
    }
  });
}

}  // namespace

Status knn_cpu(Dtype dt, const void* xyz, const void* query, const int64_t* lengths,
               const int64_t* query_lengths, int64_t B, int64_t N, int64_t M, int64_t K,
               void* dist2, int64_t* idx) {
  if (B <= 0 || M <= 0 || K <= 0) return nullptr;
  const cpu::SearchPath path = cpu::requested_search_path();
  if (path == cpu::SearchPath::Invalid) return cpu::kInvalidSearchPath;
  return cpu::dispatch_float(dt, [&](auto zero) {
    using T = decltype(zero);
    T* d2 = static_cast<T*>(dist2);
    const std::vector<cpu::CloudSpan> clouds = cpu::padded_clouds(lengths, query_lengths, B, N, M);
    cpu::for_each_uncovered_row(clouds, B * M,
                                [&](int64_t r0, int64_t r1) { fill_empty(r0, r1, K, d2, idx); });
    knn_clouds(static_cast<const T*>(xyz), static_cast<const T*>(query), clouds, K, d2, idx, path);
  });
}

Status knn_packed_cpu(Dtype dt, const void* xyz, const int64_t* ptr, int64_t P, const void* query,
                      const int64_t* qptr, int64_t Q, int64_t B, int64_t K, void* dist2,
                      int64_t* idx) {
  if (Q <= 0 || K <= 0) return nullptr;
  const cpu::SearchPath path = cpu::requested_search_path();
  if (path == cpu::SearchPath::Invalid) return cpu::kInvalidSearchPath;
  return cpu::dispatch_float(dt, [&](auto zero) {
    using T = decltype(zero);
    T* d2 = static_cast<T*>(dist2);
    const int64_t clouds_count = std::max<int64_t>(B, 0);
    const std::vector<cpu::CloudSpan> clouds =
        cpu::packed_clouds(cpu::safe_row_pointer(ptr, clouds_count, std::max<int64_t>(P, 0)),
                           cpu::safe_row_pointer(qptr, clouds_count, Q), clouds_count);
    cpu::for_each_uncovered_row(clouds, Q,
                                [&](int64_t r0, int64_t r1) { fill_empty(r0, r1, K, d2, idx); });
    knn_clouds(static_cast<const T*>(xyz), static_cast<const T*>(query), clouds, K, d2, idx, path);
  });
}

}  // namespace pointops
